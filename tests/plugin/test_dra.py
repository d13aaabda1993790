"""The DRA driver under the fake DRA kubelet, with claims and slices in the fake API server.

In process: the resource manager fed with 910b-8-shaped chips, the driver's two gRPC servers on
their sockets, the fake kubelet's plugin watcher and DRA calls (tests/support/fake_dra_kubelet),
the apiserver serving resource.k8s.io/v1beta1 as a 1.32 one does. The kubelet is given pods: it
reads their claims from the apiserver and sends the driver only what the 1.32 manager would.
"""

from __future__ import annotations

import asyncio
import copy
import json
import os
import stat
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import grpc
import pytest
from ascend_common.adapters.kube.client import ApiClient
from ascend_common.adapters.kube.config import build_api_client
from ascend_common.adapters.kubelet import dra_pb2 as dra
from ascend_common.adapters.kubelet import dra_pb2_grpc as dra_grpc
from ascend_common.adapters.kubelet import dra_v1_pb2 as dra_v1
from ascend_common.adapters.kubelet import dra_v1_pb2_grpc as dra_v1_grpc
from ascend_common.faults import FaultLevel, default_fault_code_table
from ascend_common.schemas.exporter import Chip, ChipState
from ascend_common.schemas.verdict import ChipVerdict, VerdictReason
from ascend_device_plugin.allocation.chip_owners import ChipOwners, ChipTaken
from ascend_device_plugin.dra.driver import ClaimRef, DraDriver, Outcome
from ascend_device_plugin.dra.grpc_servers import DraServers
from ascend_device_plugin.dra.resource_api import NoResourceApi, ResourceApi
from ascend_device_plugin.dra.slice_devices import DRIVER, slice_name
from ascend_device_plugin.dra.slices import SlicePublisher
from ascend_device_plugin.dra.state import Checkpoint, CheckpointError, PreparedDevice
from ascend_device_plugin.inventory.views import ViewBoard
from ascend_device_plugin.metrics import PluginMetrics
from ascend_device_plugin.resources.manager import ResourceManager

from tests.support.chips import node_910b
from tests.support.fake_apiserver import FakeApiServer
from tests.support.fake_dra_kubelet import (
    SERVICES_1_32,
    SERVICES_1_36,
    DraCallError,
    FakeDraKubelet,
    JsonObj,
    allocated_claim,
    pod_using,
)
from tests.support.fake_kubelet import short_tmp_dir
from tests.support.waiting import until

NODE = "node-a"
SHARED = ("davinci_manager", "hisi_hdc", "devmm_svm", "dvpp_cmdlist")


@pytest.fixture
def fake() -> Iterator[FakeApiServer]:
    with FakeApiServer(resource_api_versions=("v1beta1",)) as server:
        server.add_node(NODE)  # the kubelet's slice wipes wait for its Node
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
            on_registered=lambda: publisher.kick(verify=True), changes=self.manager,
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


@pytest.fixture
def services(request: pytest.FixtureRequest) -> tuple[str, ...]:
    """What the fake kubelet serves: a 1.36 kubelet (v1 chosen) unless a test asks for both."""
    return tuple(getattr(request, "param", SERVICES_1_36))


# The kubelet's two DRA services: v1 (1.34+ pick it) and v1beta1 (1.32, 1.33).
BOTH_APIS = pytest.mark.parametrize("services", [SERVICES_1_36, SERVICES_1_32], ids=["v1", "v1beta1"], indirect=True)


