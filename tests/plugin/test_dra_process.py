"""Process tier: the device-plugin with `--kubelet-api dra` beside a sim exporter, under the fake
DRA kubelet, with claims and slices in the fake API server (resource.k8s.io/v1beta1, as a 1.32
apiserver serves it)."""

from __future__ import annotations

import json
import shutil
import tempfile
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.support.exporter import ExporterProc, auth, start_exporter
from tests.support.fake_apiserver import FakeApiServer, write_kubeconfig
from tests.support.fake_dra_kubelet import (
    SERVICES_1_32,
    SERVICES_1_36,
    DraCallError,
    FakeDraKubelet,
    JsonObj,
    allocated_claim,
    pod_using,
)
from tests.support.fake_kubelet import FakeKubelet, short_tmp_dir
from tests.support.plugin import PluginProc, start_plugin, wait_ready
from tests.support.plugin import dra_args as plugin_dra_args
from tests.support.waiting import until

DRIVER = "npu.huawei.com"
SLICE = "node-a-npu.huawei.com"


@pytest.fixture
def apiserver() -> Iterator[FakeApiServer]:
    with FakeApiServer(resource_api_versions=("v1beta1",)) as server:
        server.add_node("node-a", internal_ip="10.1.2.3")
        yield server


@dataclass
class DraNode:
    workdir: Path
    exporter: ExporterProc
    kubelet: FakeDraKubelet
    plugin: PluginProc

    @property
    def cdi_root(self) -> Path:
        return self.workdir / "cdi"


def dra_args(workdir: Path, apiserver: FakeApiServer) -> list[str]:
    return plugin_dra_args(workdir, write_kubeconfig(workdir / "kubeconfig", apiserver.url))


@pytest.fixture
def services(request: pytest.FixtureRequest) -> tuple[str, ...]:
    """What the fake kubelet serves: 1.36's v1 and v1beta1 unless a test asks for both kinds."""
    return tuple(getattr(request, "param", SERVICES_1_36))


# The kubelet's two DRA services: v1 (1.34+ pick it) and v1beta1 (1.32, 1.33).
BOTH_APIS = pytest.mark.parametrize("services", [SERVICES_1_36, SERVICES_1_32], ids=["v1", "v1beta1"], indirect=True)


@pytest.fixture
async def node(apiserver: FakeApiServer, services: tuple[str, ...]) -> AsyncIterator[DraNode]:
    with short_tmp_dir("dra-") as workdir:
        exporter = start_exporter(workdir / "exporter", profile="910b-8")
        kubelet = kubelet_for(workdir / "k", apiserver, services)
        await kubelet.start()
        (workdir / "dp").mkdir()
        plugin = start_plugin(workdir, exporter, workdir / "dp", *dra_args(workdir, apiserver), kube="api")
        n = DraNode(workdir, exporter, kubelet, plugin)
        try:
            await wait_ready(plugin)
            yield n
        finally:
            code = n.plugin.stop()
            shutil.copyfile(n.plugin.log_path, Path(tempfile.gettempdir()) / "last-device-plugin-dra.log")
            await kubelet.stop()
            exporter.stop()
            assert code == 0, n.plugin.log_path.read_text()[-3000:]
            assert not list((workdir / "k").rglob("*.sock")), "the driver removes its sockets on shutdown"


def kubelet_for(root: Path, apiserver: FakeApiServer, services: tuple[str, ...] = SERVICES_1_36) -> FakeDraKubelet:
    """The fake DRA kubelet, reading claims and wiping the node's slices through the fake API server."""
    return FakeDraKubelet(root, api=apiserver.api_client(), node="node-a", services=services)


def slice_devices(apiserver: FakeApiServer) -> list[dict[str, Any]]:
    obj = apiserver.get_object("resourceslices", SLICE)
    return list((obj or {}).get("spec", {}).get("devices", []))


