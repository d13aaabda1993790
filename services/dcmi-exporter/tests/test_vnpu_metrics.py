"""The 310P's vNPU families (`vnpu_pod_aicore_utilization`, `vnpu_pod_total_memory`,
`vnpu_pod_used_memory`) from the telemetry samples and the vNPUs' holders.

Ported from component/npu-exporter/collector/metrics/collector_for_vnpu_test.go, named after the Go
tests: TestVnpuCollectorIsSupported (2 cases), TestVnpuCollectorDescribe (1),
TestVnpuCollectorUpdatePrometheus (5), TestGetPodDisplayInfo (its valid case; its short container
name has no counterpart: a holder always has its three names, the API refuses an empty one).
TestVnpuCollectorCollectToCache and TestVnpuCollectorUpdateTelegraf have none either (no cache
between the sample and the scrape here, no Telegraf output). TestGetChipListWithVNPU
(npu_collector_test.go) is where we differ on purpose: the chip's own families are not repeated per
vNPU (docs/compatibility.md).
"""

from __future__ import annotations

import pytest
from ascend_common.schemas.exporter import ChipState, ContainerHolder, NodeInfo, SubscriptionState
from ascend_common.schemas.reading import Reading
from dcmi_exporter.backends.base import ChipTelemetry, VnpuActivity
from dcmi_exporter.metrics.families import VNPU_LABELS, ChipCollector
from dcmi_exporter.metrics.holders import ContainerMap, Holders
from dcmi_exporter.node.snapshot import Snapshot
from dcmi_exporter.tasks.telemetry import Samples

from tests.support.chips import exporter_chip

VNPU_FAMILIES = ("vnpu_pod_aicore_utilization", "vnpu_pod_total_memory", "vnpu_pod_used_memory")
VALID_VNPU_ID = 100  # the reference test's validVnpuID
INVALID_VNPU_ID = 1
HOLDER = ContainerHolder(namespace="nsName", pod="podName", container="ctrName")


def node() -> NodeInfo:
    return NodeInfo(
        backend="sim", profile="310p-4", run_id="r", dcmi_version=Reading[str].ok("24.1.rc2"), card_count=1,
        chip_count=1, chips_by_state={}, subscription=SubscriptionState.LIVE, poll_period_s=1.0, started_at=0.0,
        updated_at=0.0, last_event_id=None, ready=True,
    )  # fmt: skip


def activity(vdev_id: int = VALID_VNPU_ID) -> VnpuActivity:
    """createValidVnpuChip's activity, with values apart from each other."""
    return VnpuActivity(vdev_id=vdev_id, aicore=1.0, aicore_pct=31, total_memory=4096, used_memory=1024)


def scrape(
    vnpus: tuple[VnpuActivity, ...],
    vnpu_holders: Holders,
    *,
    name: str = "310P3",
    state: ChipState = ChipState.OK,
    chip_holders: Holders | None = None,
) -> dict[str, list[tuple[dict[str, str], float]]]:
    """family -> its series (labels, value) of one chip (logic 0, phy 2) holding `vnpus`."""
    chip = exporter_chip(0, 2, name=name, board=0x0, state=state)
    snap = Snapshot.build(node(), {0: chip})
    samples = Samples(chips={0: ChipTelemetry(vnpus=vnpus)})
    collector = ChipCollector(lambda: snap, dict, lambda: samples, lambda: chip_holders or {}, lambda: vnpu_holders)
    out: dict[str, list[tuple[dict[str, str], float]]] = {}
    for family in collector.collect():
        out.setdefault(family.name, [])
        for sample in family.samples:
            out[family.name].append((sample.labels, sample.value))
    return out


def vnpu_series(families: dict[str, list[tuple[dict[str, str], float]]]) -> int:
    return sum(len(families[name]) for name in VNPU_FAMILIES)


@pytest.mark.parametrize(("name", "supported"), [("310P3", True), ("910B3", False)])
def test_vnpu_collector_is_supported(name: str, supported: bool) -> None:
    """TestVnpuCollectorIsSupported: the 310P only (supportedVnpuDevices)."""
    families = scrape((activity(),), {VALID_VNPU_ID: (HOLDER,)}, name=name)
    assert vnpu_series(families) == (3 if supported else 0)


def test_vnpu_collector_describe() -> None:
    """TestVnpuCollectorDescribe: three families, even with nothing to show (type, help, labels)."""
    chip = exporter_chip(0, 2, name="310P3", board=0x0)
    snap = Snapshot.build(node(), {0: chip})
    described = {
        family.name: (family.type, family.documentation)
        for family in ChipCollector(lambda: snap, dict).collect()
        if family.name.startswith("vnpu_")
    }
    assert described == {
        "vnpu_pod_aicore_utilization": ("gauge", "the vnpu aicore utilization rate, unit is '%'"),
        "vnpu_pod_total_memory": ("gauge", "the vnpu total memory on pod, unit is 'KB'"),
        "vnpu_pod_used_memory": ("gauge", "the vnpu used memory on pod, unit is 'KB'"),
    }