@pytest.fixture
async def rig(api: ApiClient, fake: FakeApiServer, services: tuple[str, ...]) -> AsyncIterator[Rig]:
    with short_tmp_dir("dra-") as root:
        dev = root / "host" / "dev"
        dev.mkdir(parents=True)
        for name in SHARED:
            (dev / name).touch()
        board = ViewBoard()
        manager = ResourceManager(board, default_fault_code_table(), PluginMetrics())
        manager.set_chips(chips_with())
        resource_api = ResourceApi(lambda: api)
        kubelet = FakeDraKubelet(root, api=fake.api_client(), node=NODE, services=services)
        await kubelet.start()
        driver = new_driver(root, manager, resource_api, kubelet)
        await driver.load()
        publisher = SlicePublisher(NODE, manager, board, resource_api, period=5.0)
        servers = DraServers(
            driver, kubelet.plugins_dir, kubelet.registry_dir, 4 << 20,
            on_registered=lambda: publisher.kick(verify=True), changes=manager,
        )  # fmt: skip
        await servers.start()
        rig = Rig(root, manager, board, resource_api, kubelet, driver, servers, publisher)
        try:
            await until(lambda: DRIVER in kubelet.plugins, what="the driver to register")
            yield rig
        finally:
            await rig.servers.stop()
            await kubelet.stop()


def put_claim(fake: FakeApiServer, name: str, results: list[dict[str, str]], *pods: JsonObj) -> dra.Claim:
    """A claim allocated with `results` and reserved for `pods` (as the scheduler leaves it), in the apiserver."""
    obj = fake.put_object("resourceclaims", allocated_claim(name, results, *pods))
    return dra.Claim(namespace="default", name=name, uid=obj["metadata"]["uid"])


def claimed(fake: FakeApiServer, claim: str, results: list[dict[str, str]]) -> tuple[JsonObj, dra.Claim]:
    """A pod using one claim, and the claim."""
    pod = pod_using(f"{claim}-pod", [claim])
    return pod, put_claim(fake, claim, results, pod)


def spec_name(claim: dra.Claim) -> str:
    return f"ascend.com-npu_{claim.uid}.yaml"


def ours(device: str, *, pool: str = NODE, driver: str = DRIVER) -> dict[str, str]:
    return {"request": "npu", "driver": driver, "pool": pool, "device": device}


# ---- registration -----------------------------------------------------------------------------


@BOTH_APIS
async def test_the_driver_registers_through_the_plugin_watcher(rig: Rig, services: tuple[str, ...]) -> None:
    plugin = rig.kubelet.plugins[DRIVER]
    # Both are advertised, v1 first: a 1.36 kubelet takes v1, a 1.32 one v1beta1.
    assert plugin.service == ("v1.DRAPlugin" if "v1.DRAPlugin" in services else "v1beta1.DRAPlugin")
    assert list(rig.kubelet.services) == list(services)
    assert plugin.endpoint == str(rig.kubelet.plugins_dir / DRIVER / "dra.sock")
    assert plugin.socket == rig.kubelet.registry_dir / "npu.huawei.com-reg.sock"
    await until(lambda: rig.servers.registration.registered, what="NotifyRegistrationStatus")
    for path in (Path(plugin.endpoint), plugin.socket):
        mode = os.stat(path).st_mode
        assert stat.S_ISSOCK(mode) and stat.S_IMODE(mode) == 0o600, path


@BOTH_APIS
async def test_a_kubelet_restart_finds_the_driver_again(rig: Rig) -> None:
    await rig.kubelet.restart()
    await until(lambda: DRIVER in rig.kubelet.plugins, what="re-registration after a kubelet restart")


# ---- prepare / unprepare ----------------------------------------------------------------------


