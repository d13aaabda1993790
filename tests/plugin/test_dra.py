"""The DRA driver under the fake DRA kubelet, with claims and slices in the fake API server.

In process: the resource manager fed with 910b-8-shaped chips, the driver's two gRPC servers on
their sockets, the fake kubelet's plugin watcher and DRA calls (tests/support/fake_dra_kubelet),
the apiserver serving resource.k8s.io/v1beta1 as a 1.32 one does.
"""

from __future__ import annotations

import asyncio
import json
import os
import stat
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from ascend_common.adapters.kube.client import ApiClient
from ascend_common.adapters.kube.config import build_api_client
from ascend_common.adapters.kubelet import dra_pb2 as dra
from ascend_common.faults import default_fault_code_table
from ascend_common.schemas.exporter import Chip, ChipState
from ascend_device_plugin.core.dra import DRIVER, slice_name
from ascend_device_plugin.dra.driver import ClaimRef, DraDriver
from ascend_device_plugin.dra.kube import NoResourceApi, ResourceApi
from ascend_device_plugin.dra.server import DraServers
from ascend_device_plugin.dra.slices import SlicePublisher
from ascend_device_plugin.dra.state import CheckpointError
from ascend_device_plugin.metrics import PluginMetrics
from ascend_device_plugin.resources.manager import ResourceManager
from ascend_device_plugin.resources.views import ViewBoard

from tests.support.chips import node_910b
from tests.support.fake_apiserver import FakeApiServer
from tests.support.fake_dra_kubelet import DraCallError, FakeDraKubelet
from tests.support.fake_kubelet import short_tmp_dir
from tests.support.waiting import until

NODE = "node-a"
SHARED = ("davinci_manager", "hisi_hdc", "devmm_svm", "dvpp_cmdlist")


@pytest.fixture
def fake() -> Iterator[FakeApiServer]:
    with FakeApiServer(resource_api_versions=("v1beta1",)) as server:
        yield server


@pytest.fixture
async def api(fake: FakeApiServer) -> AsyncIterator[ApiClient]:
    client = await build_api_client(url=fake.url)
    yield client
    await client.close()  # type: ignore[no-untyped-call]


@dataclass
class Rig:
    root: Path
    manager: ResourceManager
    board: ViewBoard
    resource_api: ResourceApi
    kubelet: FakeDraKubelet
    driver: DraDriver
    servers: DraServers
    publisher: SlicePublisher  # not running unless a test runs it

    @property
    def cdi_root(self) -> Path:
        return self.root / "cdi"

    @property
    def state_dir(self) -> Path:
        return self.kubelet.plugins_dir / DRIVER

    def specs(self) -> list[str]:
        return sorted(p.name for p in self.cdi_root.glob("*")) if self.cdi_root.exists() else []

    async def restart_plugin(self) -> None:
        """The plugin process restarts: new driver state from disk, new servers on the same sockets."""
        await self.servers.stop()
        await until(lambda: DRIVER not in self.kubelet.plugins, what="the kubelet to see the driver leave")
        self.driver = new_driver(self.root, self.manager, self.resource_api, self.kubelet)
        await self.driver.load()
        publisher = self.publisher
        self.servers = DraServers(
            self.driver, self.kubelet.plugins_dir, self.kubelet.registry_dir, 4 << 20,
            on_registered=lambda: publisher.kick(verify=True),
        )  # fmt: skip
        await self.servers.start()
        await until(lambda: DRIVER in self.kubelet.plugins, what="the driver to register again")


def new_driver(root: Path, manager: ResourceManager, api: ResourceApi, kubelet: FakeDraKubelet) -> DraDriver:
    return DraDriver(NODE, manager, api, kubelet.plugins_dir / DRIVER, root / "cdi", dev_root=root / "host")


def chips_with(state: dict[int, ChipState] | None = None) -> dict[int, Chip]:
    chips = node_910b()
    for phy, chip_state in (state or {}).items():
        logic = next(lg for lg, c in chips.items() if c.phy_id == phy)
        chips[logic] = chips[logic].model_copy(update={"state": chip_state})
    return chips


