"""Soft share (issue 23) as the kubelet sees it: the plugin process on the sim's 910b-8."""

from __future__ import annotations

import asyncio
import stat
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path

import grpc
import httpx
import pytest

from tests.plugin.conftest import Node, close_node, make_node
from tests.plugin.test_cluster_paths import pod_annotations, pods_cached
from tests.plugin.test_kubelet_flow import R, inject, phy_of
from tests.support.fake_apiserver import FakeApiServer, write_kubeconfig
from tests.support.plugin import wait_ready
from tests.support.waiting import until

SOFT_SHARE = ("--share-dev-count", "100", "--volcano-type")


async def test_soft_share_lists_100_ids_per_chip_and_a_fault_takes_exactly_its_100(workdir: Path) -> None:
    missing = workdir / "no-enpu"
    n = await make_node(
        workdir, *SOFT_SHARE, "--soft-share-dev-config-dir", str(workdir / "ss"),
        "--soft-share-npu-info-dir", str(missing),
    )  # fmt: skip
    try:
        await wait_ready(n.plugin)
        log = n.plugin.log_path.read_text()
        assert "the npu-info directory is missing" in log and str(missing) in log  # told at start, not fatal
        every = {f"Ascend910-{p}-{i}" for p in range(8) for i in range(100)}
        msg = await n.kubelet.wait_for(R, lambda m: set(m.devices) == every)
        assert msg.healthy == every
        assert all(d.topology.nodes for d in msg.response.devices)  # each id keeps its chip's NUMA node
        phy = await phy_of(n, 2)
        seen = len(n.kubelet.streams[R])
        await inject(n, 2, "8C1FA006", "occur")  # a RestartNPU code
        msg = await n.kubelet.wait_for(R, lambda m: bool(m.unhealthy), after=seen)
        assert msg.unhealthy == {f"Ascend910-{phy}-{i}" for i in range(100)}
        assert len(msg.devices) == 800
        # Offline (--kube offline) there is no pod to match a quota: a clear refusal, not a wrong answer.
        with pytest.raises(grpc.aio.AioRpcError) as err:
            await n.kubelet.allocate(R, [[f"Ascend910-0-{i}" for i in range(30)]])
        assert err.value.code() is grpc.StatusCode.FAILED_PRECONDITION
        assert "soft share needs the cluster" in (err.value.details() or "")
    finally:
        await close_node(n)


async def test_count_100_without_a_dir_lists_one_id_per_910b_chip(workdir: Path) -> None:
    n = await make_node(workdir, *SOFT_SHARE)
    try:
        await wait_ready(n.plugin)
        msg = await n.kubelet.wait_for(R, lambda m: bool(m.devices))
        assert set(msg.devices) == {f"Ascend910-{p}" for p in range(8)}
        assert "share count ignored" in n.plugin.log_path.read_text()
    finally:
        await close_node(n)


async def test_soft_share_on_310p_chips_refuses_to_start(workdir: Path) -> None:
    n = await make_node(workdir, *SOFT_SHARE, "--soft-share-dev-config-dir", str(workdir / "ss"), profile="310p-4")
    try:
        # Waited for off the loop: the fake kubelet serves on it meanwhile.
        assert await asyncio.to_thread(n.plugin.proc.wait, 30) == 2
        log = n.plugin.log_path.read_text()
        assert "soft share (--soft-share-dev-config-dir) is not supported on Ascend310P chips" in log
    finally:
        n.plugin.stop()
        await n.kubelet.stop()
        n.exporter.stop()


# ---- Allocate and cleanup with a cluster (the fake API server) -------------------------------------

QUOTAS = {
    "huawei.com/scheduler.softShareDev.aicoreQuota": "30",
    "huawei.com/scheduler.softShareDev.hbmQuota": "16384",
    "huawei.com/scheduler.softShareDev.policy": "elastic",
}
VNPU_ID = "huawei.com/scheduler.softShareDev.vnpuId"
NPU = "huawei.com/npu"


@dataclass
class SoftShareNode:
    node: Node
    api: FakeApiServer
    enpu: Path  # --soft-share-npu-info-dir
    ss: Path  # --soft-share-dev-config-dir


@pytest.fixture
def apiserver() -> Iterator[FakeApiServer]:
    with FakeApiServer() as server:
        server.add_node("node-a", internal_ip="10.1.2.3")
        yield server