@BOTH_APIS
async def test_prepare_writes_the_spec_answers_its_id_and_unprepare_removes_it(rig: Rig, fake: FakeApiServer) -> None:
    pod, claim = claimed(fake, "one-chip", [ours("ascend910-3")])
    assert await rig.kubelet.prepare(pod) == {"main": ["ascend.com/npu=3"]}  # what the runtime is handed
    call = rig.kubelet.calls[-1]
    assert call.uids == [claim.uid] and not call.errors
    (device,) = call.devices[claim.uid]
    assert (device.pool_name, device.device_name, list(device.request_names)) == (NODE, "ascend910-3", ["npu"])
    assert list(device.cdi_device_ids) == ["ascend.com/npu=3"]
    spec_file = rig.cdi_root / spec_name(claim)
    spec = json.loads(spec_file.read_text())
    assert spec["kind"] == "ascend.com/npu"
    assert [d["name"] for d in spec["devices"]] == ["3"]
    assert "ASCEND_VISIBLE_DEVICES=3" in spec["containerEdits"]["env"]
    assert [n["path"] for n in spec["containerEdits"]["deviceNodes"]] == [f"/dev/{n}" for n in
                                                                         ("davinci_manager", "hisi_hdc", "devmm_svm",
                                                                          "dvpp_cmdlist")]  # fmt: skip
    await rig.kubelet.unprepare(pod)
    unprepared = rig.kubelet.calls[-1]
    assert (unprepared.method, unprepared.uids, unprepared.errors) == ("NodeUnprepareResources", [claim.uid], {})
    assert rig.specs() == []


@BOTH_APIS
async def test_a_plugin_restart_between_prepare_and_unprepare_loses_nothing(rig: Rig, fake: FakeApiServer) -> None:
    pod, claim = claimed(fake, "survivor", [ours("ascend910-5")])
    assert await rig.kubelet.prepare(pod) == {"main": ["ascend.com/npu=5"]}
    first = rig.kubelet.calls[-1]
    await rig.restart_plugin()
    # Within one kubelet run a prepared claim is not sent again, whatever the plugin did.
    assert await rig.kubelet.prepare(pod) == {"main": ["ascend.com/npu=5"]}
    assert len(rig.kubelet.calls) == 1

    # A kubelet restart keeps the claim (its checkpoint) but not that it was prepared: it is sent again.
    # The answer comes from the driver's checkpoint, not the apiserver, whose claim now names another
    # chip (the manager reads only the drivers from it), and no second entry or file appears. An
    # allocation cannot change in place (the apiserver refuses it): it is taken away, with the
    # reservation that needs it, and given again.
    stored = fake.get_object("resourceclaims", "survivor", "default")
    assert stored is not None
    status = copy.deepcopy(stored["status"])
    status["allocation"]["devices"]["results"][0]["device"] = "ascend910-6"
    fake.modify("resourceclaims", "survivor", "default", mutate=lambda obj: obj.update(status={}))
    fake.modify("resourceclaims", "survivor", "default", mutate=lambda obj: obj.update(status=status))
    await rig.kubelet.restart()
    await until(lambda: DRIVER in rig.kubelet.plugins, what="registration with the restarted kubelet")
    assert await rig.kubelet.prepare(pod) == {"main": ["ascend.com/npu=5"] * 2}  # the manager doubles them
    again = rig.kubelet.calls[-1]
    assert again.uids == [claim.uid]
    assert again.devices == first.devices and not again.errors
    assert rig.specs() == [spec_name(claim)]
    checkpoint = json.loads((rig.state_dir / "checkpoint.json").read_text())
    assert list(checkpoint["v1"]["preparedClaims"]) == [claim.uid]
    await rig.restart_plugin()
    await rig.kubelet.unprepare(pod)
    assert [c.method for c in rig.kubelet.calls] == ["NodePrepareResources"] * 2 + ["NodeUnprepareResources"]
    assert rig.specs() == []
    assert json.loads((rig.state_dir / "checkpoint.json").read_text())["v1"]["preparedClaims"] == {}


async def test_a_lost_spec_is_written_again_on_the_next_prepare(rig: Rig, fake: FakeApiServer) -> None:
    pod, claim = claimed(fake, "lost", [ours("ascend910-1")])
    await rig.kubelet.prepare(pod)
    (rig.cdi_root / spec_name(claim)).unlink()
    await rig.kubelet.restart()  # only a restarted kubelet sends a prepared claim again
    await until(lambda: DRIVER in rig.kubelet.plugins, what="registration with the restarted kubelet")
    await rig.kubelet.prepare(pod)
    assert len(rig.kubelet.calls) == 2 and not rig.kubelet.calls[-1].errors
    assert rig.specs() == [spec_name(claim)]