def wipe(fake: FakeApiServer, driver: str | None = None) -> None:
    """What the kubelet's registration handler deletes: the node's slices (of one driver)."""
    for obj in fake.objects("resourceslices"):
        if obj["spec"].get("nodeName") == NODE and driver in (None, obj["spec"].get("driver")):
            fake.remove("resourceslices", obj["metadata"]["name"])


@pytest.fixture
async def rig(api: ApiClient, fake: FakeApiServer) -> AsyncIterator[Rig]:
    with short_tmp_dir("dra-") as root:
        dev = root / "host" / "dev"
        dev.mkdir(parents=True)
        for name in SHARED:
            (dev / name).touch()
        board = ViewBoard()
        manager = ResourceManager(board, default_fault_code_table(), PluginMetrics())
        manager.set_chips(chips_with())
        resource_api = ResourceApi(lambda: api)
        kubelet = FakeDraKubelet(root, on_start=lambda: wipe(fake), on_deregister=lambda driver: wipe(fake, driver))
        await kubelet.start()
        driver = new_driver(root, manager, resource_api, kubelet)
        await driver.load()
        publisher = SlicePublisher(NODE, manager, board, resource_api, period=5.0)
        servers = DraServers(
            driver, kubelet.plugins_dir, kubelet.registry_dir, 4 << 20,
            on_registered=lambda: publisher.kick(verify=True),
        )  # fmt: skip
        await servers.start()
        rig = Rig(root, manager, board, resource_api, kubelet, driver, servers, publisher)
        try:
            await until(lambda: DRIVER in kubelet.plugins, what="the driver to register")
            yield rig
        finally:
            await rig.servers.stop()
            await kubelet.stop()


def put_claim(
    fake: FakeApiServer, name: str, results: list[dict[str, str]], *, namespace: str = "default"
) -> dra.Claim:
    obj = fake.put_object(
        "resourceclaims",
        {
            "apiVersion": "resource.k8s.io/v1beta1",
            "kind": "ResourceClaim",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"devices": {"requests": [{"name": "npu", "deviceClassName": DRIVER}]}},
            "status": {"allocation": {"devices": {"results": results}}},
        },
    )
    return dra.Claim(namespace=namespace, name=name, uid=obj["metadata"]["uid"])


def ours(device: str, *, pool: str = NODE, driver: str = DRIVER) -> dict[str, str]:
    return {"request": "npu", "driver": driver, "pool": pool, "device": device}


# ---- registration -----------------------------------------------------------------------------


async def test_the_driver_registers_through_the_plugin_watcher(rig: Rig) -> None:
    plugin = rig.kubelet.plugins[DRIVER]
    assert plugin.service == "v1beta1.DRAPlugin"
    assert plugin.endpoint == str(rig.kubelet.plugins_dir / DRIVER / "dra.sock")
    assert plugin.socket == rig.kubelet.registry_dir / "npu.huawei.com-reg.sock"
    await until(lambda: rig.servers.registration.registered, what="NotifyRegistrationStatus")
    for path in (Path(plugin.endpoint), plugin.socket):
        mode = os.stat(path).st_mode
        assert stat.S_ISSOCK(mode) and stat.S_IMODE(mode) == 0o600, path


async def test_a_kubelet_restart_finds_the_driver_again(rig: Rig) -> None:
    await rig.kubelet.restart()
    await until(lambda: DRIVER in rig.kubelet.plugins, what="re-registration after a kubelet restart")


# ---- prepare / unprepare ----------------------------------------------------------------------


async def test_prepare_writes_the_spec_answers_its_id_and_unprepare_removes_it(rig: Rig, fake: FakeApiServer) -> None:
    claim = put_claim(fake, "one-chip", [ours("Ascend910-3")])
    result = await rig.kubelet.prepare(DRIVER, [claim])
    result.raise_for_errors([claim])
    (device,) = result.devices[claim.uid]
    assert (device.pool_name, device.device_name, list(device.request_names)) == (NODE, "Ascend910-3", ["npu"])
    assert list(device.cdi_device_ids) == ["ascend.com/npu=3"]
    spec_file = rig.cdi_root / f"ascend.com-npu_{claim.uid}.yaml"
    spec = json.loads(spec_file.read_text())
    assert spec["kind"] == "ascend.com/npu"
    assert [d["name"] for d in spec["devices"]] == ["3"]
    assert "ASCEND_VISIBLE_DEVICES=3" in spec["containerEdits"]["env"]
    assert [n["path"] for n in spec["containerEdits"]["deviceNodes"]] == [f"/dev/{n}" for n in
                                                                         ("davinci_manager", "hisi_hdc", "devmm_svm",
                                                                          "dvpp_cmdlist")]  # fmt: skip
    assert await rig.kubelet.unprepare(DRIVER, [claim]) == {}
    assert rig.specs() == []


