"""Writes under host directories others can write, and names that become path components (issue 32):
a symlink planted in a shared directory, a claim uid or a job name that climbs out of its root, and
a soft-share pod that edits its own annotations across a plugin restart."""

from __future__ import annotations

import logging
import os
import stat
from pathlib import Path
from types import MappingProxyType

import grpc
import pytest
from ascend_common.adapters.kube.configmaps import ConfigMapState, Conflict
from ascend_common.adapters.kubelet import dra_pb2 as dra
from ascend_common.adapters.kubelet import dra_pb2_grpc as dra_grpc
from ascend_common.clock import ManualClock
from ascend_common.faults import default_fault_code_table, default_fault_customization, default_switch_fault_table
from ascend_common.inuse import ASCEND_REAL
from ascend_common.pods import SlimPod
from ascend_common.products import HCCL_TOPO_FILES, ProductType
from ascend_common.softshare import VNPU_ID
from ascend_common.superpod import SuperPod
from ascend_device_plugin.ras_topology import RasTopologyWriter
from fault_manager.hotreset.jobs import TrainingJobs
from fault_manager.policy.engine import FaultEngine, Policy
from fault_manager.reactor.published import NodeState, Published
from fault_manager.reactor.verdicts import VerdictBoard

from tests.faultmanager.test_hotreset import EMPTY_RESET_JSON
from tests.plugin.conftest import workdir  # noqa: F401 - a pytest fixture
from tests.plugin.test_cluster_paths import pod_annotations, pods_cached
from tests.plugin.test_dra_process import DRIVER, DraNode, apiserver, node, services  # noqa: F401 - pytest fixtures
from tests.plugin.test_softshare import SoftShareNode, allocate_a_and_b, ss_node  # noqa: F401 - a fixture
from tests.support.chips import exporter_chip
from tests.support.fake_apiserver import FakeApiServer
from tests.support.fake_dra_kubelet import allocated_claim, pod_using
from tests.support.plugin import wait_ready
from tests.support.waiting import until

SECRET = b"root's secret\n"


def outside_file(where: Path) -> Path:
    """A 0600 file outside every root, which no write of the services may reach."""
    where.mkdir(parents=True, exist_ok=True)
    victim = where / "victim"
    victim.write_bytes(SECRET)
    victim.chmod(0o600)
    return victim


def untouched(victim: Path) -> bool:
    st = os.lstat(victim)
    return stat.S_ISREG(st.st_mode) and stat.S_IMODE(st.st_mode) == 0o600 and victim.read_bytes() == SECRET


# ---- (a, b) the RAS rack topology ----------------------------------------------------------------

POD = SuperPod(super_pod_id=5, server_index=2, rack_id=3, super_pod_type=ProductType.POD_1D, scale_type=64)
TOPO = b'{"topology": 1}'


def ras_writer(tmp_path: Path) -> tuple[RasTopologyWriter, Path]:
    root, source_root = tmp_path / "ras", tmp_path / "host"
    source = source_root / HCCL_TOPO_FILES[POD.super_pod_type].lstrip("/")
    source.parent.mkdir(parents=True)
    source.write_bytes(TOPO)
    (root / "cluster" / "super-pod-5").mkdir(parents=True)  # the diagnosis made it: the tree is shared
    return RasTopologyWriter(root, lambda: POD, source_root=source_root), root / "cluster" / "super-pod-5"


async def test_ras_temp_name_planted_as_a_symlink_leaves_the_outside_file_alone(tmp_path: Path) -> None:
    writer, super_pod = ras_writer(tmp_path)
    victim = outside_file(tmp_path / "outside")
    rack = super_pod / "rack-3"
    rack.mkdir()
    (rack / ".topo_2.json.tmp").symlink_to(victim)
    assert await writer.round() is True
    assert untouched(victim), "the file behind the planted temp name is unchanged, bytes and mode"
    written = rack / "topo_2.json"
    assert not written.is_symlink() and written.read_bytes() == TOPO
    assert stat.S_IMODE(written.stat().st_mode) == 0o644