def add_ss_pod(api: FakeApiServer, name: str, chip: str, predicate: str) -> None:
    annotations = {R: chip, "predicate-time": predicate, **QUOTAS}
    api.add_pod(
        name, "default", phase="Pending", requests={R: 30}, annotations=annotations,
        labels={"volcano.sh/job-name": "job1"},
    )  # fmt: skip


@pytest.fixture
async def ss_node(workdir: Path, apiserver: FakeApiServer) -> AsyncIterator[SoftShareNode]:
    enpu, ss = workdir / "enpu", workdir / "ss"
    enpu.mkdir()
    (enpu / "README").write_text("not the plugin's")
    (enpu / "default.old" / "0_5").mkdir(parents=True)  # a stale dir from before the restart
    (enpu / "default.old" / "0_5" / "npu_info.config").write_text("physical-npu-id=0")
    add_ss_pod(apiserver, "a", "Ascend910-0", "1")
    add_ss_pod(apiserver, "b", "Ascend910-0", "2")
    n = await make_node(
        workdir, *SOFT_SHARE, "--soft-share-dev-config-dir", str(ss), "--soft-share-npu-info-dir", str(enpu),
        "--kubeconfig", str(write_kubeconfig(workdir / "kubeconfig", apiserver.url)), kube="api",
    )  # fmt: skip
    try:
        await wait_ready(n.plugin)
        await n.kubelet.wait_for(R, lambda m: len(m.devices) == 800)
        await pods_cached(apiserver)
        yield SoftShareNode(n, apiserver, enpu, ss)
    finally:
        await close_node(n)


async def vdie_of(n: Node, phy: int) -> str:
    transport = httpx.AsyncHTTPTransport(uds=str(n.exporter.socket))
    async with httpx.AsyncClient(transport=transport, base_url="http://x") as client:
        chips = (await client.get("/v1/chips")).json()["chips"]
    die = next(c for c in chips if c["phy_id"] == phy)["static"]["vdie_id"]
    assert isinstance(die, str) and die
    return die


def ids(phy: int, start: int) -> list[str]:
    return [f"Ascend910-{phy}-{i}" for i in range(start, start + 30)]