@BOTH_APIS
async def test_registers_publishes_the_slice_and_prepares_across_a_restart(
    node: DraNode, apiserver: FakeApiServer, services: tuple[str, ...]
) -> None:
    plugin = node.kubelet.plugins[DRIVER]  # ready means registered: the kubelet told the plugin so
    # The driver lists v1 first: a 1.36 kubelet takes it, one serving v1beta1 only takes that.
    assert plugin.service == ("v1.DRAPlugin" if "v1.DRAPlugin" in services else "v1beta1.DRAPlugin")

    await until(lambda: len(slice_devices(apiserver)) == 8, what="the node's ResourceSlice with 8 chips")
    devices = slice_devices(apiserver)
    assert [d["name"] for d in devices] == [f"ascend910-{p}" for p in range(8)]
    attrs = devices[3]["basic"]["attributes"]
    assert set(attrs) >= {"deviceType", "physicId", "logicId", "numaNode", "cardId", "hccsRing"}
    assert attrs["physicId"] == {"int": 3}

    pod, uid = put_claim(apiserver, "train", "ascend910-3")
    assert await node.kubelet.prepare(pod) == {"main": ["ascend.com/npu=3"]}
    assert [list(d.cdi_device_ids) for d in node.kubelet.calls[-1].devices[uid]] == [["ascend.com/npu=3"]]
    spec_file = node.cdi_root / f"ascend.com-npu_{uid}.yaml"
    env = json.loads(spec_file.read_text())["containerEdits"]["env"]
    logic = attrs["logicId"]["int"]
    # The 910B's runtime is told phy ids, as by Allocate (only the 950's is told logic ids).
    assert "ASCEND_VISIBLE_DEVICES=3" in env, (env, logic)

    metrics = node.plugin.metrics()
    assert 'ascend_device_plugin_dra_claims_total{call="prepare",result="ok"} 1.0' in metrics
    assert "ascend_device_plugin_dra_slice_devices 8.0" in metrics

    node.plugin = node.plugin.restart()
    await wait_ready(node.plugin)
    await until(lambda: DRIVER in node.kubelet.plugins, what="the restarted driver to register")
    assert node.kubelet.deregistered == [DRIVER]  # the kubelet wiped the slice when the driver left...
    await until(lambda: f"spec.driver={DRIVER},spec.nodeName=node-a" in node.kubelet.wipes, what="the driver's wipe")
    await until(lambda: len(slice_devices(apiserver)) == 8, what="...and the restarted driver wrote it again")
    await node.kubelet.unprepare(pod)  # from the kubelet's cache, to the restarted driver
    assert [c.method for c in node.kubelet.calls] == ["NodePrepareResources", "NodeUnprepareResources"]
    assert not spec_file.exists()


# ---- the health stream ------------------------------------------------------------------------


FAULT_CODE = "8C1FA006"  # a chip fault the code policy takes the chip out of scheduling for


async def sim_fault(node: DraNode, phy: int, assertion: str) -> None:
    async with node.exporter.client() as client:
        chips = (await client.get("/v1/chips")).json()["chips"]
        (logic,) = [int(c["logic_id"]) for c in chips if int(c["phy_id"]) == phy]
        r = await client.post(
            f"/v1/sim/chips/{logic}/faults", json={"code": FAULT_CODE, "assertion": assertion}, headers=auth("sim")
        )
        assert r.status_code == 204, r.text


@BOTH_APIS
async def test_the_health_stream_shows_a_prepared_chips_fault_and_recovery(
    node: DraNode, apiserver: FakeApiServer
) -> None:
    kubelet = node.kubelet
    pod, _ = put_claim(apiserver, "train", "ascend910-3")
    await kubelet.prepare(pod)
    healthy = await kubelet.wait_health(DRIVER, "node-a", "ascend910-3", "Healthy")
    assert list(healthy.devices) == [("node-a", "ascend910-3")]

    mark = len(kubelet.health_messages)
    await sim_fault(node, 3, "occur")
    await kubelet.wait_health(DRIVER, "node-a", "ascend910-3", "Unhealthy", after=mark)
    health, message = kubelet.device_health(DRIVER, "node-a", "ascend910-3")
    assert health == "Unhealthy" and message.startswith("codes "), message
    mark = len(kubelet.health_messages)
    await sim_fault(node, 3, "recover")
    await kubelet.wait_health(DRIVER, "node-a", "ascend910-3", "Healthy", after=mark)
    assert kubelet.health_errors == []  # a 1.36 kubelet's log has no WatchResources error


