"""Soft-share Allocate and cleanup (issue 23), in process: the allocator as app.py wires it, a
FakePods cache, and real files in a tmp npu-info directory and config directory.

The issue's "Must show" Allocate vectors are here word for word (the file, the mounts, the envs,
AscendReal); so are the refusals with the disk untouched, the vids, and the A/B deletions.
"""

from __future__ import annotations

import asyncio
import logging
import os
import stat
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path

import grpc
import pytest
from ascend_common.adapters.kubelet import deviceplugin_pb2 as pb
from ascend_common.chips import ResourceType
from ascend_common.faults import default_fault_code_table
from ascend_common.inuse import ASCEND_REAL, KLT_DEV
from ascend_common.schemas.exporter import Chip
from ascend_common.softshare import AICORE_QUOTA, HBM_QUOTA, SCHEDULING_POLICY, VNPU_ID
from ascend_device_plugin.allocation.annotations import CONFIG_910_KEY, TAKEN
from ascend_device_plugin.allocation.chip_owners import ChipOwners
from ascend_device_plugin.allocation.refusals import AllocationError, Refusal
from ascend_device_plugin.allocation.report import HostFacts
from ascend_device_plugin.allocator import Allocator
from ascend_device_plugin.inventory.views import ViewBoard
from ascend_device_plugin.kubelet.server import status_of
from ascend_device_plugin.metrics import PluginMetrics
from ascend_device_plugin.model.chip_pod import PodView
from ascend_device_plugin.resources.manager import ResourceManager
from ascend_device_plugin.softshare.dirs import SoftShareDirs
from ascend_device_plugin.softshare.files import HostFiles
from ascend_device_plugin.volcano.annotations import kubelet_map, pick_pod

from tests.support.allocator import held_by, wired_allocator
from tests.support.chips import exporter_chip
from tests.support.pod_source import FakePods

DIE = "00000001-0000ABCD-00000000-00000000-00000012"
DIE1 = "00000002-00000000-00000000-00000000-00000001"
QUOTAS = {AICORE_QUOTA: "30", HBM_QUOTA: "16384", SCHEDULING_POLICY: "elastic"}
JOB1 = {"volcano.sh/job-name": "job1"}
R = "Ascend910"


def chips(n: int = 2) -> dict[int, Chip]:
    return {p: exporter_chip(p, p, vdie=[DIE, DIE1, None][min(p, 2)]) for p in range(n)}


def ss_pod(
    name: str = "p1",
    *,
    quotas: Mapping[str, str] = QUOTAS,
    labels: Mapping[str, str] = JOB1,
    chip: str = "Ascend910-0",
    count: int = 30,
    predicate: str = "1",
    phase: str = "Pending",
) -> PodView:
    return PodView(
        namespace="default", name=name, uid=f"uid-{name}", phase=phase,
        annotations={f"huawei.com/{R}": chip, "predicate-time": predicate, **quotas},
        requests={f"huawei.com/{R}": count}, labels=labels, created=1.0,
    )  # fmt: skip


def setup(tmp_path: Path, pods: list[PodView], n: int = 2) -> tuple[Allocator, FakePods, Path, Path]:
    board = ViewBoard()
    manager = ResourceManager(board, default_fault_code_table(), PluginMetrics(), share_count=100, soft_share=True)
    manager.set_chips(chips(n))
    enpu, ss = tmp_path / "enpu", tmp_path / "ss"
    enpu.mkdir()
    source = FakePods(items=list(pods))
    alloc = wired_allocator(
        manager, board, source, lambda: HostFacts(host_ip="10.0.0.5"), volcano=True, soft_share=True,
        npu_info_dir=enpu, soft_share_dir=ss, taken_wait_s=0.001,
    )  # fmt: skip
    return alloc, source, enpu, ss


def request(*containers: list[str]) -> pb.AllocateRequest:
    return pb.AllocateRequest(container_requests=[pb.ContainerAllocateRequest(devices_ids=c) for c in containers])


def ids(phy: int, count: int, start: int = 0) -> list[str]:
    return [f"{R}-{phy}-{i}" for i in range(start, start + count)]


def tree(root: Path) -> list[tuple[str, int, str]]:
    """Every path under `root` with its mode and (for a file) its text: the disk as a test sees it."""
    out = []
    for path in sorted(root.rglob("*")):
        mode = stat.S_IMODE(path.lstat().st_mode)
        out.append((str(path.relative_to(root)), mode, path.read_text() if path.is_file() else ""))
    return out