@pytest.mark.parametrize(
    ("case", "vnpus", "holders", "expected"),
    [
        ("effective virtual device scenarios", (activity(),), {VALID_VNPU_ID: (HOLDER,)}, 3),
        ("there is no container info", (activity(),), {}, 0),
        (
            "multiple containers",
            (activity(),),
            {VALID_VNPU_ID: (ContainerHolder(namespace="ns1", pod="pod1", container="ctr1"),
                             ContainerHolder(namespace="ns2", pod="pod2", container="ctr2"))},
            0,
        ),
        ("the vdevid is invalid", (activity(INVALID_VNPU_ID),), {INVALID_VNPU_ID: (HOLDER,)}, 0),
        ("there is no vdev info", (), {VALID_VNPU_ID: (HOLDER,)}, 0),
    ],
)  # fmt: skip
def test_vnpu_collector_update_prometheus(
    case: str, vnpus: tuple[VnpuActivity, ...], holders: Holders, expected: int
) -> None:
    """TestVnpuCollectorUpdatePrometheus: a series per family only for a vNPU with a valid vdev id
    held by exactly one container."""
    assert vnpu_series(scrape(vnpus, holders)) == expected, case


def test_get_pod_display_info() -> None:
    """TestGetPodDisplayInfo, its valid case: eight labels, the last `true`; here with every value."""
    families = scrape((activity(),), {VALID_VNPU_ID: (HOLDER,)})
    [(labels, value)] = families["vnpu_pod_aicore_utilization"]
    assert list(labels) == VNPU_LABELS and len(labels) == 8 and labels["is_virtual"] == "true"
    assert labels == {
        "id": "2", "model_name": "Ascend310P3", "v_dev_id": "100", "aicore_count": "1.00",
        "namespace": "nsName", "pod_name": "podName", "container_name": "ctrName", "is_virtual": "true",
    }  # fmt: skip
    assert value == 31
    assert [v for _, v in families["vnpu_pod_total_memory"]] == [4096]
    assert [v for _, v in families["vnpu_pod_used_memory"]] == [1024]


def test_each_held_vnpu_of_a_chip_has_its_own_series_and_a_fractional_share_keeps_two_decimals() -> None:
    half = VnpuActivity(vdev_id=101, aicore=0.5, aicore_pct=0, total_memory=1, used_memory=0)
    other = ContainerHolder(namespace="ns", pod="p2", container="c")
    families = scrape((activity(), half), {VALID_VNPU_ID: (HOLDER,), 101: (other,)})
    rows = sorted(
        (labels["v_dev_id"], labels["aicore_count"], labels["pod_name"])
        for labels, _ in families["vnpu_pod_total_memory"]
    )
    assert rows == [("100", "1.00", "podName"), ("101", "0.50", "p2")]


def test_a_chip_that_does_not_answer_has_no_vnpu_series() -> None:
    """Its samples may be a round old; the chip families drop such a chip's series, so these do too."""
    assert vnpu_series(scrape((activity(),), {VALID_VNPU_ID: (HOLDER,)}, state=ChipState.UNKNOWN)) == 0


def test_get_chip_list_with_vnpu_differs_the_chip_families_stay_one_series_per_chip() -> None:
    """TestGetChipListWithVNPU (npu_collector_test.go): the reference hands every collector a copy of
    a 310P chip per vNPU, each labelled with that vNPU's holder. Ours keeps one series per chip,
    labelled with the chip's own holder; the vNPUs' holders are on the vnpu_pod_* series."""
    second = VnpuActivity(vdev_id=101, aicore=1.0, aicore_pct=0, total_memory=1, used_memory=0)
    families = scrape((activity(), second), {VALID_VNPU_ID: (HOLDER,)}, chip_holders={})
    [(labels, _)] = families["npu_chip_info_health_status"]
    assert (labels["id"], labels["namespace"], labels["pod_name"]) == ("2", "", "")
    assert families["machine_npu_nums"][0][1] == 1
    assert vnpu_series(families) == 3  # vNPU 101 is held by no one


def test_the_vnpu_holders_are_forgotten_with_the_chips_ones() -> None:
    """A DELETE, a new mapping without them, or no refresh within the TTL drops the vNPUs' holders too."""
    now = [0.0]
    holders = ContainerMap(ttl_s=10.0, clock=lambda: now[0])
    holders.replace({2: [HOLDER]}, {VALID_VNPU_ID: [HOLDER], 101: []})
    assert holders.current_vnpus() == {VALID_VNPU_ID: (HOLDER,)}  # a vNPU held by none is not kept
    holders.replace({2: [HOLDER]})
    assert holders.current_vnpus() == {}
    holders.replace({}, {VALID_VNPU_ID: [HOLDER]})
    now[0] = 10.0
    assert holders.current_vnpus() == {} and holders.current() == {}
    holders.replace({}, {VALID_VNPU_ID: [HOLDER]})
    holders.clear()
    assert holders.current_vnpus() == {}
