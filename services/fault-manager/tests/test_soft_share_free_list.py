"""The free list under soft share: FreeListUse keeps what the pods hold and their quota sums one pod event at a
time, `kept_from_free_list` is the quota rule, and the reactor publishes both with the first chip's HBM size."""

from __future__ import annotations

import asyncio
import random
from collections.abc import AsyncIterator, Iterable
from pathlib import Path
from types import MappingProxyType

import pytest
from ascend_common.chips import ChipFamily
from ascend_common.clock import ManualClock
from ascend_common.faults import default_fault_code_table, default_fault_customization, default_switch_fault_table
from ascend_common.inuse import ASCEND_REAL, KLT_DEV, allocation_share, chips_in_use_for_allocation, quota_use
from ascend_common.pods import SlimPod
from ascend_common.schemas.exporter import Chip, ChipList, Hbm
from ascend_common.schemas.reading import Reading
from ascend_common.softshare import AICORE_QUOTA, HBM_QUOTA, SCHEDULING_POLICY, is_soft_share
from fault_manager.hotreset.jobs import TrainingJobs
from fault_manager.policy.engine import FaultEngine, Policy
from fault_manager.publishing.reports import device_info, kept_from_free_list
from fault_manager.reactor.chips_in_use import FreeListUse, PodUse, QuotaSum
from fault_manager.reactor.inputs import Inbox, Snapshot
from fault_manager.reactor.published import NodeState, Published
from fault_manager.reactor.reactor import Reactor, first_chip_hbm_mb
from fault_manager.reactor.verdicts import VerdictBoard

from tests.support.chips import exporter_chip
from tests.support.reactor import running_reactor

HBM_MB = 65536
SLOTS = ",".join(f"Ascend910-1-{i}" for i in range(30))  # anonymous kubelet ids: they name no chip


def slim(
    uid: str, annotations: dict[str, str], phase: str = "Running", rv: int = 1, name: str | None = None
) -> SlimPod:
    return SlimPod(
        namespace="ml", name=name or f"pod-{uid}", uid=uid, phase=phase, node_name="node-a",
        annotations=MappingProxyType(annotations), labels=MappingProxyType({}), requests=MappingProxyType({}),
        deleting=False, created=0.0, resource_version=str(rv),
    )  # fmt: skip


def soft(
    uid: str, aicore: int | str, hbm: int | str = 1024, policy: str = "elastic", real: str = "Ascend910-0"
) -> SlimPod:
    return slim(
        uid,
        {ASCEND_REAL: real, KLT_DEV: SLOTS, AICORE_QUOTA: str(aicore), HBM_QUOTA: str(hbm), SCHEDULING_POLICY: policy},
    )


def whole(uid: str, chip: str) -> SlimPod:
    return slim(uid, {ASCEND_REAL: chip, KLT_DEV: chip})


def use_of(pods: Iterable[SlimPod]) -> PodUse:
    """The full pass FreeListUse must agree with."""
    pods = list(pods)
    sums: dict[str, QuotaSum] = {}
    for pod in pods:
        use = quota_use(pod) if is_soft_share(pod.annotations) and allocation_share(pod) else None
        if use is not None:
            old = sums.get(use.chip, QuotaSum())
            sums[use.chip] = QuotaSum(old.aicore + use.aicore, old.hbm_mb + use.hbm_mb)
    return PodUse(
        frozenset(chips_in_use_for_allocation(p for p in pods if not is_soft_share(p.annotations))),
        frozenset(chips_in_use_for_allocation(p for p in pods if is_soft_share(p.annotations))),
        sums,
    )


def free_list(pods: Iterable[SlimPod], chips: Iterable[str], hbm_mb: int = HBM_MB) -> set[str]:
    tracker = FreeListUse()
    for pod in pods:
        tracker.changed("ADDED", pod)
    use = tracker.use()
    return {chip for chip in chips if not kept_from_free_list(chip, use, hbm_mb)}


# ---- the rule (issue 23's "Must show", HBM 65536) ---------------------------------------------


@pytest.mark.parametrize(
    ("case", "pods", "free"),
    [
        ("(30, 16384) + (70, 8192): the AI cores are all taken", [soft("a", 30, 16384), soft("b", 70, 8192)], False),
        ("(30) + (40): room left", [soft("a", 30), soft("b", 40)], True),
        ("(30, 65536): the HBM is all taken", [soft("a", 30, 65536)], False),
        ("(30, 65535): 1 MB left", [soft("a", 30, 65535)], True),
        ("(99) + (0): one core left", [soft("a", 99), soft("b", 0)], True),
        ("policy gold is not counted", [soft("a", 30), soft("b", 70, policy="gold")], True),
        ("nor an unparsable quota", [soft("a", 30), soft("b", "seventy")], True),
        ("nor a negative one", [soft("a", 100), soft("b", -50)], False),
        ("a whole-chip pod too: used", [soft("a", 30), whole("b", "Ascend910-0")], False),
        ("a whole-chip pod alone: used", [whole("b", "Ascend910-0")], False),
        ("no pod: free", [], True),
        ("a finished soft-share pod holds nothing", [slim("a", dict(soft("a", 100).annotations), "Succeeded")], True),
    ],
)
def test_the_quota_rule(case: str, pods: list[SlimPod], free: bool) -> None:
    assert ("Ascend910-0" in free_list(pods, ["Ascend910-0"])) is free, case