# ---- the Allocate vector ------------------------------------------------------------------


async def test_must_show_allocate_writes_the_file_and_answers_with_the_chip_and_the_mounts(tmp_path: Path) -> None:
    alloc, pods, enpu, ss = setup(tmp_path, [ss_pod()])
    resp = await alloc.allocate(R, request(ids(1, 30)))  # the 30 ids Ascend910-1-0..29: anonymous
    config = enpu / "default.job1" / "0_0" / "npu_info.config"
    assert config.read_text() == (
        "physical-npu-id=0\nvirtual-npu-id=0\naicore-quota=30\nmemory-quota=16384\n"
        "shm-id=00000001-0000ABCD-00000000-00000000-00000012\nscheduling-policy=2"
    )
    assert stat.S_IMODE(config.stat().st_mode) == 0o644
    assert stat.S_IMODE(config.parent.stat().st_mode) == 0o755
    assert stat.S_IMODE(config.parent.parent.stat().st_mode) == 0o755
    shm = ss / "0" / DIE
    assert shm.read_bytes() == b""
    assert stat.S_IMODE(shm.stat().st_mode) == 0o666
    [c] = resp.container_responses
    assert dict(c.envs) == {"ASCEND_VISIBLE_DEVICES": "0", "ASCEND_RUNTIME_OPTIONS": ""}
    assert [(m.container_path, m.host_path, m.read_only) for m in c.mounts] == [
        (f"/dev/shm/{DIE}", str(shm), False),
        ("/etc/enpu/vcann-rt/", str(config.parent), True),
    ]
    await alloc.stop()  # the report goes out after the answer
    [(_, _, taken), (ns, name, report)] = pods.patches
    assert taken == {"predicate-time": TAKEN}
    assert (ns, name) == ("default", "p1")
    assert report[ASCEND_REAL] == "Ascend910-0"
    assert report[KLT_DEV] == ",".join(sorted(ids(1, 30)))
    assert report[VNPU_ID] == "0"
    assert '"device_id":"0"' in report[CONFIG_910_KEY]  # the device configuration, as on the Volcano path


async def test_must_show_vids(tmp_path: Path) -> None:
    # job2 on chip 0 after job1 -> 0_1; 0_0, 0_1, 0_3 taken -> 0_2; chip 1 -> 1_0.
    pods = [
        ss_pod("a", predicate="1"),
        ss_pod("b", labels={"volcano.sh/job-name": "job2"}, predicate="2"),
        ss_pod("c", labels={"volcano.sh/job-name": "job3"}, predicate="3"),
        ss_pod("d", chip="Ascend910-1", predicate="4"),
    ]
    alloc, _, enpu, _ = setup(tmp_path, pods)
    await alloc.allocate(R, request(ids(0, 30)))
    await alloc.allocate(R, request(ids(0, 30, 30)))
    assert (enpu / "default.job2" / "0_1" / "npu_info.config").is_file()
    (enpu / "default.other" / "0_3").mkdir(parents=True)
    await alloc.allocate(R, request(ids(0, 30, 60)))
    assert "virtual-npu-id=2" in (enpu / "default.job3" / "0_2" / "npu_info.config").read_text()
    await alloc.allocate(R, request(ids(1, 30)))
    assert "physical-npu-id=1\nvirtual-npu-id=0" in (enpu / "default.job1" / "1_0" / "npu_info.config").read_text()
    await alloc.stop()


async def test_must_show_quota_30_request_29_is_not_a_candidate(tmp_path: Path) -> None:
    alloc, pods, _, _ = setup(tmp_path, [ss_pod()])
    before = tree(tmp_path)
    with pytest.raises(AllocationError) as err:
        await alloc.allocate(R, request(ids(0, 29)))
    assert err.value.kind is Refusal.NO_POD  # today's "no pod" refusal
    assert status_of(err.value) is grpc.StatusCode.FAILED_PRECONDITION
    assert tree(tmp_path) == before
    assert pods.patches == []