async def test_a_plugin_restart_between_prepare_and_unprepare_loses_nothing(rig: Rig, fake: FakeApiServer) -> None:
    claim = put_claim(fake, "survivor", [ours("Ascend910-5")])
    first = await rig.kubelet.prepare(DRIVER, [claim])
    await rig.restart_plugin()
    # The kubelet prepares again after a restart; the answer comes from the checkpoint, not the
    # apiserver (the claim is gone from it here), and no second entry or file appears.
    fake.remove("resourceclaims", "survivor", "default")
    again = await rig.kubelet.prepare(DRIVER, [claim])
    assert again.devices == first.devices and not again.errors
    assert rig.specs() == [f"ascend.com-npu_{claim.uid}.yaml"]
    checkpoint = json.loads((rig.state_dir / "checkpoint.json").read_text())
    assert list(checkpoint["v1"]["preparedClaims"]) == [claim.uid]
    await rig.restart_plugin()
    assert await rig.kubelet.unprepare(DRIVER, [claim]) == {}
    assert rig.specs() == []
    assert json.loads((rig.state_dir / "checkpoint.json").read_text())["v1"]["preparedClaims"] == {}


async def test_a_lost_spec_is_written_again_on_the_next_prepare(rig: Rig, fake: FakeApiServer) -> None:
    claim = put_claim(fake, "lost", [ours("Ascend910-1")])
    await rig.kubelet.prepare(DRIVER, [claim])
    (rig.cdi_root / f"ascend.com-npu_{claim.uid}.yaml").unlink()
    result = await rig.kubelet.prepare(DRIVER, [claim])
    assert not result.errors
    assert rig.specs() == [f"ascend.com-npu_{claim.uid}.yaml"]


@pytest.mark.parametrize(
    ("results", "error"),
    [
        pytest.param([ours("Ascend910-3", pool="node-b")], "pool 'node-b'", id="another node's pool"),
        pytest.param([ours("Ascend910-42")], "'Ascend910-42' is not a chip", id="unknown device"),
        pytest.param([ours("gpu-0", driver="gpu.example.com")], "no device of driver", id="another driver"),
    ],
)
async def test_bad_claims_get_their_own_error_and_no_file(
    rig: Rig, fake: FakeApiServer, results: list[dict[str, str]], error: str
) -> None:
    bad = put_claim(fake, "bad", results)
    good = put_claim(fake, "good", [ours("Ascend910-0")])
    result = await rig.kubelet.prepare(DRIVER, [bad, good])
    assert error in result.errors[bad.uid]
    assert bad.uid not in result.devices
    assert [d.device_name for d in result.devices[good.uid]] == ["Ascend910-0"]  # the batch goes on
    assert rig.specs() == [f"ascend.com-npu_{good.uid}.yaml"]
    with pytest.raises(DraCallError, match=f"NodePrepareResources failed for claim default/bad: .*{error}"):
        result.raise_for_errors([bad, good])


async def test_a_claim_the_apiserver_does_not_have_is_refused(rig: Rig) -> None:
    ghost = dra.Claim(namespace="default", name="ghost", uid="0000")
    result = await rig.kubelet.prepare(DRIVER, [ghost])
    assert result.errors == {"0000": "claim default/ghost: not found"}
    assert rig.specs() == []


async def test_a_recreated_claim_is_not_prepared_under_the_old_uid(rig: Rig, fake: FakeApiServer) -> None:
    claim = put_claim(fake, "recreated", [ours("Ascend910-2")])
    stale = dra.Claim(namespace="default", name="recreated", uid="not-" + claim.uid)
    result = await rig.kubelet.prepare(DRIVER, [stale])
    assert "the kubelet asked for" in result.errors[stale.uid]
    assert rig.specs() == []