@BOTH_APIS
@pytest.mark.parametrize(
    ("results", "error"),
    [
        pytest.param([ours("ascend910-3", pool="node-b")], "pool 'node-b'", id="another node's pool"),
        pytest.param([ours("ascend910-42")], "'ascend910-42' is not a chip", id="unknown device"),
    ],
)
async def test_bad_claims_get_their_own_error_and_no_file(
    rig: Rig, fake: FakeApiServer, results: list[dict[str, str]], error: str
) -> None:
    pod = pod_using("mixed", ["bad", "good"])
    bad = put_claim(fake, "bad", results, pod)
    good = put_claim(fake, "good", [ours("ascend910-0")], pod)
    with pytest.raises(DraCallError, match=f"NodePrepareResources failed for claim default/bad: .*{error}"):
        await rig.kubelet.prepare(pod)
    call = rig.kubelet.calls[-1]
    assert call.uids == [bad.uid, good.uid]  # one batch for the driver
    assert error in call.errors[bad.uid]
    assert bad.uid not in call.devices
    assert [d.device_name for d in call.devices[good.uid]] == ["ascend910-0"]  # the batch goes on
    assert rig.specs() == [spec_name(good)]


async def test_a_claim_for_another_driver_never_reaches_ours(rig: Rig, fake: FakeApiServer) -> None:
    pod, claim = claimed(fake, "gpu", [ours("gpu-0", driver="gpu.example.com")])
    with pytest.raises(DraCallError, match=r"failed to get gRPC client for driver gpu\.example\.com"):
        await rig.kubelet.prepare(pod)
    assert [c.driver for c in rig.kubelet.calls] == ["gpu.example.com"]  # the manager batches by the results' driver
    # Were it sent to ours all the same, the driver refuses it on its own, and writes nothing.
    (outcome,) = (await rig.driver.prepare([ClaimRef("default", "gpu", claim.uid)])).values()
    assert "no device of driver" in outcome.error
    assert rig.specs() == []


async def test_a_claim_the_apiserver_does_not_have_is_refused(rig: Rig) -> None:
    with pytest.raises(DraCallError, match="failed to fetch ResourceClaim ghost referenced by pod ghost-pod: 404"):
        await rig.kubelet.prepare(pod_using("ghost-pod", ["ghost"]))
    assert rig.kubelet.calls == []  # the manager read it first
    # The claim may still go between the manager's read and the driver's: the driver's own read refuses it.
    outcomes = await rig.driver.prepare([ClaimRef("default", "ghost", "0000")])
    assert {uid: o.error for uid, o in outcomes.items()} == {"0000": "claim default/ghost: not found"}
    assert rig.specs() == []


@BOTH_APIS
async def test_a_recreated_claim_is_not_prepared_under_the_old_uid(rig: Rig, fake: FakeApiServer) -> None:
    pod = pod_using("recreated-pod", ["recreated"])
    old = put_claim(fake, "recreated", [ours("ascend910-42")], pod)
    with pytest.raises(DraCallError, match="is not a chip"):
        await rig.kubelet.prepare(pod)  # refused: the manager keeps its cache entry, with this uid
    fake.remove("resourceclaims", "recreated", "default")
    new = put_claim(fake, "recreated", [ours("ascend910-2")], pod)
    assert new.uid != old.uid
    with pytest.raises(DraCallError, match="the kubelet asked for"):
        await rig.kubelet.prepare(pod)
    call = rig.kubelet.calls[-1]
    assert call.uids == [old.uid]  # the manager sends its cached uid, not the one it just read
    assert "the kubelet asked for" in call.errors[old.uid]
    assert rig.specs() == []


async def test_unprepare_of_an_unknown_claim_is_no_error(rig: Rig) -> None:
    await rig.kubelet.unprepare(pod_using("x-pod", ["x"]))  # not in the manager's cache: nothing is sent
    assert rig.kubelet.calls == []
    # Asked all the same (the kubelet's checkpoint kept what the driver's lost), the driver answers no error.
    assert await rig.driver.unprepare([ClaimRef("default", "x", "nope")]) == {"nope": Outcome()}


