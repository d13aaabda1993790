"""The plugin on every 950 (A5) simulator profile, with the fake kubelet and the fake API server:
`huawei.com/npu` on `npu.sock` with `npu-<phy>` ids, the old `huawei.com/Ascend910` taken off the
node (RemoveOldResource), the node's labels, and Allocate as the 950's runtime wants it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from ascend_common.products import HCCL_TOPO_FILES, ProductType

from tests.plugin.conftest import close_node, make_node
from tests.support.fake_apiserver import FakeApiServer, write_kubeconfig
from tests.support.plugin import wait_ready
from tests.support.waiting import until

R = "huawei.com/npu"
OLD = "huawei.com/Ascend910"
A5_PROFILES = ["a5-superpod-8", "a5-8", "a5-atlas350-4", "a5-atlas350-4p"]
TOPO = {
    "a5-superpod-8": HCCL_TOPO_FILES[ProductType.POD_2D],
    "a5-8": HCCL_TOPO_FILES[ProductType.SERVER],
    "a5-atlas350-4": HCCL_TOPO_FILES[ProductType.CARD_1P],
    "a5-atlas350-4p": HCCL_TOPO_FILES[ProductType.CARD_4P],
}


@pytest.fixture
def apiserver() -> Iterator[FakeApiServer]:
    with FakeApiServer() as server:
        server.add_node("node-a", internal_ip="10.1.2.3")
        # What a node that ran an earlier release on these chips still carries.
        server.modify("nodes", "node-a", mutate=lambda n: n["status"].update(
            capacity={"cpu": "64", OLD: "8"}, allocatable={"cpu": "62", OLD: "8"},
        ))  # fmt: skip
        yield server


def node_status(apiserver: FakeApiServer) -> dict[str, dict[str, str]]:
    node = apiserver.get_object("nodes", "node-a")
    assert node is not None
    return {key: dict(node["status"].get(key) or {}) for key in ("capacity", "allocatable")}


@pytest.mark.parametrize("profile", A5_PROFILES)
async def test_a5_registers_npu_and_takes_the_old_resource_off_the_node(
    workdir: Path, apiserver: FakeApiServer, profile: str
) -> None:
    kubeconfig = write_kubeconfig(workdir / "kubeconfig", apiserver.url)
    n = await make_node(workdir, "--kubeconfig", str(kubeconfig), profile=profile, kube="api")
    try:
        await wait_ready(n.plugin)
        async with n.exporter.client() as client:
            chips = (await client.get("/v1/chips")).json()["chips"]
        expected = {f"npu-{c['phy_id']}" for c in chips}
        assert {c["name"] for c in chips} == expected
        reg = await n.kubelet.wait_registered(R)
        assert (reg.endpoint, reg.version) == ("npu.sock", "v1beta1")
        msg = await n.kubelet.wait_for(R, lambda m: set(m.devices) == expected)
        assert msg.healthy == expected
        assert n.kubelet.registration_count(OLD) == 0
        assert (n.workdir / "dp" / "npu.sock").exists()

        await until(lambda: OLD not in node_status(apiserver)["capacity"], 10.0, "the old resource off the node")
        assert node_status(apiserver) == {"capacity": {"cpu": "64"}, "allocatable": {"cpu": "62"}}
        assert apiserver.count("PATCH", "/api/v1/nodes/node-a/status") == 1
        await until(lambda: '"old resource removed from the node"' in n.plugin.log_path.read_text(), 5.0)

        # The node's labels name the npu resource and the 950's server type.
        def labels() -> dict[str, str]:
            node = apiserver.get_object("nodes", "node-a")
            return dict((node or {}).get("metadata", {}).get("labels") or {})

        await until(lambda: labels().get("accelerator") == "huawei-npu", 10.0, "the node's labels")
        assert labels()["servertype"] == "npu-25"
        assert ("huawei.com/topotree.rackid" in labels()) is (profile == "a5-superpod-8")

        # Allocate: the runtime is told the logic id of the chip the kubelet names, and the
        # node's HCCL topology file.
        chip = max(chips, key=lambda c: c["phy_id"])
        resp = await n.kubelet.allocate(R, [[chip["name"]]])
        envs = dict(resp.container_responses[0].envs)
        assert envs == {
            "ASCEND_VISIBLE_DEVICES": str(chip["logic_id"]),
            "ASCEND_RUNTIME_OPTIONS": "",
            "HCCL_TOPO_FILE_PATH": TOPO[profile],
        }
    finally:
        await close_node(n)
    assert not (n.workdir / "dp" / "npu.sock").exists(), "the plugin removes its socket on shutdown"


async def test_a_node_without_the_old_resource_is_left_alone(workdir: Path) -> None:
    with FakeApiServer() as apiserver:
        apiserver.add_node("node-a")
        kubeconfig = write_kubeconfig(workdir / "kubeconfig", apiserver.url)
        n = await make_node(workdir, "--kubeconfig", str(kubeconfig), profile="a5-8", kube="api")
        try:
            await wait_ready(n.plugin)
            await until(lambda: '"old resource not in the node' in n.plugin.log_path.read_text(), 10.0)
            assert apiserver.count("PATCH", "/api/v1/nodes/node-a/status") == 0
        finally:
            await close_node(n)


async def test_a_910b_node_keeps_its_ascend910_resource(workdir: Path, apiserver: FakeApiServer) -> None:
    kubeconfig = write_kubeconfig(workdir / "kubeconfig", apiserver.url)
    n = await make_node(workdir, "--kubeconfig", str(kubeconfig), kube="api")
    try:
        await wait_ready(n.plugin)
        await n.kubelet.wait_registered(OLD)
        await until(lambda: apiserver.count("PATCH", "/api/v1/nodes/node-a") > 0, 10.0, "the plugin's node labels")
        assert apiserver.count("PATCH", "/api/v1/nodes/node-a/status") == 0
        assert node_status(apiserver)["capacity"][OLD] == "8"
    finally:
        await close_node(n)