# ---- --kubelet-api both: one chip, one consumer ------------------------------------------------


def put_claim(apiserver: FakeApiServer, name: str, device: str) -> tuple[JsonObj, str]:
    """A pod in namespace ml and its claim for `device`, allocated and reserved for it; the claim's uid."""
    pod = pod_using(f"{name}-pod", [name], namespace="ml")
    result = {"request": "npu", "driver": DRIVER, "pool": "node-a", "device": device}
    obj = apiserver.put_object("resourceclaims", allocated_claim(name, [result], pod, namespace="ml"))
    return pod, obj["metadata"]["uid"]


async def test_both_apis_never_hand_out_the_same_chip(apiserver: FakeApiServer) -> None:
    with short_tmp_dir("drb-") as workdir:
        exporter = start_exporter(workdir / "exporter", profile="910b-8")
        dra_kubelet = kubelet_for(workdir / "k", apiserver)
        await dra_kubelet.start()
        (workdir / "dp").mkdir()
        dp_kubelet = FakeKubelet(workdir / "dp", workdir / "podres")
        await dp_kubelet.start()
        args = [a if a != "dra" else "both" for a in dra_args(workdir, apiserver)]
        plugin = start_plugin(workdir, exporter, workdir / "dp", *args, kube="api")
        try:
            await wait_ready(plugin)
            resource = "huawei.com/Ascend910"
            await until(lambda: dp_kubelet.allocatable(resource) == 8, what="8 allocatable through the device plugin")
            await until(lambda: len(slice_devices(apiserver)) == 8, what="8 devices in the slice")

            # DRA -> device plugin: a chip prepared for a claim is Unhealthy for the kubelet's device manager.
            pod, _ = put_claim(apiserver, "dra-job", "ascend910-3")
            await dra_kubelet.prepare(pod)
            await until(lambda: "Ascend910-3" not in dp_kubelet.healthy_ids(resource), what="Ascend910-3 Unhealthy")
            assert dp_kubelet.allocatable(resource) == 7
            # ... and healthy again once the claim is released.
            await dra_kubelet.unprepare(pod)
            await until(lambda: dp_kubelet.allocatable(resource) == 8, what="Ascend910-3 back for the device plugin")

            # Device plugin -> DRA: a chip a device-plugin pod holds leaves the slice, and a claim for it is refused.
            apiserver.add_pod("dp-job", "ml", annotations={"huawei.com/AscendReal": "Ascend910-5"},
                              requests={resource: 1})  # fmt: skip
            await until(
                lambda: "ascend910-5" not in [d["name"] for d in slice_devices(apiserver)],
                what="ascend910-5 to leave the slice",
            )
            late_pod, late = put_claim(apiserver, "late", "ascend910-5")
            with pytest.raises(DraCallError, match="NodePrepareResources failed for claim ml/late"):
                await dra_kubelet.prepare(late_pod)
            assert "ascend910-5 is allocated through the device plugin" in dra_kubelet.calls[-1].errors[late]
            assert not list((workdir / "cdi").glob(f"*{late}*"))
        finally:
            code = plugin.stop()
            shutil.copyfile(plugin.log_path, Path(tempfile.gettempdir()) / "last-device-plugin-both.log")
            await dp_kubelet.stop()
            await dra_kubelet.stop()
            exporter.stop()
            assert code == 0, plugin.log_path.read_text()[-3000:]