@pytest.mark.parametrize("pb", [dra_v1, dra], ids=["v1", "v1beta1"])
@pytest.mark.parametrize("call", ["NodePrepareResources", "NodeUnprepareResources"])
async def test_a_claim_without_a_uid_refuses_the_call_and_writes_nothing(rig: Rig, call: str, pb: ModuleType) -> None:
    """The kubelet always names a claim's uid; a request without one is refused whole, before the
    driver sees it."""
    plugin = rig.kubelet.plugins[DRIVER]
    stubs = dra_v1_grpc if pb is dra_v1 else dra_grpc
    async with grpc.aio.insecure_channel(f"unix://{plugin.endpoint}") as channel:
        method = getattr(stubs.DRAPluginStub(channel), call)
        request_type = (
            pb.NodePrepareResourcesRequest if call == "NodePrepareResources" else pb.NodeUnprepareResourcesRequest
        )
        with pytest.raises(grpc.aio.AioRpcError) as refused:
            await method(request_type(claims=[pb.Claim(namespace="default", name="no-uid", uid="")]))
    assert refused.value.code() is grpc.StatusCode.INVALID_ARGUMENT
    assert refused.value.details() == "claim default/no-uid has no uid"
    assert rig.specs() == []


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
    assert device_names(written) == [f"ascend910-{p}" for p in range(8)]
    assert not await publisher.sync()  # nothing changed: nothing written

    rig.manager.set_chips(chips_with({3: ChipState.CARD_DROP}))
    assert await publisher.sync()
    faulty = the_slice(fake)
    assert faulty is not None and faulty["spec"]["pool"]["generation"] == 2
    assert "ascend910-3" not in device_names(faulty) and len(device_names(faulty)) == 7

    rig.manager.set_chips(chips_with())
    assert await publisher.sync()
    assert device_names(the_slice(fake)) == [f"ascend910-{p}" for p in range(8)]


async def test_the_slice_loop_drops_a_faulty_chip_within_a_second(rig: Rig, fake: FakeApiServer) -> None:
    publisher = SlicePublisher(NODE, rig.manager, rig.board, rig.resource_api, period=5.0)
    task = asyncio.create_task(publisher.run())
    try:
        await until(lambda: len(device_names(the_slice(fake))) == 8, what="the first slice")
        started = time.perf_counter()
        rig.manager.set_chips(chips_with({3: ChipState.CARD_DROP}))
        await until(lambda: "ascend910-3" not in device_names(the_slice(fake)), what="chip 3 to leave the slice")
        assert time.perf_counter() - started < 1.0  # generous on a loaded machine; the bench holds the 100 ms p99
        rig.manager.set_chips(chips_with())
        await until(lambda: "ascend910-3" in device_names(the_slice(fake)), what="chip 3 to come back")
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


async def test_a_slice_deleted_since_it_was_written_is_created_on_the_next_change(
    rig: Rig, fake: FakeApiServer
) -> None:
    publisher = SlicePublisher(NODE, rig.manager, rig.board, rig.resource_api, period=5.0)
    assert await publisher.sync()
    fake.remove("resourceslices", slice_name(NODE))  # a kubelet's wipe: the replace at our resourceVersion is a 404
    rig.manager.set_chips(chips_with({0: ChipState.UNKNOWN}))
    assert await publisher.sync()
    assert device_names(the_slice(fake)) == [f"ascend910-{p}" for p in range(1, 8)]


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
    owners = ChipOwners()
    owners.set_annotated(held)  # a device-plugin pod's annotation names it
    driver = DraDriver(
        NODE, rig.manager, rig.resource_api, rig.root / "state-both", rig.root / "cdi-both",
        dev_root=rig.root / "host", owners=owners,
    )  # fmt: skip
    await driver.load()
    claim = put_claim(fake, "wants-2", [ours("ascend910-2")], pod_using("p", ["wants-2"]))
    (outcome,) = (await driver.prepare([ClaimRef("default", "wants-2", claim.uid)])).values()
    assert outcome.error == "claim default/wants-2: ascend910-2 is allocated through the device plugin"
    assert not (rig.root / "cdi-both").exists() or not list((rig.root / "cdi-both").iterdir())
    publisher = SlicePublisher(NODE, rig.manager, rig.board, rig.resource_api, period=5.0, withheld=lambda: held)
    assert "ascend910-2" not in [d.name for d in publisher.devices()]
    assert len(publisher.devices()) == 7