@pytest.mark.parametrize(
    ("pod", "cause"),
    [
        (ss_pod(labels={}), "the pod has none of the job labels"),  # no job label
        (ss_pod(quotas={**QUOTAS, SCHEDULING_POLICY: "gold"}), "policy 'gold' is not one of"),  # policy gold
        (ss_pod(quotas={**QUOTAS, HBM_QUOTA: "0"}), "hbmQuota 0 is not at least 1"),
        (ss_pod(quotas={AICORE_QUOTA: "30", SCHEDULING_POLICY: "elastic"}), "missing or empty annotations"),
        (ss_pod(chip="Ascend910-0,Ascend910-1"), "soft share gives a pod one chip; huawei.com/Ascend910 names 2"),
        (ss_pod(chip="Ascend910-2"), "Volcano chose chip Ascend910-2, which this node does not have"),
    ],
)
async def test_must_show_refusals_name_the_pod_and_leave_the_disk_untouched(
    tmp_path: Path, pod: PodView, cause: str
) -> None:
    alloc, pods, _, _ = setup(tmp_path, [pod])
    before = tree(tmp_path)
    with pytest.raises(AllocationError) as err:
        await alloc.allocate(R, request(ids(0, 30)))
    assert err.value.kind is Refusal.SOFT_SHARE
    assert status_of(err.value) is grpc.StatusCode.FAILED_PRECONDITION
    assert err.value.message.startswith("pod default/p1: soft share: ")
    assert cause in err.value.message
    assert tree(tmp_path) == before
    assert pods.patches == []  # not even marked taken: it can be fixed and served


async def test_with_both_apis_a_chip_a_claim_holds_is_refused_with_the_disk_untouched(tmp_path: Path) -> None:
    """`--kubelet-api both`: the chip Volcano chose leaves the DRA side before anything is written; a
    claim holding it refuses the Allocate, the pod not marked taken (Volcano may place it again)."""
    owners = ChipOwners()
    owners.reserve("claim-uid", ["Ascend910-0"], 0.0)
    alloc, pods, _, _ = setup(tmp_path, [ss_pod()])
    alloc.containers.hold = held_by(owners)
    before = tree(tmp_path)
    with pytest.raises(AllocationError) as err:
        await alloc.allocate(R, request(ids(0, 30)))
    assert status_of(err.value) is grpc.StatusCode.FAILED_PRECONDITION
    assert err.value.message == "Ascend910-0 held by claim uid claim-uid"
    assert tree(tmp_path) == before and pods.patches == []

    owners.release("claim-uid")
    await alloc.allocate(R, request(ids(0, 30)))
    assert owners.device_plugin(0.0) == {"Ascend910-0"}
    await alloc.stop()


async def test_an_unknown_die_id_is_refused(tmp_path: Path) -> None:
    alloc, _, _, _ = setup(tmp_path, [ss_pod(chip="Ascend910-2")], n=3)  # chip 2: the exporter read no VDIE
    before = tree(tmp_path)
    with pytest.raises(AllocationError, match="the chip's VDIE id is unknown") as err:
        await alloc.allocate(R, request(ids(2, 30)))
    assert status_of(err.value) is grpc.StatusCode.FAILED_PRECONDITION
    assert tree(tmp_path) == before


async def test_a_missing_npu_info_dir_is_refused_and_not_made(tmp_path: Path) -> None:
    alloc, _, enpu, _ = setup(tmp_path, [ss_pod()])
    enpu.rmdir()
    before = tree(tmp_path)
    with pytest.raises(AllocationError, match=r"npu-info directory .* is missing") as err:
        await alloc.allocate(R, request(ids(0, 30)))
    assert err.value.pod == "default/p1"
    assert tree(tmp_path) == before