async def test_unprepare_of_an_unknown_claim_is_no_error(rig: Rig) -> None:
    assert await rig.kubelet.unprepare(DRIVER, [dra.Claim(namespace="default", name="x", uid="nope")]) == {}


async def test_a_corrupt_checkpoint_stops_the_driver_from_starting(rig: Rig) -> None:
    rig.state_dir.mkdir(parents=True, exist_ok=True)
    (rig.state_dir / "checkpoint.json").write_text('{"checksum": "00", "v1": {"preparedClaims": {}}}')
    with pytest.raises(CheckpointError, match="checksum mismatch"):
        await new_driver(rig.root, rig.manager, rig.resource_api, rig.kubelet).load()


# ---- ResourceSlices ---------------------------------------------------------------------------


def the_slice(fake: FakeApiServer) -> dict[str, Any] | None:
    return fake.get_object("resourceslices", slice_name(NODE))


def device_names(obj: dict[str, Any] | None) -> list[str]:
    return [d["name"] for d in (obj or {}).get("spec", {}).get("devices", [])]


async def test_the_slice_follows_health_generation_by_generation(rig: Rig, fake: FakeApiServer) -> None:
    publisher = SlicePublisher(NODE, rig.manager, rig.board, rig.resource_api, period=5.0)
    assert await publisher.sync()
    written = the_slice(fake)
    assert written is not None
    assert written["apiVersion"] == "resource.k8s.io/v1beta1"  # what this apiserver serves
    assert written["spec"]["pool"] == {"name": NODE, "generation": 1, "resourceSliceCount": 1}
    assert device_names(written) == [f"Ascend910-{p}" for p in range(8)]
    assert not await publisher.sync()  # nothing changed: nothing written

    rig.manager.set_chips(chips_with({3: ChipState.CARD_DROP}))
    assert await publisher.sync()
    faulty = the_slice(fake)
    assert faulty is not None and faulty["spec"]["pool"]["generation"] == 2
    assert "Ascend910-3" not in device_names(faulty) and len(device_names(faulty)) == 7

    rig.manager.set_chips(chips_with())
    assert await publisher.sync()
    assert device_names(the_slice(fake)) == [f"Ascend910-{p}" for p in range(8)]


async def test_the_slice_loop_drops_a_faulty_chip_within_100_ms(rig: Rig, fake: FakeApiServer) -> None:
    publisher = SlicePublisher(NODE, rig.manager, rig.board, rig.resource_api, period=5.0)
    task = asyncio.create_task(publisher.run())
    try:
        await until(lambda: len(device_names(the_slice(fake))) == 8, what="the first slice")
        started = time.perf_counter()
        rig.manager.set_chips(chips_with({3: ChipState.CARD_DROP}))
        await until(lambda: "Ascend910-3" not in device_names(the_slice(fake)), what="chip 3 to leave the slice")
        assert time.perf_counter() - started < 1.0  # generous on a loaded machine; the bench holds the 100 ms p99
        rig.manager.set_chips(chips_with())
        await until(lambda: "Ascend910-3" in device_names(the_slice(fake)), what="chip 3 to come back")
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


async def test_a_slice_changed_by_someone_else_is_replaced_at_its_resource_version(
    rig: Rig, fake: FakeApiServer
) -> None:
    publisher = SlicePublisher(NODE, rig.manager, rig.board, rig.resource_api, period=5.0)
    await publisher.sync()
    fake.modify("resourceslices", slice_name(NODE), mutate=lambda obj: obj["spec"]["pool"].update(generation=10))
    rig.manager.set_chips(chips_with({0: ChipState.UNKNOWN}))
    assert await publisher.sync()
    written = the_slice(fake)
    assert written is not None and written["spec"]["pool"]["generation"] == 11


async def test_an_apiserver_without_the_resource_api_is_a_clear_error() -> None:
    with FakeApiServer() as old:  # serves no resource.k8s.io, as the real 1.20 one
        client = await build_api_client(url=old.url)
        try:
            with pytest.raises(NoResourceApi, match=r"no resource\.k8s\.io API"):
                await ResourceApi(lambda: client).version()
        finally:
            await client.close()  # type: ignore[no-untyped-call]