async def test_a_prepare_in_progress_holds_its_chip_and_a_failed_one_frees_it(
    rig: Rig, fake: FakeApiServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The chip is reserved before the CDI spec is written: an Allocate arriving meanwhile is refused.
    writing, release = asyncio.Event(), asyncio.Event()

    async def slow_spec(ref: ClaimRef, devices: Any) -> None:
        writing.set()
        await release.wait()
        raise OSError("disk full")

    monkeypatch.setattr(rig.driver, "_write_spec", slow_spec)
    claim = put_claim(fake, "slow", [ours("ascend910-6")], pod_using("p", ["slow"]))
    prepare = asyncio.create_task(rig.driver.prepare([ClaimRef("default", "slow", claim.uid)]))
    await asyncio.wait_for(writing.wait(), 5)
    with pytest.raises(ChipTaken, match=f"Ascend910-6 held by claim uid {claim.uid}"):
        rig.driver.owners.allocate(["Ascend910-6"], time.monotonic())
    assert rig.driver.prepared_devices() == {"Ascend910-6"}  # Unhealthy for the device plugin meanwhile
    release.set()
    (outcome,) = (await prepare).values()
    assert "writing its CDI spec failed: disk full" in outcome.error
    assert rig.driver.prepared_devices() == frozenset()  # the failed Prepare let it go
    rig.driver.owners.allocate(["Ascend910-6"], time.monotonic())


async def test_a_chip_prepared_for_one_claim_is_refused_to_another(rig: Rig, fake: FakeApiServer) -> None:
    first_pod, first = claimed(fake, "first", [ours("ascend910-4")])
    second_pod, second = claimed(fake, "second", [ours("ascend910-4")])
    await rig.kubelet.prepare(first_pod)
    assert not rig.kubelet.calls[-1].errors
    with pytest.raises(DraCallError, match="ascend910-4 is prepared for claim uid"):
        await rig.kubelet.prepare(second_pod)
    assert f"ascend910-4 is prepared for claim uid {first.uid}" in rig.kubelet.calls[-1].errors[second.uid]
    assert rig.specs() == [spec_name(first)]


async def test_a_claim_checkpointed_under_the_previous_releases_name_is_ours(rig: Rig, fake: FakeApiServer) -> None:
    # The previous release checkpointed a 910's device under the chip's name, `Ascend910-5`; the
    # plugin restarts as the new release with that checkpoint and the claim's spec in place.
    pod, claim = claimed(fake, "upgraded", [ours("ascend910-5")])
    await rig.kubelet.prepare(pod)
    old = PreparedDevice(["npu"], NODE, "Ascend910-5", ["ascend.com/npu=5"])
    Checkpoint(rig.state_dir).save({claim.uid: [old]})
    await rig.restart_plugin()
    assert rig.specs() == [spec_name(claim)]  # the spec has its claim: not removed as an orphan
    assert rig.driver.prepared_devices() == {"Ascend910-5"}  # held against the device plugin still
    other_pod, _ = claimed(fake, "other", [ours("ascend910-5")])
    with pytest.raises(DraCallError, match=f"ascend910-5 is prepared for claim uid {claim.uid}"):
        await rig.kubelet.prepare(other_pod)

    # A kubelet restart sends Prepare again, its spec lost meanwhile: the answer and the spec come
    # from the checkpoint, under the new name.
    (rig.cdi_root / spec_name(claim)).unlink()
    await rig.kubelet.restart()
    await until(lambda: DRIVER in rig.kubelet.plugins, what="registration with the restarted kubelet")
    assert await rig.kubelet.prepare(pod) == {"main": ["ascend.com/npu=5"] * 2}
    assert [d.device_name for d in rig.kubelet.calls[-1].devices[claim.uid]] == ["ascend910-5"]
    assert rig.specs() == [spec_name(claim)]
    await rig.kubelet.unprepare(pod)
    assert rig.specs() == []
    assert rig.driver.prepared_devices() == frozenset()


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
        await until(lambda: rig.kubelet.wipes, what="the first kubelet's start wipe")
        await rig.kubelet.restart()  # wipes the node's slices, then registers the driver again
        assert the_slice(fake) is None or rig.kubelet.plugins  # wiped before (or as) the driver came back
        await until(lambda: len(rig.kubelet.wipes) == 2, what="the restarted kubelet's wipe")
        await until(lambda: len(device_names(the_slice(fake))) == 8, timeout=3, what="the slice written again")
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


async def test_a_wipe_that_lands_after_the_driver_rewrote_its_slice_is_repaired(rig: Rig, fake: FakeApiServer) -> None:
    """The kubelet's wipes are background DeleteCollections retried with a 1 s doubling backoff, ordered
    against nothing: one may land after the driver registered again and read its slice back (a slow
    apiserver, the Node not yet found). The driver must end with its slice, soon."""
    task = asyncio.create_task(rig.publisher.run())
    try:
        await until(lambda: len(device_names(the_slice(fake))) == 8, what="the first slice")
        await until(lambda: rig.kubelet.wipes, what="the first kubelet's start wipe")
        rig.kubelet.wipe_delay = 0.5
        mark = len(fake.requests)
        await rig.kubelet.restart()
        await until(lambda: len(rig.kubelet.wipes) == 2, timeout=5, what="the late wipe")
        wiped_at = time.perf_counter()
        requests = fake.requests[mark:]
        wipe = next(i for i, r in enumerate(requests) if r.method == "DELETE")
        read_back = [
            i for i, r in enumerate(requests[:wipe]) if r.method == "GET" and r.path.endswith(slice_name(NODE))
        ]
        assert read_back, "the wipe landed after the registered driver's read-back"
        await until(lambda: len(device_names(the_slice(fake))) == 8, timeout=10, what="the slice written again")
        assert time.perf_counter() - wiped_at < 3.0, "repaired by the read-backs after a registration"
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


async def test_a_spec_left_by_an_unfinished_prepare_is_removed_at_start(rig: Rig, fake: FakeApiServer) -> None:
    pod, kept = claimed(fake, "kept", [ours("ascend910-6")])
    await rig.kubelet.prepare(pod)
    orphan = rig.cdi_root / "ascend.com-npu_dead-beef.yaml"
    orphan.write_text("{}")  # as if the process died between the spec and the checkpoint
    other_vendor = rig.cdi_root / "nvidia.com-gpu_x.yaml"
    other_vendor.write_text("{}")
    await rig.restart_plugin()
    assert rig.specs() == sorted([f"ascend.com-npu_{kept.uid}.yaml", "nvidia.com-gpu_x.yaml"])


# ---- the health stream (dra-health/v1alpha1) ----------------------------------------------------


def verdict_for(rig: Rig, phy: int, ok: bool) -> dict[str, ChipVerdict]:
    chip = next(c for c in rig.manager.inventory.reported.values() if c.phy_id == phy)
    level = FaultLevel.NORMAL_NPU if ok else FaultLevel.SEPARATE_NPU
    verdict = ChipVerdict(
        chip=chip.name, logic_id=chip.logic_id, phy_id=phy, fault_level=level, schedulable=ok,
        reason=VerdictReason.NORMAL if ok else VerdictReason.FAULT_CODE, since=0.0,
        codes=[] if ok else ["80E01801"],
    )  # fmt: skip
    return {chip.name: verdict}


@BOTH_APIS
async def test_the_health_stream_follows_a_prepared_chip_through_a_fault(rig: Rig, fake: FakeApiServer) -> None:
    kubelet = rig.kubelet
    await until(lambda: rig.servers.health.streams == 1, what="the kubelet's health stream")
    assert kubelet.health_messages[0].devices == {}  # the current state first: nothing prepared yet
    pod, _ = claimed(fake, "watched", [ours("ascend910-3")])
    await kubelet.prepare(pod)
    seen = await kubelet.wait_health(DRIVER, NODE, "ascend910-3", "Healthy")
    assert list(seen.devices) == [(NODE, "ascend910-3")]  # prepared devices only, never the other seven
    assert seen.devices[(NODE, "ascend910-3")].timeout_s == 30.0

    mark = len(kubelet.health_messages)
    rig.manager.set_verdicts(verdict_for(rig, 3, ok=False), connected=True)
    await kubelet.wait_health(DRIVER, NODE, "ascend910-3", "Unhealthy", after=mark)
    health, message = kubelet.device_health(DRIVER, NODE, "ascend910-3")  # what allocatedResourcesStatus shows
    assert health == "Unhealthy"
    assert "SeparateNPU" in message and "80E01801" in message

    mark = len(kubelet.health_messages)
    rig.manager.set_verdicts(verdict_for(rig, 3, ok=True), connected=True)
    await kubelet.wait_health(DRIVER, NODE, "ascend910-3", "Healthy", after=mark)

    mark = len(kubelet.health_messages)
    rig.manager.set_exporter_lost(True)
    await kubelet.wait_health(DRIVER, NODE, "ascend910-3", "Unknown", after=mark)
    assert "exporter is unreachable" in kubelet.device_health(DRIVER, NODE, "ascend910-3")[1]
    rig.manager.set_exporter_lost(False)

    await kubelet.unprepare(pod)
    await until(lambda: kubelet.health_messages[-1].devices == {}, what="the unprepared chip out of the list")


@BOTH_APIS
async def test_a_restarted_kubelet_gets_the_current_health_first(rig: Rig, fake: FakeApiServer) -> None:
    pod, _ = claimed(fake, "faulty", [ours("ascend910-5")])
    await rig.kubelet.prepare(pod)
    rig.manager.set_chips(chips_with({5: ChipState.CARD_DROP}))
    await rig.kubelet.wait_health(DRIVER, NODE, "ascend910-5", "Unhealthy")
    mark = len(rig.kubelet.health_messages)
    await rig.kubelet.restart()
    await until(lambda: DRIVER in rig.kubelet.plugins, what="registration with the restarted kubelet")
    first = await rig.kubelet.wait_health(DRIVER, NODE, "ascend910-5", "Unhealthy", after=mark)
    assert rig.kubelet.health_messages[mark] is first  # its stream's first message, with no change in between
    assert rig.kubelet.health_errors == []  # neither kubelet's stream was ever refused


async def test_a_restarted_plugin_streams_the_claims_its_checkpoint_kept(rig: Rig, fake: FakeApiServer) -> None:
    rig.kubelet.health_retry = 0.05
    pod, _ = claimed(fake, "kept", [ours("ascend910-2")])
    await rig.kubelet.prepare(pod)
    rig.manager.set_chips(chips_with({2: ChipState.CARD_DROP}))
    await rig.kubelet.wait_health(DRIVER, NODE, "ascend910-2", "Unhealthy")
    mark = len(rig.kubelet.health_messages)
    await rig.restart_plugin()
    # The new process knows the claim from its checkpoint alone: no Prepare was sent to it.
    await rig.kubelet.wait_health(DRIVER, NODE, "ascend910-2", "Unhealthy", after=mark)
    assert [c.method for c in rig.kubelet.calls] == ["NodePrepareResources"]