async def test_a_quota_atoi_rejects_is_a_reject_not_a_candidate(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    alloc, _, _, _ = setup(tmp_path, [ss_pod(quotas={**QUOTAS, AICORE_QUOTA: "thirty"})])
    with caplog.at_level(logging.WARNING), pytest.raises(AllocationError, match="1 with a malformed annotation"):
        await alloc.allocate(R, request(ids(0, 30)))
    [record] = [r for r in caplog.records if r.getMessage() == "pod skipped: bad soft-share annotation"]
    assert "aicoreQuota 'thirty' is not an integer" in record.__dict__["reason"]
    assert record.__dict__["pod"] == "default/p1"


async def test_every_container_gets_the_chip_and_the_mounts(tmp_path: Path) -> None:
    alloc, _, _, _ = setup(tmp_path, [ss_pod()])
    resp = await alloc.allocate(R, request(ids(1, 10), ids(1, 20, 10)))  # 30 ids over two containers
    assert [dict(c.envs)["ASCEND_VISIBLE_DEVICES"] for c in resp.container_responses] == ["0", "0"]
    assert all(len(c.mounts) == 2 for c in resp.container_responses)
    await alloc.stop()


async def test_two_allocates_for_one_chip_at_once_get_two_vids(tmp_path: Path) -> None:
    pods = [ss_pod("a", predicate="1"), ss_pod("b", predicate="2")]
    alloc, _, enpu, _ = setup(tmp_path, pods)
    await asyncio.gather(alloc.allocate(R, request(ids(0, 30))), alloc.allocate(R, request(ids(0, 30, 30))))
    assert sorted(p.name for p in (enpu / "default.job1").iterdir()) == ["0_0", "0_1"]
    await alloc.stop()


async def test_the_950_uses_the_ddie(tmp_path: Path) -> None:
    board = ViewBoard()
    manager = ResourceManager(board, default_fault_code_table(), PluginMetrics(), share_count=100, soft_share=True)
    manager.set_chips(
        {0: exporter_chip(0, 0, name="Ascend950DT", board=0x50, aicore=25, card_id=-1, vdie="V", ddie=DIE)}
    )
    enpu = tmp_path / "enpu"
    enpu.mkdir()
    pod = PodView(
        namespace="default", name="p1", uid="u", phase="Pending", labels=JOB1, created=1.0,
        annotations={"huawei.com/npu": "npu-0", "predicate-time": "1", **QUOTAS}, requests={"huawei.com/npu": 30},
    )  # fmt: skip
    alloc = wired_allocator(
        manager, board, FakePods(items=[pod]), HostFacts, volcano=True, soft_share=True, npu_info_dir=enpu,
        soft_share_dir=tmp_path / "ss",
    )  # fmt: skip
    resp = await alloc.allocate("npu", request([f"npu-0-{i}" for i in range(30)]))
    assert f"shm-id={DIE}\n" in (enpu / "default.job1" / "0_0" / "npu_info.config").read_text()
    assert resp.container_responses[0].mounts[0].container_path == f"/dev/shm/{DIE}"
    await alloc.stop()


async def test_the_950_reads_volcanos_soft_share_annotation_as_a_logic_id(tmp_path: Path) -> None:
    """Volcano's chip1softsharedev writes `npu-<logic id>` on a 950 node (SetNPUTopologyToPodFn maps
    the chosen phy id to baseDeviceInfos' DeviceID): logic 1 is phy 0 here, so the pod gets chip
    npu-0 (its DDIE, its directory, AscendReal) and ASCEND_VISIBLE_DEVICES names logic 1."""
    board = ViewBoard()
    manager = ResourceManager(board, default_fault_code_table(), PluginMetrics(), share_count=100, soft_share=True)
    a5 = {"name": "Ascend950DT", "board": 0x50, "aicore": 25, "card_id": -1, "vdie": "V"}
    manager.set_chips({0: exporter_chip(0, 1, ddie=DIE1, **a5), 1: exporter_chip(1, 0, ddie=DIE, **a5)})  # type: ignore[arg-type]
    enpu = tmp_path / "enpu"
    enpu.mkdir()
    pod = PodView(
        namespace="default", name="p1", uid="u", phase="Pending", labels=JOB1, created=1.0,
        annotations={"huawei.com/npu": "npu-1", "predicate-time": "1", **QUOTAS}, requests={"huawei.com/npu": 30},
    )  # fmt: skip
    pods = FakePods(items=[pod])
    alloc = wired_allocator(
        manager, board, pods, HostFacts, volcano=True, soft_share=True, npu_info_dir=enpu,
        soft_share_dir=tmp_path / "ss",
    )  # fmt: skip
    resp = await alloc.allocate("npu", request([f"npu-1-{i}" for i in range(30)]))
    config = (enpu / "default.job1" / "0_0" / "npu_info.config").read_text()
    assert config.startswith("physical-npu-id=0\n") and f"shm-id={DIE}\n" in config
    [c] = resp.container_responses
    assert c.envs["ASCEND_VISIBLE_DEVICES"] == "1"
    shm = tmp_path / "ss" / "0" / DIE
    assert [(m.container_path, m.host_path) for m in c.mounts] == [
        (f"/dev/shm/{DIE}", str(shm)),
        ("/etc/enpu/vcann-rt/", str(enpu / "default.job1" / "0_0")),
    ]
    await alloc.stop()
    [_, (_, _, report)] = pods.patches
    assert report[ASCEND_REAL] == "npu-0"


async def test_a_950_soft_share_logic_id_the_node_lacks_is_refused_naming_the_pod(tmp_path: Path) -> None:
    board = ViewBoard()
    manager = ResourceManager(board, default_fault_code_table(), PluginMetrics(), share_count=100, soft_share=True)
    manager.set_chips({0: exporter_chip(0, 1, name="Ascend950DT", board=0x50, aicore=25, card_id=-1, ddie=DIE)})
    enpu = tmp_path / "enpu"
    enpu.mkdir()
    pod = PodView(
        namespace="default", name="p1", uid="u", phase="Pending", labels=JOB1, created=1.0,
        annotations={"huawei.com/npu": "npu-1", "predicate-time": "1", **QUOTAS}, requests={"huawei.com/npu": 30},
    )  # fmt: skip
    alloc = wired_allocator(
        manager, board, FakePods(items=[pod]), HostFacts, volcano=True, soft_share=True, npu_info_dir=enpu,
        soft_share_dir=tmp_path / "ss",
    )  # fmt: skip
    with pytest.raises(AllocationError, match="logic id 1") as err:
        await alloc.allocate("npu", request([f"npu-1-{i}" for i in range(30)]))
    assert err.value.pod == "default/p1"
    assert list(enpu.iterdir()) == []
    await alloc.stop()


# ---- restart: the anonymous ids map to nothing ----------------------------------------------------


def test_kubelet_map_skips_soft_share_pods(caplog: pytest.LogCaptureFixture) -> None:
    annotations = {**QUOTAS, ASCEND_REAL: "Ascend910-0", KLT_DEV: ",".join(ids(1, 30)), VNPU_ID: "0"}
    assert kubelet_map(annotations, ResourceType.ASCEND910) is None
    board = ViewBoard()
    manager = ResourceManager(board, default_fault_code_table(), PluginMetrics(), share_count=100, soft_share=True)
    manager.set_chips(chips())
    pod = ss_pod(phase="Running")
    with caplog.at_level(logging.WARNING):
        manager.restore_volcano({pod.uid: replace(pod, annotations=annotations)})
    assert manager.inventory.volcano_map == {}
    assert "not restored" not in caplog.text


def test_pick_pod_matches_the_quota_not_the_chip_count() -> None:
    pod = ss_pod()
    assert pick_pod([pod], f"huawei.com/{R}", 30, soft_share=True).pod == pod
    assert pick_pod([pod], f"huawei.com/{R}", 1, soft_share=True).pod is None  # one chip, but quota 30
    assert pick_pod([pod], f"huawei.com/{R}", 1).pod == pod  # without soft share: the chip count
    plain = replace(pod, annotations={f"huawei.com/{R}": "Ascend910-0", "predicate-time": "1"})
    assert pick_pod([plain], f"huawei.com/{R}", 1, soft_share=True).pod is None  # no quota: no candidate


# ---- cleanup --------------------------------------------------------------------------------------


def reported(pod: PodView, vid: int, chip: str = "Ascend910-0") -> PodView:
    annotations = {**pod.annotations, ASCEND_REAL: chip, KLT_DEV: "x", VNPU_ID: str(vid), "predicate-time": TAKEN}
    return replace(pod, annotations=annotations, phase="Running")


@pytest.mark.parametrize("restart", [False, True])
async def test_must_show_deleting_a_then_b(tmp_path: Path, restart: bool) -> None:
    a, b = ss_pod("a", predicate="1"), ss_pod("b", predicate="2")
    alloc, pods, enpu, ss = setup(tmp_path, [a, b])
    await alloc.allocate(R, request(ids(0, 30)))
    await alloc.allocate(R, request(ids(0, 30, 30)))
    await alloc.stop()
    pods.items = [reported(a, 0), reported(b, 1)]  # the reports reached the cache
    dirs = SoftShareDirs(HostFiles(enpu, ss), pods=pods.pods)
    if not restart:
        assert alloc.soft_share is not None
        dirs = alloc.soft_share.dirs  # the allocating one: it remembers what it handed out
    # Deleting A removes 0_0 only.
    gone, pods.items = pods.items[0], pods.items[1:]
    dirs.pod_gone(gone)
    await dirs.drain()
    assert sorted(p.name for p in (enpu / "default.job1").iterdir()) == ["0_1"]
    if restart:
        dirs = SoftShareDirs(HostFiles(enpu, ss), pods=pods.pods)
    # Deleting B removes the job's directory.
    gone, pods.items = pods.items[0], []
    dirs.pod_gone(gone)
    await dirs.drain()
    assert not (enpu / "default.job1").exists()
    assert (ss / "0" / DIE).exists()  # the chip's shared-memory file stays (the next pod of the chip uses it)


async def test_a_finished_pod_frees_its_dir_before_it_is_deleted(tmp_path: Path) -> None:
    a, b = ss_pod("a", predicate="1"), ss_pod("b", predicate="2")
    alloc, pods, enpu, _ = setup(tmp_path, [a, b])
    await alloc.allocate(R, request(ids(0, 30)))
    await alloc.allocate(R, request(ids(0, 30, 30)))
    await alloc.stop()
    done = replace(reported(a, 0), phase="Succeeded")
    pods.items = [done, reported(b, 1)]
    assert alloc.soft_share is not None
    dirs = alloc.soft_share.dirs
    dirs.pod_gone(done)
    await dirs.drain()
    assert sorted(p.name for p in (enpu / "default.job1").iterdir()) == ["0_1"]


async def test_a_dir_handed_out_before_its_report_lands_survives_the_sweep(tmp_path: Path) -> None:
    alloc, _, enpu, _ = setup(tmp_path, [ss_pod("a")])
    await alloc.allocate(R, request(ids(0, 30)))
    # The cache still has the pod without its vnpuId: only the allocator's memory says 0_0 is held.
    assert alloc.soft_share is not None
    assert await alloc.soft_share.dirs.clean() == []
    assert (enpu / "default.job1" / "0_0").is_dir()
    await alloc.stop()


async def test_must_show_the_start_sweep(tmp_path: Path) -> None:
    enpu, ss = tmp_path / "enpu", tmp_path / "ss"
    (enpu / "default.old" / "0_5").mkdir(parents=True)
    (enpu / "default.old" / "0_5" / "npu_info.config").write_text("physical-npu-id=0")
    (enpu / "default.job1" / "0_0").mkdir(parents=True)
    (enpu / "README").write_text("hands off")
    live = reported(ss_pod("a"), 0)
    dirs = SoftShareDirs(HostFiles(enpu, ss), pods=lambda: [live])

    async def synced(timeout: float) -> bool:
        return True

    await dirs.sweep_when(synced)
    assert sorted(str(p.relative_to(enpu)) for p in enpu.rglob("*")) == ["README", "default.job1", "default.job1/0_0"]
    assert (enpu / "README").read_text() == "hands off"


async def test_a_symlinked_pod_dir_is_not_followed(tmp_path: Path) -> None:
    enpu, outside = tmp_path / "enpu", tmp_path / "outside"
    (outside / "keep").mkdir(parents=True)
    (enpu / "ns.job").mkdir(parents=True)
    os.symlink(outside / "keep", enpu / "ns.job" / "0_1")
    dirs = SoftShareDirs(HostFiles(enpu, tmp_path / "ss"))
    await dirs.clean()
    assert (outside / "keep").is_dir()
    assert (enpu / "ns.job" / "0_1").is_symlink()


# ---- TestHandleSoftSharePodDelete / TestIsJobNameStillInUse (pkg/server/plugin_test.go) ------------


def on_disk(enpu: Path, *dirs: str) -> None:
    for d in dirs:
        (enpu / d).mkdir(parents=True)
        (enpu / d / "npu_info.config").write_text("x")


@pytest.mark.parametrize(
    ("others", "left"),
    [
        # "soft share pod deleted, should call RemoveSoftShareDeviceFileAndDir"
        ([], []),
        # "job still in use by other pod, should not remove dir" (ours: the deleted pod's own dir goes)
        ([("default", "pod2", "job1", 1)], ["default.job1", "default.job1/0_1", "default.job1/0_1/npu_info.config"]),
        # "job still in use by multiple other pods"
        ([("default", "pod2", "job1", 1), ("default", "pod3", "job1", 2)],
         ["default.job1", "default.job1/0_1", "default.job1/0_1/npu_info.config", "default.job1/0_2",
          "default.job1/0_2/npu_info.config"]),
        # "different job name in other pods, should remove dir"
        ([("default", "pod2", "job2", 1)], ["default.job2", "default.job2/0_1", "default.job2/0_1/npu_info.config"]),
        # "same job name in different namespace, should remove dir"
        ([("other", "pod2", "job1", 1)], ["other.job1", "other.job1/0_1", "other.job1/0_1/npu_info.config"]),
    ],
)  # fmt: skip
async def test_handle_soft_share_pod_delete(
    tmp_path: Path, others: list[tuple[str, str, str, int]], left: list[str]
) -> None:
    enpu = tmp_path / "enpu"
    deleted = reported(ss_pod("pod1"), 0)
    living = [
        replace(reported(ss_pod(name, labels={"volcano.sh/job-name": job}), vid), namespace=ns, uid=f"u-{ns}-{name}")
        for ns, name, job, vid in others
    ]
    on_disk(enpu, "default.job1/0_0", *(f"{p.namespace}.{p.labels['volcano.sh/job-name']}/0_{v}"
                                       for p, (_, _, _, v) in zip(living, others, strict=True)))  # fmt: skip
    dirs = SoftShareDirs(HostFiles(enpu, tmp_path / "ss"), pods=lambda: living)
    dirs.pod_gone(deleted)
    await dirs.drain()
    assert sorted(str(p.relative_to(enpu)) for p in enpu.rglob("*")) == left


async def test_handle_soft_share_pod_delete_of_another_pod_removes_nothing(tmp_path: Path) -> None:
    # "pod not in softShareJobs, should return directly": a pod without a quota.
    enpu = tmp_path / "enpu"
    on_disk(enpu, "default.job1/0_0")
    dirs = SoftShareDirs(HostFiles(enpu, tmp_path / "ss"), pods=list)
    plain = replace(ss_pod("pod1"), annotations={f"huawei.com/{R}": "Ascend910-0"})
    dirs.pod_gone(plain)
    await dirs.drain()
    assert (enpu / "default.job1" / "0_0" / "npu_info.config").is_file()


class FailingRemove(HostFiles):
    def remove_pod_dir(self, found: object) -> None:
        raise PermissionError("read-only file system")


async def test_handle_soft_share_pod_delete_when_the_remove_fails(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # "RemoveSoftShareDeviceFileAndDir returns error": logged; the job dir (not empty) stays.
    enpu = tmp_path / "enpu"
    on_disk(enpu, "default.job1/0_0")
    dirs = SoftShareDirs(FailingRemove(enpu, tmp_path / "ss"), pods=list)
    with caplog.at_level(logging.ERROR):
        assert await dirs.clean() == []
    assert (enpu / "default.job1" / "0_0").is_dir()
    [record] = [r for r in caplog.records if r.getMessage() == "soft-share directory not removed"]
    assert record.__dict__["dir"] == "default.job1/0_0"


# ---- the host refusing a write ------------------------------------------------------------------


async def test_a_failed_write_refuses_naming_the_pod_and_leaves_none_of_its_dirs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    alloc, pods, enpu, _ = setup(tmp_path, [ss_pod()])
    real_open = os.open

    def failing_open(path: str | os.PathLike[str], flags: int, mode: int = 0o777, **kw: int | None) -> int:
        if str(path).endswith("npu_info.config"):
            raise OSError(28, "No space left on device")
        return real_open(path, flags, mode, **kw)  # shutil.rmtree passes dir_fd

    monkeypatch.setattr(os, "open", failing_open)
    with pytest.raises(AllocationError) as err:
        await alloc.allocate(R, request(ids(0, 30)))
    assert err.value.kind is Refusal.SOFT_SHARE
    assert err.value.message.startswith("pod default/p1: soft share: cannot write its quota file:")
    assert "No space left on device" in err.value.message
    assert list(enpu.iterdir()) == []  # neither the pod's dir nor the job's (this call made both)
    assert pods.patches == [("default", "p1", {"predicate-time": TAKEN})]  # marked taken first, as Volcano pods are
    await alloc.stop()