async def test_v1_is_chosen_where_the_apiserver_serves_it() -> None:
    with FakeApiServer(resource_api_versions=("v1", "v1beta1")) as new:
        client = await build_api_client(url=new.url)
        try:
            assert await ResourceApi(lambda: client).version() == "v1"
        finally:
            await client.close()  # type: ignore[no-untyped-call]


# ---- one chip, one consumer (`--kubelet-api both`) --------------------------------------------


async def test_a_chip_the_device_plugin_holds_is_refused_and_left_out_of_the_slice(
    rig: Rig, fake: FakeApiServer
) -> None:
    held = frozenset({"Ascend910-2"})
    driver = DraDriver(
        NODE, rig.manager, rig.resource_api, rig.root / "state-both", rig.root / "cdi-both",
        dev_root=rig.root / "host", held_elsewhere=lambda: held,
    )  # fmt: skip
    await driver.load()
    claim = put_claim(fake, "wants-2", [ours("Ascend910-2")])
    (outcome,) = (await driver.prepare([ClaimRef("default", "wants-2", claim.uid)])).values()
    assert outcome.error == "claim default/wants-2: Ascend910-2 is allocated through the device plugin"
    assert not (rig.root / "cdi-both").exists() or not list((rig.root / "cdi-both").iterdir())
    publisher = SlicePublisher(NODE, rig.manager, rig.board, rig.resource_api, period=5.0, withheld=lambda: held)
    assert "Ascend910-2" not in [d.name for d in publisher.devices()]
    assert len(publisher.devices()) == 7


async def test_a_chip_prepared_for_one_claim_is_refused_to_another(rig: Rig, fake: FakeApiServer) -> None:
    first = put_claim(fake, "first", [ours("Ascend910-4")])
    second = put_claim(fake, "second", [ours("Ascend910-4")])
    assert not (await rig.kubelet.prepare(DRIVER, [first])).errors
    result = await rig.kubelet.prepare(DRIVER, [second])
    assert f"Ascend910-4 is prepared for claim uid {first.uid}" in result.errors[second.uid]
    assert rig.specs() == [f"ascend.com-npu_{first.uid}.yaml"]


def test_withheld_chips_are_unhealthy_for_the_device_plugin_only() -> None:
    board = ViewBoard()
    manager = ResourceManager(board, default_fault_code_table(), PluginMetrics())
    manager.set_chips(chips_with())

    def advertised() -> dict[str, bool]:
        view = board.get("Ascend910")
        assert view is not None
        return {d.id: d.healthy for d in view.devices}

    manager.set_withheld(frozenset({"Ascend910-3"}))
    assert advertised()["Ascend910-3"] is False
    assert sum(advertised().values()) == 7
    assert manager.inventory.chips[3].healthy  # the chip itself is fine: the slice keeps offering it
    manager.set_withheld(frozenset())
    assert all(advertised().values())


async def test_a_kubelet_restart_wipes_the_slice_and_the_driver_writes_it_again(rig: Rig, fake: FakeApiServer) -> None:
    task = asyncio.create_task(rig.publisher.run())
    try:
        await until(lambda: len(device_names(the_slice(fake))) == 8, what="the first slice")
        await rig.kubelet.restart()  # wipes the node's slices, then registers the driver again
        assert the_slice(fake) is None or rig.kubelet.plugins  # wiped before (or as) the driver came back
        await until(lambda: len(device_names(the_slice(fake))) == 8, timeout=3, what="the slice written again")
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


async def test_a_spec_left_by_an_unfinished_prepare_is_removed_at_start(rig: Rig, fake: FakeApiServer) -> None:
    kept = put_claim(fake, "kept", [ours("Ascend910-6")])
    await rig.kubelet.prepare(DRIVER, [kept])
    orphan = rig.cdi_root / "ascend.com-npu_dead-beef.yaml"
    orphan.write_text("{}")  # as if the process died between the spec and the checkpoint
    other_vendor = rig.cdi_root / "nvidia.com-gpu_x.yaml"
    other_vendor.write_text("{}")
    await rig.restart_plugin()
    assert rig.specs() == sorted([f"ascend.com-npu_{kept.uid}.yaml", "nvidia.com-gpu_x.yaml"])