def test_a_soft_share_pods_slots_leave_the_chip_they_spell_free() -> None:
    """kltDev Ascend910-1-0..29 with AscendReal Ascend910-0: chip 1 stays free (before issue 23 it was used)."""
    assert free_list([soft("a", 30)], ["Ascend910-0", "Ascend910-1"]) == {"Ascend910-0", "Ascend910-1"}
    assert free_list([soft("a", 100)], ["Ascend910-0", "Ascend910-1"]) == {"Ascend910-1"}


def test_with_the_hbm_size_unknown_every_chip_soft_share_pods_hold_is_used() -> None:
    """Reference filterSoftShareDevices: npuChipMemory 0 leaves the used chips used."""
    pods = [soft("a", 10, real="Ascend910-0"), whole("b", "Ascend910-2")]
    assert free_list(pods, [f"Ascend910-{i}" for i in range(4)], hbm_mb=0) == {"Ascend910-1", "Ascend910-3"}


def test_quotas_sum_per_chip() -> None:
    pods = [soft("a", 60, real="Ascend910-0"), soft("b", 60, real="Ascend910-1")]
    assert free_list(pods, ["Ascend910-0", "Ascend910-1"]) == {"Ascend910-0", "Ascend910-1"}


# Reference pkg/device/ascendcommon_test.go TestFilterSoftShareDevices. Its "soft share off" case has no
# counterpart: ours tells a soft-share pod by its annotation, and a chip other pods hold is used either way.
# Its npu2, used and listed in no device, is ours a chip a whole-chip pod holds.
@pytest.mark.parametrize(
    ("name", "hbm_mb", "pods", "used"),
    [
        (
            "Supporting soft shared devices but memory is 0, directly return the original set",
            0,
            PodUse(shared=frozenset({"npu-2"})),
            {"npu-2"},
        ),
        (
            "sufficient device resources filter available devices",
            2 * 1024,
            PodUse(
                whole=frozenset({"npu-2"}),
                shared=frozenset({"npu-0", "npu-1"}),
                quotas={"npu-0": QuotaSum(50, 1024), "npu-1": QuotaSum(100, 2 * 1024)},
            ),
            {"npu-1", "npu-2"},
        ),
    ],
)
def test_filter_soft_share_devices(name: str, hbm_mb: int, pods: PodUse, used: set[str]) -> None:
    chips = ["npu-0", "npu-1", "npu-2"]
    assert {chip for chip in chips if kept_from_free_list(chip, pods, hbm_mb)} == used, name


# ---- the sums (reference pkg/server/manager_test.go) ------------------------------------------
# Its card names `card-0` are ours `Ascend910-0` (an AscendReal must name a chip); its pods, with no
# phase (active there), are Running here (our free list counts Pending and Running pods); it keeps the
# last pod's policy with the sums, which nothing reads: ours keeps none (quota_use has the pod's).


def sums(pods: Iterable[SlimPod]) -> dict[str, QuotaSum]:
    tracker = FreeListUse()
    for pod in pods:
        tracker.changed("ADDED", pod)
    return dict(tracker.use().quotas)


def test_calculate_card_used_resource_quota_1() -> None:
    assert sums([]) == {}, "Empty podDeviceInfoList returns empty map"
    pod = soft("1", 10, 1024, "fixed-share")
    assert sums([pod]) == {"Ascend910-0": QuotaSum(10, 1024)}, "Single pod with valid annotations"
    use = quota_use(pod)
    assert use is not None and use.policy == 1


def test_calculate_card_used_resource_quota_2() -> None:
    pods = [soft("1", 10, 1024, "fixed-share"), soft("2", 20, 2048, "fixed-share")]
    assert sums(pods) == {"Ascend910-0": QuotaSum(30, 3 * 1024)}, "Multiple pods for same card sum up quota"


def test_calculate_card_used_resource_quota_3() -> None:
    assert sums([slim("1", {AICORE_QUOTA: "10"})]) == {}, "Pod missing AscendReal annotation is skipped"
    assert sums([soft("1", "invalid", 1024, "fixed-share")]) == {}, "Pod with invalid annotation value is skipped"