async def test_ras_rack_dir_planted_as_a_symlink_is_refused(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    writer, super_pod = ras_writer(tmp_path)
    outside = tmp_path / "outside"
    victim = outside_file(outside)
    outside.chmod(0o700)
    (super_pod / "rack-3").symlink_to(outside, target_is_directory=True)
    with caplog.at_level(logging.ERROR):
        assert await writer.round() is False
    assert sorted(p.name for p in outside.iterdir()) == ["victim"] and untouched(victim)
    assert stat.S_IMODE(outside.stat().st_mode) == 0o700, "the outside dir was not chmodded"
    [refused] = [
        r for r in caplog.records if r.getMessage() == "RAS rack topology not written: a symlink below the RAS root"
    ]
    assert refused.__dict__["path"] == str(super_pod / "rack-3")


# ---- (c, d) DRA claim uids -----------------------------------------------------------------------


UID = "0b9e7c55-2a65-4b8e-9a8e-3b8d6d0f1c2a"


async def dra_call(n: DraNode, method: str, claims: list[dra.Claim]) -> dict[str, str]:
    """One call straight to the driver's socket, as a kubelet would make it; each claim's error by uid."""
    endpoint = n.kubelet.plugins[DRIVER].endpoint
    async with grpc.aio.insecure_channel(f"unix://{endpoint}") as channel:
        stub = dra_grpc.DRAPluginStub(channel)
        if method == "prepare":
            prepared = await stub.NodePrepareResources(dra.NodePrepareResourcesRequest(claims=claims))
            return {uid: a.error for uid, a in prepared.claims.items()}
        unprepared = await stub.NodeUnprepareResources(dra.NodeUnprepareResourcesRequest(claims=claims))
        return {uid: a.error for uid, a in unprepared.claims.items()}


def put_claim(apiserver: FakeApiServer, name: str, device: str, uid: str | None = None) -> dra.Claim:  # noqa: F811
    pod = pod_using(f"{name}-pod", [name])
    obj = allocated_claim(name, [{"request": "npu", "driver": DRIVER, "pool": "node-a", "device": device}], pod)
    if uid is not None:  # a hostile API server (or a test double) hands out any uid
        obj["metadata"]["uid"] = uid
    stored = apiserver.put_object("resourceclaims", obj)
    return dra.Claim(namespace="default", name=name, uid=stored["metadata"]["uid"])


async def test_dra_prepare_with_a_climbing_uid_is_refused_per_claim(node: DraNode, apiserver: FakeApiServer) -> None:  # noqa: F811
    hostile = put_claim(apiserver, "escape", "ascend910-1", uid="/../../escape")
    good = put_claim(apiserver, "good", "ascend910-2")
    errors = await dra_call(node, "prepare", [hostile, good])
    assert not list(node.workdir.rglob("escape.yaml")), "nothing written outside the CDI root"
    assert not (node.workdir.parent / "escape.yaml").exists()
    assert sorted(p.name for p in node.cdi_root.iterdir()) == [f"ascend.com-npu_{good.uid}.yaml"], "no stray dir"
    assert "is not a Kubernetes UID" in errors["/../../escape"]
    assert errors[good.uid] == "", "the other claim of the batch is prepared"


async def test_dra_unprepare_with_a_climbing_uid_deletes_nothing(node: DraNode) -> None:  # noqa: F811
    victim = node.workdir / "victim.yaml"
    victim.write_text("not the driver's")
    (node.cdi_root / "ascend.com-npu_").mkdir(parents=True)  # what a refused Prepare could have left
    hostile = dra.Claim(namespace="default", name="victim", uid="/../../victim")
    errors = await dra_call(node, "unprepare", [hostile, dra.Claim(namespace="default", name="x", uid=UID)])
    assert victim.read_text() == "not the driver's"
    assert "is not a Kubernetes UID" in errors["/../../victim"]
    assert errors[UID] == "", "the other claim of the batch is answered (nothing prepared: no error)"


# ---- (e) the hot-reset host mirror ----------------------------------------------------------------


class AnyConfigMaps:
    """An API that holds a reset ConfigMap under any name (a bad webhook, a fake): what the mirror
    writes must not depend on the API refusing a name."""

    def __init__(self) -> None:
        self.objects: dict[tuple[str, str], ConfigMapState] = {}

    async def get(self, namespace: str, name: str) -> ConfigMapState | None:
        return self.objects.get((namespace, name)) or ConfigMapState(
            {"reset.json": EMPTY_RESET_JSON}, {"reset": "true"}, "1"
        )

    async def put(
        self, namespace: str, name: str, data: dict[str, str], labels: dict[str, str], resource_version: str | None
    ) -> str:
        if resource_version not in (None, "1", "2"):
            raise Conflict(name)
        self.objects[(namespace, name)] = ConfigMapState(dict(data), dict(labels), "2")
        return "2"

    async def delete(self, namespace: str, name: str) -> None:
        self.objects.pop((namespace, name), None)


def training_pod(job: str) -> SlimPod:
    chip = exporter_chip(1, 1)
    return SlimPod(
        "ml", "train-0", "3f1f3c1e-0000-4000-8000-000000000001", "Running", "node-a",
        MappingProxyType({ASCEND_REAL: chip.name}), MappingProxyType({"volcano.sh/job-name": job}),
        MappingProxyType({}), False, 0.0, "1",
    )  # fmt: skip


@pytest.fixture
def training_jobs(tmp_path: Path) -> tuple[TrainingJobs, AnyConfigMaps, Path]:
    policy = Policy(default_fault_code_table(), default_fault_customization(), default_switch_fault_table())
    engine = FaultEngine(policy)
    configmaps = AnyConfigMaps()
    mirror = tmp_path / "mirror"
    mirror.mkdir()
    return TrainingJobs(Published(VerdictBoard(), NodeState(engine.policy)), ManualClock(), configmaps, mirror), \
        configmaps, mirror  # fmt: skip


async def tell_the_job(jobs: TrainingJobs, job: str) -> str | None:
    group = [exporter_chip(1, 1)]
    found, reason = await jobs.of_group(group, [training_pod(job)])
    if reason is not None:
        return reason
    return await jobs.tell(found, group, "unrecovered", {c.name: c for c in group})


async def test_hot_reset_mirror_refuses_a_job_name_that_climbs_out(
    tmp_path: Path, training_jobs: tuple[TrainingJobs, AnyConfigMaps, Path]
) -> None:
    jobs, configmaps, mirror = training_jobs
    reason = await tell_the_job(jobs, "../../../outside")
    assert not (tmp_path / "outside").exists() and not (tmp_path.parent / "outside").exists()
    assert list(mirror.iterdir()) == [] and configmaps.objects == {}
    assert reason is not None and "does not make a DNS-1123 subdomain" in reason


async def test_hot_reset_mirror_temp_name_planted_as_a_symlink_leaves_the_outside_file_alone(
    tmp_path: Path, training_jobs: tuple[TrainingJobs, AnyConfigMaps, Path]
) -> None:
    jobs, configmaps, mirror = training_jobs
    victim = outside_file(tmp_path / "outside")
    folder = mirror / "ml.reset-config-job1"
    folder.mkdir()
    (folder / ".reset.json.tmp").symlink_to(victim)  # the pods that read the mirror can write it
    assert await tell_the_job(jobs, "job1") is None
    assert untouched(victim)
    written = folder / "reset.json"
    assert (
        not written.is_symlink()
        and written.read_text() == configmaps.objects[("ml", "reset-config-job1")].data["reset.json"]
    )


# ---- (f) soft share across a plugin restart ------------------------------------------------------


async def test_softshare_sweep_after_a_restart_ignores_an_edited_vnpu_id(ss_node: SoftShareNode) -> None:  # noqa: F811
    """Pod a edits its vnpuId, while the plugin is down, to name the dead pod b's directory: the
    sweep keeps a's own (a still runs) and removes b's (b is gone)."""
    s = ss_node
    await until(lambda: not (s.enpu / "default.old").exists(), what="the start sweep")
    await allocate_a_and_b(s)
    job = s.enpu / "default.job1"
    assert pod_annotations(s.api, "a", "default")[VNPU_ID] == "0"
    assert sorted(p.name for p in job.iterdir()) == ["0_0", "0_1"]
    assert s.node.plugin.stop() == 0
    s.api.remove("pods", "b", "default")
    s.api.modify("pods", "a", "default", lambda pod: pod["metadata"]["annotations"].update({VNPU_ID: "1"}))
    assert s.node.plugin.relaunch is not None
    s.node.plugin = s.node.plugin.relaunch()
    await wait_ready(s.node.plugin)
    await pods_cached(s.api)
    await until(lambda: not (job / "0_1").exists(), what="the dead pod b's directory to go")
    assert (job / "0_0" / "npu_info.config").is_file(), "the running pod a keeps its directory"