def listing(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*")) if root.exists() else []


async def allocate_a_and_b(s: SoftShareNode) -> None:
    await s.node.kubelet.allocate(R, [ids(3, 0)])
    await s.node.kubelet.allocate(R, [ids(5, 0)])
    for name in ("a", "b"):

        def reported(name: str = name) -> bool:
            return VNPU_ID in pod_annotations(s.api, name, "default")

        await until(reported, what=f"{name}'s report")
        s.api.modify("pods", name, "default", lambda pod: pod["status"].update(phase="Running"))


async def test_allocate_writes_the_file_and_mounts_and_the_start_sweep_ran(ss_node: SoftShareNode) -> None:
    s = ss_node
    # The start sweep: the stale dir went, the stranger file stayed.
    await until(lambda: not (s.enpu / "default.old").exists(), what="the start sweep")
    assert (s.enpu / "README").read_text() == "not the plugin's"
    die = await vdie_of(s.node, 0)
    resp = await s.node.kubelet.allocate(R, [ids(3, 0)])
    [c] = resp.container_responses
    assert c.envs["ASCEND_VISIBLE_DEVICES"] == "0"
    pod_dir = s.enpu / "default.job1" / "0_0"
    config = pod_dir / "npu_info.config"
    assert config.read_text() == (
        f"physical-npu-id=0\nvirtual-npu-id=0\naicore-quota=30\nmemory-quota=16384\nshm-id={die}\nscheduling-policy=2"
    )
    assert stat.S_IMODE(config.stat().st_mode) == 0o644
    assert [(m.container_path, m.host_path, m.read_only) for m in c.mounts] == [
        (f"/dev/shm/{die}", str(s.ss / "0" / die), False),
        ("/etc/enpu/vcann-rt/", str(pod_dir), True),
    ]
    assert stat.S_IMODE((s.ss / "0" / die).stat().st_mode) == 0o666
    await until(lambda: VNPU_ID in pod_annotations(s.api, "a", "default"), what="the report")
    a = pod_annotations(s.api, "a", "default")
    assert (a["huawei.com/AscendReal"], a[VNPU_ID]) == ("Ascend910-0", "0")
    assert a["huawei.com/kltDev"] == ",".join(sorted(ids(3, 0)))


async def test_a_refusal_writes_nothing(ss_node: SoftShareNode) -> None:
    s = ss_node
    await until(lambda: not (s.enpu / "default.old").exists(), what="the start sweep")
    # Quota 40: no other pod matches, and the plugin re-lists once when its cache has no candidate yet.
    quota = {**QUOTAS, "huawei.com/scheduler.softShareDev.aicoreQuota": "40"}
    s.api.add_pod(
        "nolabel",
        "default",
        phase="Pending",
        requests={R: 40},
        annotations={R: "Ascend910-1", "predicate-time": "0", **quota},
    )
    before_enpu, before_ss = listing(s.enpu), listing(s.ss)
    with pytest.raises(grpc.aio.AioRpcError) as err:
        await s.node.kubelet.allocate(R, [[f"Ascend910-1-{i}" for i in range(40)]])
    assert err.value.code() is grpc.StatusCode.FAILED_PRECONDITION
    assert "pod default/nolabel: soft share: the pod has none of the job labels" in (err.value.details() or "")
    assert listing(s.enpu) == before_enpu
    assert listing(s.ss) == before_ss
    assert pod_annotations(s.api, "nolabel", "default")["predicate-time"] == "0", "not marked taken"


@pytest.mark.parametrize("restart", [False, True])
async def test_deleting_a_then_b_removes_a_dir_then_the_job_dir(ss_node: SoftShareNode, restart: bool) -> None:
    s = ss_node
    await until(lambda: not (s.enpu / "default.old").exists(), what="the start sweep")
    await allocate_a_and_b(s)
    job = s.enpu / "default.job1"
    assert sorted(p.name for p in job.iterdir()) == ["0_0", "0_1"]
    if restart:
        s.node.plugin = s.node.plugin.restart()
        await wait_ready(s.node.plugin)
        await pods_cached(s.api)
    s.api.remove("pods", "a", "default")
    await until(lambda: not (job / "0_0").exists(), what="a's dir to go")
    assert (job / "0_1" / "npu_info.config").is_file(), "b's stays"
    if restart:
        s.node.plugin = s.node.plugin.restart()
        await wait_ready(s.node.plugin)
        await pods_cached(s.api)
        assert (job / "0_1").is_dir(), "the start sweep keeps a running pod's dir"
    s.api.remove("pods", "b", "default")
    await until(lambda: not job.exists(), what="the job dir to go")
    assert listing(s.enpu) == ["README"]


async def test_the_950_mounts_its_ddie(workdir: Path, apiserver: FakeApiServer) -> None:
    enpu, ss = workdir / "enpu", workdir / "ss"
    enpu.mkdir()
    apiserver.add_pod(
        "infer", "default", phase="Pending", requests={NPU: 30},
        # Volcano annotates the logic id on the 950: a5-8's logic 7 is phy 1.
        annotations={NPU: "npu-7", "predicate-time": "1", **QUOTAS},
        labels={"deploy-name": "infer"},
    )  # fmt: skip
    n = await make_node(
        workdir, *SOFT_SHARE, "--soft-share-dev-config-dir", str(ss), "--soft-share-npu-info-dir", str(enpu),
        "--kubeconfig", str(write_kubeconfig(workdir / "kubeconfig", apiserver.url)), profile="a5-8", kube="api",
    )  # fmt: skip
    try:
        await wait_ready(n.plugin)
        await n.kubelet.wait_for(NPU, lambda m: len(m.devices) == 800)
        await pods_cached(apiserver)
        transport = httpx.AsyncHTTPTransport(uds=str(n.exporter.socket))
        async with httpx.AsyncClient(transport=transport, base_url="http://x") as client:
            chips = (await client.get("/v1/chips")).json()["chips"]
        static = next(c for c in chips if c["phy_id"] == 1)["static"]
        ddie, vdie = static["ddie_id"], static["vdie_id"]
        assert isinstance(ddie, str) and ddie and ddie != vdie
        resp = await n.kubelet.allocate(NPU, [[f"npu-4-{i}" for i in range(30)]])
        [c] = resp.container_responses
        assert c.envs["ASCEND_VISIBLE_DEVICES"] == "7"
        assert [m.container_path for m in c.mounts] == [f"/dev/shm/{ddie}", "/etc/enpu/vcann-rt/"]
        config = (enpu / "default.infer" / "1_0" / "npu_info.config").read_text()
        assert config.startswith("physical-npu-id=1\nvirtual-npu-id=0\n")
        assert f"\nshm-id={ddie}\n" in config
    finally:
        await close_node(n)