def test_calculate_card_used_resource_quota_4() -> None:
    pods = [soft("1", 10, 1024, "fixed-share", "Ascend910-0"), soft("2", 30, 3072, "elastic", "Ascend910-1")]
    assert sums(pods) == {"Ascend910-0": QuotaSum(10, 1024), "Ascend910-1": QuotaSum(30, 3 * 1024)}
    assert [u.policy for u in map(quota_use, pods) if u is not None] == [1, 2]


def test_update_quota() -> None:
    """TestUpdateQuota: only the chips the sums name have any (the error branch has no counterpart: the sums
    cannot fail)."""
    pods = sums([soft("1", 100, 1024, real="Ascend910-0")])
    assert pods.get("Ascend910-0") == QuotaSum(100, 1024)
    assert "Ascend910-1" not in pods


def test_the_sums_follow_every_event_as_a_full_pass_would() -> None:
    tracker = FreeListUse()
    cache: dict[str, SlimPod] = {}
    rng = random.Random(23)
    chips = [f"Ascend910-{i}" for i in range(3)]
    for rv in range(1, 1500):
        uid = str(rng.randrange(10))
        if rng.random() < 0.2 and uid in cache:
            tracker.changed("DELETED", cache.pop(uid))
        else:
            chip = rng.choice(chips)
            annotations = {ASCEND_REAL: rng.choice([chip, f"{chip},{rng.choice(chips)}", "junk"]), KLT_DEV: SLOTS}
            if rng.random() < 0.7:
                annotations[AICORE_QUOTA] = rng.choice(["10", "30", "70", "x", "-5"])
                annotations[HBM_QUOTA] = rng.choice(["1024", "30000", "65536", ""])
                annotations[SCHEDULING_POLICY] = rng.choice(["elastic", "fixed-share", "gold"])
            if rng.random() < 0.2:
                del annotations[ASCEND_REAL]
            pod = slim(uid, annotations, rng.choice(["Pending", "Running", "Succeeded", "Unknown"]), rv)
            tracker.changed("MODIFIED" if uid in cache else "ADDED", pod)
            cache[uid] = pod
        assert tracker.use() == use_of(cache.values()), rv


def test_an_unsummed_pod_is_logged_once_naming_it(caplog: pytest.LogCaptureFixture) -> None:
    tracker = FreeListUse()
    pod = soft("a", 30, policy="gold")
    for rv in range(3):
        tracker.changed("MODIFIED", slim("a", dict(pod.annotations), rv=rv, name="infer-0"))
    logged = [r for r in caplog.records if "not summed" in r.getMessage()]
    assert len(logged) == 1
    assert logged[0].__dict__["pod"] == "ml/infer-0"
    assert logged[0].__dict__["annotations"][SCHEDULING_POLICY] == "gold"


# ---- the first chip's HBM size (reference TestGetChipMemory) ----------------------------------


def with_hbm(chip: Chip, hbm: Reading[Hbm] | None) -> Chip:
    assert chip.dynamic is not None
    if hbm is None:
        return chip.model_copy(update={"dynamic": None})
    return chip.model_copy(update={"dynamic": chip.dynamic.model_copy(update={"hbm": hbm})})


def hbm_ok(total_mb: int) -> Reading[Hbm]:
    return Reading[Hbm].ok(Hbm(total_mb=total_mb, used_mb=0))


@pytest.mark.parametrize(
    ("name", "first", "expected"),
    [
        ("On-chip memory not enabled, return 0", Reading[Hbm].error(-8255), 0),
        ("On-chip memory enabled but get HBM info failed, return 0", Reading[Hbm].error(-8005), 0),
        ("not read yet, return 0", None, 0),
        ("On-chip memory enabled and get HBM info success, return correct memory size", hbm_ok(HBM_MB), HBM_MB),
    ],
)
def test_get_chip_memory(name: str, first: Reading[Hbm] | None, expected: int) -> None:
    # The first chip by logic id decides, wherever the exporter lists it.
    chips = [with_hbm(exporter_chip(1, 1), hbm_ok(32768)), with_hbm(exporter_chip(0, 0), first)]
    assert first_chip_hbm_mb(ChipList(last_event_id=None, chips=chips)) == expected, name
    assert first_chip_hbm_mb(ChipList(last_event_id=None, chips=[])) == 0


