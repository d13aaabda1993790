"""The plugin with a cluster (the fake API server): Volcano, dynamic vNPU, plain-path annotations, node labels."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import grpc
import httpx
import pytest

from tests.plugin.conftest import Node, close_node, make_node
from tests.plugin.test_kubelet_flow import ALL, R, inject, phy_of
from tests.support.exporter import TOKENS
from tests.support.fake_apiserver import FakeApiServer, write_kubeconfig
from tests.support.fake_kubelet_pods import Cert, FakeKubeletPods, make_cert, pod_requests, pod_source_args
from tests.support.plugin import wait_ready
from tests.support.waiting import until

TAKEN = "18446744073709551615"
CONFIG_KEY = "ascend.kubectl.kubernetes.io/ascend-910-configuration"
PRE_SEPARATE = "8118043C"  # a PreSeparateNPU code of the reference table (not a network code)


@pytest.fixture
def apiserver() -> Iterator[FakeApiServer]:
    with FakeApiServer() as server:
        server.add_node("node-a", internal_ip="10.1.2.3")
        yield server


async def cluster_node(workdir: Path, apiserver: FakeApiServer, *args: str) -> Node:
    n = await make_node(
        workdir, "--kubeconfig", str(write_kubeconfig(workdir / "kubeconfig", apiserver.url)), *args, kube="api"
    )
    await wait_ready(n.plugin)
    return n


# The fake kubelet /pods a `volcano` node reads its pods from (--pod-source kubelet), by the fake API server.
_KUBELETS: dict[int, FakeKubeletPods] = {}


async def pods_cached(apiserver: FakeApiServer) -> None:
    """The plugin's pod cache holds the pods: it watches only once it has listed them (and the
    list reaches its event loop before the watch request reaches the fake); from the kubelet, two
    reads of /pods have been answered (the first of them after the pods were written)."""
    kubelet = _KUBELETS.get(id(apiserver))
    if kubelet is not None:
        await until(lambda: kubelet.count() >= 2, what="the plugin to read the kubelet's /pods twice")
        return
    await until(lambda: apiserver.live_watches > 0, what="the plugin's pod cache to list the pods and watch")


@pytest.fixture(scope="module")
def kubelet_cert(tmp_path_factory: pytest.TempPathFactory) -> Cert:
    return make_cert(tmp_path_factory.mktemp("kubelet-cert"))


def pod_annotations(apiserver: FakeApiServer, name: str, namespace: str = "ml") -> dict[str, str]:
    pod = apiserver.get_object("pods", name, namespace)
    assert pod is not None
    return dict(pod["metadata"].get("annotations") or {})


@pytest.fixture(params=["apiserver", "kubelet"])
async def volcano(
    request: pytest.FixtureRequest, workdir: Path, apiserver: FakeApiServer, kubelet_cert: Cert
) -> AsyncIterator[Node]:
    """The Volcano tests run with either pod source (--pod-source): the same pods, the same answers;
    from the kubelet, without a single pod read on the API server."""
    common: dict[str, Any] = {"phase": "Pending", "requests": {R: 2}}
    apiserver.add_pod("second", "ml", annotations={R: "Ascend910-0,Ascend910-1", "predicate-time": "2000"}, **common)
    apiserver.add_pod("first", "ml", annotations={R: "Ascend910-6,Ascend910-7", "predicate-time": "1000"}, **common)
    apiserver.add_pod("broken", "ml", annotations={R: "Ascend910-6,,GPU-1", "predicate-time": "5"}, **common)
    with contextlib.ExitStack() as stack:
        args = ["--volcano-type"]
        if request.param == "kubelet":
            kubelet = stack.enter_context(FakeKubeletPods(kubelet_cert, api=apiserver, tokens={"sa-token"}))
            _KUBELETS[id(apiserver)] = kubelet
            stack.callback(_KUBELETS.pop, id(apiserver))
            args += pod_source_args(kubelet, workdir / "sa-token")
        n = await cluster_node(workdir, apiserver, *args)
        try:
            yield n
        finally:
            await close_node(n)
        if request.param == "kubelet":
            assert pod_requests(apiserver) == [], "no pod list, watch or get on the API server"
            assert kubelet.count() >= 2 and {r.token for r in kubelet.requests} == {"sa-token"}
            assert "reading pods from the kubelet" in n.plugin.log_path.read_text()
        else:
            assert pod_requests(apiserver), "the API server source lists and watches"


async def test_volcano_serves_the_oldest_pod_then_the_next(volcano: Node, apiserver: FakeApiServer) -> None:
    await volcano.kubelet.wait_for(R, lambda m: set(m.devices) == ALL)
    await pods_cached(apiserver)
    patches_before = apiserver.count("PATCH", "/api/v1/namespaces/ml/pods")
    resp = await volcano.kubelet.allocate(R, [["Ascend910-2", "Ascend910-3"]])
    assert resp.container_responses[0].envs["ASCEND_VISIBLE_DEVICES"] == "6,7"
    assert pod_annotations(apiserver, "first").get("predicate-time") == TAKEN, "marked taken before the answer"
    await until(lambda: "huawei.com/AscendReal" in pod_annotations(apiserver, "first"))  # the report follows
    first = pod_annotations(apiserver, "first")
    assert first["predicate-time"] == TAKEN
    assert first["huawei.com/AscendReal"] == "Ascend910-6,Ascend910-7"
    assert first["huawei.com/kltDev"] == "Ascend910-2,Ascend910-3"
    config = json.loads(first[CONFIG_KEY])
    uid = apiserver.get_object("pods", "first", "ml")["metadata"]["uid"]  # type: ignore[index]
    assert config["server_id"] == uid and config["host_ip"] == "10.1.2.3" and config["pod_name"] == "first"
    assert [d["device_id"] for d in config["devices"]] == ["6", "7"]
    # Two writes: the pod marked taken inside the call, then the allocation report.
    assert apiserver.count("PATCH", "/api/v1/namespaces/ml/pods") == patches_before + 2

    resp = await volcano.kubelet.allocate(R, [["Ascend910-4", "Ascend910-5"]])
    assert resp.container_responses[0].envs["ASCEND_VISIBLE_DEVICES"] == "0,1"
    await until(lambda: pod_annotations(apiserver, "second").get("predicate-time") == TAKEN)
    assert "predicate-time" in pod_annotations(apiserver, "broken")
    assert pod_annotations(apiserver, "broken")["predicate-time"] == "5", "the malformed pod is left alone"

    with pytest.raises(grpc.aio.AioRpcError) as err:
        await volcano.kubelet.allocate(R, [["Ascend910-0", "Ascend910-1"]])
    assert err.value.code() is grpc.StatusCode.FAILED_PRECONDITION
    assert "malformed" in (err.value.details() or "")
    log = volcano.plugin.log_path.read_text()
    assert "bad Volcano annotation" in log and "ml/broken" in log


async def test_volcano_kubelet_id_reports_the_real_devices_health(volcano: Node, apiserver: FakeApiServer) -> None:
    await volcano.kubelet.wait_for(R, lambda m: set(m.devices) == ALL)
    await pods_cached(apiserver)
    await volcano.kubelet.allocate(R, [["Ascend910-2", "Ascend910-3"]])  # real: 6, 7
    phys = {logic: await phy_of(volcano, logic) for logic in range(8)}
    logic_of_6 = next(logic for logic, phy in phys.items() if phy == 6)
    await inject(volcano, logic_of_6, "8C1FA006", "occur")
    msg = await volcano.kubelet.wait_for(R, lambda m: bool(m.unhealthy))
    assert msg.unhealthy == {"Ascend910-2", "Ascend910-6"}, "kubelet id 2 stands for real chip 6"


async def test_volcano_bound_pending_pod_keeps_its_pre_separate_chip_healthy(
    volcano: Node, apiserver: FakeApiServer
) -> None:
    """Without the fault-manager the plugin's own rule is the reference's npuIsUsedNow: `first` and
    `broken`, Pending and bound by Volcano, name chip 6 (`broken` among junk); chip 3 no pod names."""
    await volcano.kubelet.wait_for(R, lambda m: set(m.devices) == ALL)
    await pods_cached(apiserver)
    logic_of = {await phy_of(volcano, logic): logic for logic in range(8)}
    seen = len(volcano.kubelet.streams[R])
    for phy in (3, 6):
        await inject(volcano, logic_of[phy], PRE_SEPARATE, "occur")
    msg = await volcano.kubelet.wait_for(R, lambda m: "Ascend910-3" in m.unhealthy, after=seen)
    # Chip 6's fault came with chip 3's: nothing more may follow (an absence, so a time).
    await asyncio.sleep(0.3)
    msg = volcano.kubelet.streams[R][-1]
    assert msg.unhealthy == {"Ascend910-3"}, "chip 6 is in use for health: the pod Volcano bound to it"
    for name in ("first", "broken"):
        apiserver.modify("pods", name, "ml", lambda pod: pod["status"].update(phase="Succeeded"))
    msg = await volcano.kubelet.wait_for(R, lambda m: "Ascend910-6" in m.unhealthy)
    assert msg.unhealthy == {"Ascend910-3", "Ascend910-6"}


async def test_volcano_kubelet_ids_survive_a_plugin_restart(volcano: Node, apiserver: FakeApiServer) -> None:
    await volcano.kubelet.wait_for(R, lambda m: set(m.devices) == ALL)
    await pods_cached(apiserver)
    await volcano.kubelet.allocate(R, [["Ascend910-2", "Ascend910-3"]])  # real: 6, 7
    await until(lambda: pod_annotations(apiserver, "first").get("huawei.com/kltDev") == "Ascend910-2,Ascend910-3")
    apiserver.modify("pods", "first", "ml", lambda pod: pod["status"].update(phase="Running"))
    # The map from kubelet ids to real chips lives in the plugin; a new plugin reads it back
    # from the pod's kltDev and AscendReal annotations.
    volcano.plugin = volcano.plugin.restart()
    await wait_ready(volcano.plugin)
    seen = len(volcano.kubelet.streams[R])
    phys = {logic: await phy_of(volcano, logic) for logic in range(8)}
    logic_of_6 = next(logic for logic, phy in phys.items() if phy == 6)
    await inject(volcano, logic_of_6, "8C1FA006", "occur")
    msg = await volcano.kubelet.wait_for(R, lambda m: bool(m.unhealthy), after=seen)
    assert msg.unhealthy == {"Ascend910-2", "Ascend910-6"}, "kubelet id 2 still stands for real chip 6"


async def test_dynamic_vnpu_creates_the_annotated_vnpu(workdir: Path, apiserver: FakeApiServer) -> None:
    token = workdir / "plugin-token"
    token.write_text(f"{TOKENS['vnpu'][0]} vnpu\n")
    core = "huawei.com/npu-core"
    apiserver.add_pod(
        "infer", "ml", phase="Pending", requests={core: 5},
        annotations={core: "2-vir05_1c_16g", "predicate-time": "7"},
    )  # fmt: skip
    n = await cluster_node(
        workdir, apiserver, "--preset-virtual-device", "false", "--token-file", str(token), "--vnpu-gc-period", "0.5"
    )
    try:
        msg = await n.kubelet.wait_for(core, lambda m: len(m.devices) == 8 * 20)
        assert msg.healthy == {f"npu-core-{i}" for i in range(160)}
        await pods_cached(apiserver)
        # The kubelet picked 5 cores; chip 2's are cores 40..59.
        cores = [f"npu-core-{i}" for i in range(40, 45)]
        resp = await n.kubelet.allocate(core, [cores])
        envs = dict(resp.container_responses[0].envs)
        transport = httpx.AsyncHTTPTransport(uds=str(n.exporter.socket))
        async with httpx.AsyncClient(transport=transport, base_url="http://x") as client:
            chips = (await client.get("/v1/chips")).json()["chips"]
        chip2 = next(c for c in chips if c["phy_id"] == 2)
        [vnpu] = chip2["dynamic"]["vnpus"]["value"] or [None]
        assert vnpu is not None and vnpu["template"] == "vir05_1c_16g"
        assert envs["ASCEND_RUNTIME_OPTIONS"] == "VIRTUAL"
        assert envs["ASCEND_VISIBLE_DEVICES"] == str(vnpu["vdev_id"])
        for key in ("WORLD_SIZE", "LOCAL_WORLD_SIZE", "MS_WORKER_NUM", "MS_LOCAL_WORKER", "CM_WORKER_SIZE",
                    "CM_LOCAL_WORKER"):  # fmt: skip
            assert envs[key] == "1"
        assert envs["LOCAL_RANK"] == "0"
        await until(lambda: pod_annotations(apiserver, "infer").get("predicate-time") == TAKEN)
        annotations = pod_annotations(apiserver, "infer")
        real = f"Ascend910-5c.1cpu.16g-{vnpu['vdev_id']}-2_{vnpu['vfg_id']}"
        assert annotations["huawei.com/AscendReal"] == real

        # 2 of 8 chips unhealthy: exactly 2 x 20 cores Unhealthy, the pod's cores among them.
        logic_of = {c["phy_id"]: c["logic_id"] for c in chips}
        await inject(n, logic_of[2], "8C1FA006", "occur")
        await inject(n, logic_of[7], "8C1FA006", "occur")
        msg = await n.kubelet.wait_for(core, lambda m: len(m.unhealthy) == 40)
        assert set(cores) <= msg.unhealthy
        free = sorted(i for i in range(160) if f"npu-core-{i}" not in cores)
        expected_free_unhealthy = {f"npu-core-{i}" for i in free[:35]}
        assert msg.unhealthy == set(cores) | expected_free_unhealthy

        # The pod goes away: its vNPU is destroyed by the sweep.
        apiserver.remove("pods", "infer", "ml")
        async with httpx.AsyncClient(transport=transport, base_url="http://x") as client:

            async def no_vnpu_left() -> bool:
                return not (await client.get(f"/v1/chips/{chip2['logic_id']}")).json()["dynamic"]["vnpus"]["value"]

            await until(no_vnpu_left, what="the sweep to destroy the pod's vNPU")
        assert "destroyed an unused vNPU" in n.plugin.log_path.read_text()
    finally:
        await close_node(n)


async def test_plain_path_annotates_the_pod_podresources_names(workdir: Path, apiserver: FakeApiServer) -> None:
    apiserver.add_pod("web", "ml", phase="Pending", requests={R: 1})
    n = await cluster_node(workdir, apiserver)
    try:
        await n.kubelet.wait_for(R, lambda m: set(m.devices) == ALL)
        n.kubelet.set_pod_resources([("ml", "web", "c0", R, ["Ascend910-3"])])
        await n.kubelet.allocate(R, [["Ascend910-3"]])
        await until(lambda: "huawei.com/AscendReal" in pod_annotations(apiserver, "web"))
        annotations = pod_annotations(apiserver, "web")
        assert annotations["huawei.com/AscendReal"] == "Ascend910-3"
        assert annotations["huawei.com/kltDev"] == "Ascend910-3"
        assert json.loads(annotations[CONFIG_KEY])["devices"][0]["device_id"] == "3"
    finally:
        await close_node(n)


async def test_plain_path_annotates_a_pod_the_watch_brings_late(workdir: Path, apiserver: FakeApiServer) -> None:
    """Found on a real node: the kubelet's PodResources named the pod before the plugin's pod watch
    had it, and the annotation was never written. The pod here reaches the API 1.5 s after the
    allocation (the plugin's watch later still)."""
    n = await cluster_node(workdir, apiserver)
    try:
        await n.kubelet.wait_for(R, lambda m: set(m.devices) == ALL)
        n.kubelet.set_pod_resources([("ml", "late", "c0", R, ["Ascend910-2"])])
        await n.kubelet.allocate(R, [["Ascend910-2"]])
        await asyncio.sleep(1.5)  # the scenario: the pod reaches the API this long after the allocation
        apiserver.add_pod("late", "ml", phase="Pending", requests={R: 1})
        await until(lambda: "huawei.com/AscendReal" in pod_annotations(apiserver, "late"), 10, "late's annotation")
        assert pod_annotations(apiserver, "late")["huawei.com/AscendReal"] == "Ascend910-2"
    finally:
        await close_node(n)


async def test_plain_path_waits_for_a_slow_kubelet_podresources(workdir: Path, apiserver: FakeApiServer) -> None:
    """A loaded kubelet may list the allocation seconds after Allocate returned (here 3 s)."""
    apiserver.add_pod("slow", "ml", phase="Pending", requests={R: 1})
    n = await cluster_node(workdir, apiserver)
    try:
        await n.kubelet.wait_for(R, lambda m: set(m.devices) == ALL)
        await n.kubelet.allocate(R, [["Ascend910-5"]])
        await asyncio.sleep(3.0)  # the scenario: the kubelet lists the allocation this long after Allocate
        n.kubelet.set_pod_resources([("ml", "slow", "c0", R, ["Ascend910-5"])])
        await until(lambda: "huawei.com/AscendReal" in pod_annotations(apiserver, "slow"), 10, "slow's annotation")
        assert pod_annotations(apiserver, "slow")["huawei.com/AscendReal"] == "Ascend910-5"
    finally:
        await close_node(n)


async def test_node_labels_and_annotations(workdir: Path, apiserver: FakeApiServer) -> None:
    n = await cluster_node(workdir, apiserver)
    try:

        def labelled() -> bool:
            node = apiserver.get_object("nodes", "node-a")
            return node is not None and "accelerator" in (node["metadata"].get("labels") or {})

        await until(labelled)
        meta = apiserver.get_object("nodes", "node-a")["metadata"]  # type: ignore[index]
        labels, annotations = meta["labels"], meta["annotations"]
        assert labels["node.kubernetes.io/npu.chip.name"] == "910B3"
        assert labels["accelerator"] == "huawei-Ascend910"
        assert labels["servertype"] == "Ascend910B-20"
        assert labels["mind-cluster/npu-chip-memory"] == "64G"
        assert labels["huawei.com/driver.version"]
        infos = json.loads(annotations["baseDeviceInfos"])
        assert set(infos) == ALL
        assert infos["Ascend910-0"]["IP"].startswith("192.168.")
    finally:
        await close_node(n)


@pytest.mark.parametrize(
    ("profile", "label", "value"),
    [
        ("910b-infer-4", "accelerator-type", "card-910b-infer"),  # board 0x28: Volcano's 910B inference policy
        ("310p-duo-4", "infer-card-type", "card-300i-duo"),  # product type Atlas 300I Duo
    ],
)
async def test_node_labels_volcano_chooses_its_policy_by(
    workdir: Path, apiserver: FakeApiServer, profile: str, label: str, value: str
) -> None:
    cfg = write_kubeconfig(workdir / "kubeconfig", apiserver.url)
    n = await make_node(workdir, "--kubeconfig", str(cfg), profile=profile, kube="api")
    try:
        await wait_ready(n.plugin)

        def labels() -> dict[str, str]:
            node = apiserver.get_object("nodes", "node-a")
            return dict((node or {}).get("metadata", {}).get("labels") or {})

        await until(lambda: "accelerator" in labels(), 10.0, "the plugin's node labels")
        assert labels().get(label) == value
        assert apiserver.get_object("nodes", "node-a")["metadata"]["annotations"]["serverType"] == ""  # type: ignore[index]
    finally:
        await close_node(n)


# The a3-16 profile's super pod (dcmi_spod_info): pod 3, server 1; each chip's SDID carries the
# server index above bit 22 and the phy id below bit 16.
A3_SUPER_POD_ID, A3_SERVER_INDEX = 3, 1


def a3_sdid(phy: int) -> int:
    return A3_SERVER_INDEX << 22 | phy


def node_meta(apiserver: FakeApiServer) -> dict[str, dict[str, str]]:
    meta = (apiserver.get_object("nodes", "node-a") or {}).get("metadata", {})
    return {"labels": dict(meta.get("labels") or {}), "annotations": dict(meta.get("annotations") or {})}


async def test_a3_node_carries_its_super_pod(workdir: Path, apiserver: FakeApiServer) -> None:
    """addTopologyLabel / getNewNodeAnnotation on A3: the super pod label, superPodID, serverIndex,
    serverType=A3, and each chip's SDID in baseDeviceInfos, all from what the chips report."""
    cfg = write_kubeconfig(workdir / "kubeconfig", apiserver.url)
    n = await make_node(workdir, "--kubeconfig", str(cfg), profile="a3-16", kube="api")
    try:
        await wait_ready(n.plugin)
        await until(lambda: "accelerator" in node_meta(apiserver)["labels"], 10.0, "the plugin's node labels")
        labels, annotations = node_meta(apiserver)["labels"], node_meta(apiserver)["annotations"]
        assert labels["huawei.com/topotree.superpodid"] == str(A3_SUPER_POD_ID)
        assert labels["servertype"] == "Ascend910A3-24"
        assert annotations["superPodID"] == str(A3_SUPER_POD_ID)
        assert annotations["serverIndex"] == str(A3_SERVER_INDEX)
        assert annotations["serverType"] == "A3"
        infos = json.loads(annotations["baseDeviceInfos"])
        assert {name: info["SuperDeviceID"] for name, info in infos.items()} == {
            f"Ascend910-{phy}": a3_sdid(phy) for phy in range(16)
        }
    finally:
        await close_node(n)


@pytest.mark.parametrize(
    ("profile", "chips", "sdids", "super_pod_id", "server_index"),
    [
        # a3-16: logic = (phy - 8) % 16; the kubelet's 0 and 1 stand for the pod's phy 9 and 12.
        ("a3-16", 16, {9: str(a3_sdid(9)), 12: str(a3_sdid(12))}, A3_SUPER_POD_ID, str(A3_SERVER_INDEX)),
        # No super pod: the reference's Go zero SDID; the ids are our -1 for "none" (the reference's -2).
        ("910b-8", 8, {6: "0", 7: "0"}, -1, "-1"),
    ],
)
async def test_volcano_rank_configuration_carries_the_super_pod(
    workdir: Path,
    apiserver: FakeApiServer,
    profile: str,
    chips: int,
    sdids: dict[int, str],
    super_pod_id: int,
    server_index: str,
) -> None:
    """GetPodConfiguration: each physical device's super_device_id is its chip's SDID, and the
    instance's super_pod_id / server_index are the node's (read back from its annotations)."""
    real = ",".join(f"Ascend910-{phy}" for phy in sdids)
    apiserver.add_pod("job", "ml", phase="Pending", annotations={R: real, "predicate-time": "1000"}, requests={R: 2})
    cfg = write_kubeconfig(workdir / "kubeconfig", apiserver.url)
    n = await make_node(workdir, "--kubeconfig", str(cfg), "--volcano-type", profile=profile, kube="api")
    try:
        await wait_ready(n.plugin)
        everything = {f"Ascend910-{i}" for i in range(chips)}
        await n.kubelet.wait_for(R, lambda m: set(m.devices) == everything)
        await until(lambda: "superPodID" in node_meta(apiserver)["annotations"], 10.0, "the node annotations")
        await pods_cached(apiserver)
        resp = await n.kubelet.allocate(R, [["Ascend910-0", "Ascend910-1"]])
        assert resp.container_responses[0].envs["ASCEND_VISIBLE_DEVICES"] == ",".join(str(p) for p in sdids)
        await until(lambda: CONFIG_KEY in pod_annotations(apiserver, "job"))
        config = json.loads(pod_annotations(apiserver, "job")[CONFIG_KEY])
        assert {d["device_id"]: d["super_device_id"] for d in config["devices"]} == {
            str(phy): sdid for phy, sdid in sdids.items()
        }
        assert config["super_pod_id"] == super_pod_id
        assert config["server_index"] == server_index
    finally:
        await close_node(n)


async def test_kubeconfig_alone_reaches_the_apiserver(workdir: Path, apiserver: FakeApiServer) -> None:
    """No --kubeconfig: KUBECONFIG (a missing file first, as a list may hold) is what kubectl users set."""
    cfg = write_kubeconfig(workdir / "kubeconfig", apiserver.url)
    listed = os.pathsep.join([str(workdir / "absent"), str(cfg)])
    n = await make_node(workdir, kube="api", env={"KUBECONFIG": listed})
    try:
        await wait_ready(n.plugin)
        await until(lambda: apiserver.count("PATCH", "/api/v1/nodes/node-a") > 0, 10.0, "the plugin's node labels")
        assert '"source": "KUBECONFIG"' in n.plugin.log_path.read_text().replace('":"', '": "')
    finally:
        await close_node(n)


async def volcano_node(workdir: Path, apiserver: FakeApiServer, pods: dict[str, tuple[str, str | None, int]]) -> Node:
    """A Volcano node whose pending pods are name -> (annotated chips, predicate-time, chips requested)."""
    for name, (chips, time, count) in pods.items():
        annotations = {R: chips} | ({"predicate-time": time} if time is not None else {})
        apiserver.add_pod(name, "ml", phase="Pending", annotations=annotations, requests={R: count})
    n = await cluster_node(workdir, apiserver, "--volcano-type")
    await n.kubelet.wait_for(R, lambda m: set(m.devices) == ALL)
    await until(lambda: len(n.plugin.log_path.read_text()) > 0)
    await pods_cached(apiserver)
    return n


async def test_volcano_allocate_fails_when_the_pod_cannot_be_marked_taken(
    workdir: Path, apiserver: FakeApiServer
) -> None:
    """403 (no retry) and 500 through every try (3, the reference's RetryUpdateCount): Allocate fails,
    nothing is handed out, the pod is untouched; an Allocate for another pod then works."""
    n = await volcano_node(workdir, apiserver, {"first": ("Ascend910-6,Ascend910-7", "1000", 2),
                                                "single": ("Ascend910-4", "3000", 1)})  # fmt: skip
    try:
        first = "/api/v1/namespaces/ml/pods/first"
        for status, tries in ((403, 1), (500, 3)):
            apiserver.fail_next(tries, status, path_prefix=first, method="PATCH")
            before = apiserver.count("PATCH", first)
            with pytest.raises(grpc.aio.AioRpcError) as err:
                await n.kubelet.allocate(R, [["Ascend910-2", "Ascend910-3"]])
            assert err.value.code() is grpc.StatusCode.UNAVAILABLE, status
            assert "ml/first" in (err.value.details() or "") and str(status) in (err.value.details() or "")
            assert apiserver.count("PATCH", first) == before + tries
            assert pod_annotations(apiserver, "first") == {R: "Ascend910-6,Ascend910-7", "predicate-time": "1000"}
        resp = await n.kubelet.allocate(R, [["Ascend910-0"]])
        assert resp.container_responses[0].envs["ASCEND_VISIBLE_DEVICES"] == "4"
        await until(lambda: pod_annotations(apiserver, "single").get("predicate-time") == TAKEN)
        # The API server answers again: the refused pod is served with its own chips.
        resp = await n.kubelet.allocate(R, [["Ascend910-2", "Ascend910-3"]])
        assert resp.container_responses[0].envs["ASCEND_VISIBLE_DEVICES"] == "6,7"
    finally:
        await close_node(n)


async def test_volcano_taken_patch_meeting_a_409_is_retried(workdir: Path, apiserver: FakeApiServer) -> None:
    n = await volcano_node(workdir, apiserver, {"first": ("Ascend910-6,Ascend910-7", "1000", 2)})
    try:
        apiserver.fail_next(1, 409, path_prefix="/api/v1/namespaces/ml/pods/first", method="PATCH")
        resp = await n.kubelet.allocate(R, [["Ascend910-2", "Ascend910-3"]])
        assert resp.container_responses[0].envs["ASCEND_VISIBLE_DEVICES"] == "6,7"
        assert pod_annotations(apiserver, "first")["predicate-time"] == TAKEN, "written before the answer"
        await until(
            lambda: pod_annotations(apiserver, "first").get("huawei.com/AscendReal") == "Ascend910-6,Ascend910-7"
        )
    finally:
        await close_node(n)


async def test_volcano_pod_without_predicate_time_is_served_after_the_one_with_it(
    workdir: Path, apiserver: FakeApiServer
) -> None:
    """getPredicateTimeFromPodAnnotation: no predicate-time ranks as the largest time, not as a reason to skip."""
    n = await volcano_node(workdir, apiserver, {"untimed": ("Ascend910-0,Ascend910-1", None, 2),
                                                "timed": ("Ascend910-6,Ascend910-7", "5000", 2)})  # fmt: skip
    try:
        resp = await n.kubelet.allocate(R, [["Ascend910-2", "Ascend910-3"]])
        assert resp.container_responses[0].envs["ASCEND_VISIBLE_DEVICES"] == "6,7"
        resp = await n.kubelet.allocate(R, [["Ascend910-4", "Ascend910-5"]])
        assert resp.container_responses[0].envs["ASCEND_VISIBLE_DEVICES"] == "0,1"
        assert pod_annotations(apiserver, "untimed")["predicate-time"] == TAKEN
    finally:
        await close_node(n)


async def test_slow_node_notice_is_read_at_each_allocate(workdir: Path, apiserver: FakeApiServer) -> None:
    """--enable-slow-node (the reference's enableSlowNode): every container gets PERF_DUMP_PATH /
    PERF_DUMP_CONFIG from kube-system/steptime-dtpgroup; without the ConfigMap, none."""
    n = await cluster_node(workdir, apiserver, "--enable-slow-node", "true")
    try:
        await n.kubelet.wait_for(R, lambda m: set(m.devices) == ALL)
        resp = await n.kubelet.allocate(R, [["Ascend910-1"]])
        assert "PERF_DUMP_PATH" not in resp.container_responses[0].envs
        apiserver.add_configmap("steptime-dtpgroup", "kube-system",
                                {"steptime": '{"data":{"PerfDumpPath":"/dump","PerfDumpConfig":"on"}}'})  # fmt: skip
        resp = await n.kubelet.allocate(R, [["Ascend910-2"], ["Ascend910-3"]])
        for container in resp.container_responses:
            assert (container.envs["PERF_DUMP_PATH"], container.envs["PERF_DUMP_CONFIG"]) == ("/dump", "on")
            assert container.envs["ASCEND_VISIBLE_DEVICES"]
    finally:
        await close_node(n)