def test_the_hbm_size_is_read_on_the_families_with_on_chip_memory_only() -> None:
    """common.HasOnChipMemory: 910A, 910B, A3, 950; a 310P's memory is no HBM, whatever the reading says."""
    chip = with_hbm(exporter_chip(0, 0, name="310P3"), hbm_ok(HBM_MB))
    assert chip.family is ChipFamily.ASCEND310P
    assert first_chip_hbm_mb(ChipList(last_event_id=None, chips=[chip])) == 0
    a5 = with_hbm(exporter_chip(0, 0, name="Ascend950DT", board=0x20, card_id=-1), hbm_ok(131072))
    assert a5.family is ChipFamily.ASCEND950
    assert first_chip_hbm_mb(ChipList(last_event_id=None, chips=[a5])) == 131072


# ---- the reactor ------------------------------------------------------------------------------


def free(published: Published) -> set[str]:
    return {r.name for r in device_info(published.state).reports if r.healthy and not r.in_use}


async def settled(inbox: Inbox) -> None:
    """Until the pod changes queued so far are published: PodsListed ends their settle at once and is
    answered after the step that publishes them."""
    await inbox.pods_listed()


@pytest.fixture
async def running(tmp_path: Path) -> AsyncIterator[tuple[Reactor, Inbox, Published]]:
    async with running_reactor(tmp_path) as rig:
        yield rig


async def test_the_reactor_publishes_the_quota_rule_with_the_first_chips_hbm(
    running: tuple[Reactor, Inbox, Published], caplog: pytest.LogCaptureFixture
) -> None:
    _, inbox, published = running
    chips = [exporter_chip(i, i) for i in range(4)]  # their HBM unsupported: the size is unknown
    inbox.put(Snapshot(ChipList(last_event_id="run-1", chips=chips), switch_faults=None))
    async with asyncio.timeout(5):
        await published.inventory.wait()
        inbox.pod_changed("ADDED", soft("a", 30, 16384))
        await settled(inbox)
        assert free(published) == {"Ascend910-1", "Ascend910-2", "Ascend910-3"}, "HBM unknown: a held chip is used"
        assert sum("HBM size is unknown" in r.getMessage() for r in caplog.records) == 1

        sized = [with_hbm(chips[0], hbm_ok(HBM_MB)), *chips[1:]]
        inbox.put(Snapshot(ChipList(last_event_id="run-1", chips=sized), switch_faults=None))
        await settled(inbox)
        assert published.state.hbm_mb == HBM_MB
        assert free(published) == {f"Ascend910-{i}" for i in range(4)}, "kltDev Ascend910-1-..: chip 1 stays free"

        inbox.pod_changed("ADDED", soft("b", 70, 8192))
        await settled(inbox)
        assert "Ascend910-0" not in free(published), "Σaicore 100"
        inbox.pod_changed("DELETED", soft("b", 70, 8192))
        await settled(inbox)
        assert "Ascend910-0" in free(published)

        # A later listing with the chip unread keeps the size learnt.
        inbox.put(Snapshot(ChipList(last_event_id="run-1", chips=chips), switch_faults=None))
        await settled(inbox)
        assert published.state.hbm_mb == HBM_MB and "Ascend910-0" in free(published)
        assert sum("HBM size is unknown" in r.getMessage() for r in caplog.records) == 1


async def test_pods_listed_publishes_the_pods_queued_before_it_without_waiting_for_the_settle(
    running: tuple[Reactor, Inbox, Published],
) -> None:
    """The first device-info write follows PodsListed: a chip a listed pod holds is off the free list
    by the time it is answered (test_pods_in_use_leave_the_free_list... saw it free, once, before)."""
    _, inbox, published = running
    chips = [exporter_chip(i, i) for i in range(2)]
    inbox.put(Snapshot(ChipList(last_event_id="run-1", chips=chips), switch_faults=None))
    async with asyncio.timeout(5):
        await published.inventory.wait()
        inbox.pod_changed("ADDED", whole("train-0", "Ascend910-1"))
        await inbox.admin_edits(set(), set())  # answered before the settle ends: not yet published
        assert free(published) == {"Ascend910-0", "Ascend910-1"}
        await inbox.pods_listed()
        assert free(published) == {"Ascend910-0"}


# ---- hot reset ------------------------------------------------------------------------------


async def test_hot_reset_counts_a_soft_share_pod_on_its_ascend_real_chip_only() -> None:
    """A chip soft-share pods hold is in use for reset whatever their quotas (any holder); the chip their
    kltDev slots spell is not."""
    engine = FaultEngine(
        Policy(default_fault_code_table(), default_fault_customization(), default_switch_fault_table())
    )
    jobs = TrainingJobs(Published(VerdictBoard(), NodeState(engine.policy)), ManualClock())
    pods = [soft("a", 10)]  # no job label: a group it uses cannot be reset in place
    assert await jobs.of_group([exporter_chip(1, 1)], pods) == ({}, None)
    assert await jobs.of_group([exporter_chip(0, 0)], pods) == ({}, "pod ml/pod-a uses the group and belongs to no job")
