"""Device taints on the node's ResourceSlice (issue 33 item 6), against the fake API server as
each Kubernetes release behaves: 1.36 keeps a device's taints (DRADeviceTaints beta, on), 1.32
has no such field and 1.33 to 1.35 drop it with the gate off (its alpha default), silently.

The publisher learns which with a dry run of its first tainted write; where taints are kept a
faulty chip stays in the slice, tainted, and loses the taint when it recovers; where they are not,
it leaves the slice as before, and is never offered untainted in between.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from ascend_common.adapters.kube.config import build_api_client
from ascend_common.faults import default_fault_code_table
from ascend_common.schemas.exporter import Chip, ChipState
from ascend_device_plugin.dra.resource_api import ResourceApi
from ascend_device_plugin.dra.slice_devices import slice_name
from ascend_device_plugin.dra.slices import SlicePublisher
from ascend_device_plugin.inventory.views import ViewBoard
from ascend_device_plugin.metrics import PluginMetrics
from ascend_device_plugin.resources.manager import ResourceManager

from tests.support.chips import node_910b
from tests.support.fake_apiserver import FakeApiServer

NODE = "node-a"
UNHEALTHY = "npu.huawei.com/unhealthy"


def chips_with(state: dict[int, ChipState] | None = None) -> dict[int, Chip]:
    chips = node_910b()
    for phy, chip_state in (state or {}).items():
        logic = next(lg for lg, c in chips.items() if c.phy_id == phy)
        chips[logic] = chips[logic].model_copy(update={"state": chip_state})
    return chips


@dataclass
class Node:
    fake: FakeApiServer
    manager: ResourceManager
    publisher: SlicePublisher

    def devices(self) -> dict[str, list[dict[str, Any]]]:
        """The stored slice's devices: name -> taints (v1's, or v1beta1's under `basic`)."""
        obj = self.fake.get_object("resourceslices", slice_name(NODE)) or {}
        out = {}
        for d in obj.get("spec", {}).get("devices", []):
            out[d["name"]] = list(d.get("basic", d).get("taints") or [])
        return out

    def slice_writes(self, *, dry_run: bool) -> list[Any]:
        return [r for r in self.fake.requests if "/resourceslices" in r.path and r.method in ("POST", "PUT")
                and (r.query.get("dryRun") == "All") == dry_run]  # fmt: skip


@pytest.fixture(params=[(("v1", "v1beta1"), None)], ids=["1.36"])
def server(request: pytest.FixtureRequest) -> Iterator[FakeApiServer]:
    versions, taints = request.param
    with FakeApiServer(resource_api_versions=versions, device_taints=taints) as fake:
        yield fake


async def make_node(fake: FakeApiServer, noexecute: tuple[str, ...] = ()) -> AsyncIterator[Node]:
    client = await build_api_client(url=fake.url)
    try:
        board = ViewBoard()
        manager = ResourceManager(board, default_fault_code_table(), PluginMetrics())
        manager.set_chips(chips_with())
        publisher = SlicePublisher(
            NODE, manager, board, ResourceApi(lambda: client), period=5.0, noexecute_levels=noexecute
        )
        yield Node(fake, manager, publisher)
    finally:
        await client.close()  # type: ignore[no-untyped-call]


@pytest.fixture
async def node(server: FakeApiServer) -> AsyncIterator[Node]:
    async for n in make_node(server):
        yield n


async def test_on_1_36_a_faulty_chip_stays_tainted_and_loses_the_taint_on_recovery(node: Node) -> None:
    assert await node.publisher.sync()
    assert node.publisher.taints_served is None  # nothing tainted yet: nothing asked
    node.manager.set_chips(chips_with({3: ChipState.CARD_DROP}))
    assert await node.publisher.sync()
    assert node.publisher.taints_served is True
    devices = node.devices()
    assert len(devices) == 8  # visible, not gone
    (taint,) = devices["ascend910-3"]
    added = taint.pop("timeAdded")
    assert taint == {"key": UNHEALTHY, "value": "card_drop", "effect": "NoSchedule"}
    assert all(not t for name, t in devices.items() if name != "ascend910-3")
    assert len(node.slice_writes(dry_run=True)) == 1

    # Another chip fails: chip 3's taint keeps the time it was added (eviction counts from it).
    node.manager.set_chips(chips_with({3: ChipState.CARD_DROP, 5: ChipState.UNKNOWN}))
    assert await node.publisher.sync()
    devices = node.devices()
    assert devices["ascend910-3"][0]["timeAdded"] == added
    assert devices["ascend910-5"][0]["value"] == "unknown"
    assert len(node.slice_writes(dry_run=True)) == 1  # asked once

    node.manager.set_chips(chips_with())
    assert await node.publisher.sync()
    assert node.devices() == {f"ascend910-{p}": [] for p in range(8)}


async def test_noexecute_only_for_the_levels_the_operator_lists(server: FakeApiServer) -> None:
    async for node in make_node(server, noexecute=("card_drop",)):
        await node.publisher.sync()
        node.manager.set_chips(chips_with({3: ChipState.CARD_DROP, 5: ChipState.UNKNOWN}))
        assert await node.publisher.sync()
        devices = node.devices()
        assert devices["ascend910-3"][0]["effect"] == "NoExecute"
        assert devices["ascend910-5"][0]["effect"] == "NoSchedule"


@pytest.mark.parametrize(
    "server",
    [(("v1beta1",), None), (("v1", "v1beta1"), False)],
    ids=["1.32: no taints field", "1.34/1.35: DRADeviceTaints off"],
    indirect=True,
)
async def test_where_taints_are_dropped_a_faulty_chip_leaves_and_is_never_offered_untainted(node: Node) -> None:
    assert await node.publisher.sync()
    node.manager.set_chips(chips_with({3: ChipState.CARD_DROP}))
    assert await node.publisher.sync()
    assert node.publisher.taints_served is False
    assert sorted(node.devices()) == [f"ascend910-{p}" for p in range(8) if p != 3]
    writes = node.slice_writes(dry_run=False)
    assert len(writes) == 2  # the first slice, then the one without chip 3: no generation offered it untainted
    assert "ascend910-3" not in str(writes[-1].body)

    # Not asked again on the next fault; asked again after a registration (a kubelet restart, an upgrade).
    node.manager.set_chips(chips_with({3: ChipState.CARD_DROP, 4: ChipState.CARD_DROP}))
    assert await node.publisher.sync()
    assert len(node.slice_writes(dry_run=True)) == 1
    assert sorted(node.devices()) == [f"ascend910-{p}" for p in (0, 1, 2, 5, 6, 7)]
    node.fake.device_taints = True  # the apiserver was upgraded to 1.36 meanwhile
    node.publisher.kick(verify=True)
    assert await node.publisher.sync()
    assert node.publisher.taints_served is True
    assert [t["value"] for t in node.devices()["ascend910-4"]] == ["card_drop"]
    node.manager.set_chips(chips_with())
    assert await node.publisher.sync()
    assert node.devices() == {f"ascend910-{p}": [] for p in range(8)}


async def test_a_taint_follows_the_fault_level_while_the_chip_stays_unhealthy(server: FakeApiServer) -> None:
    async for node in make_node(server, noexecute=("card_drop",)):
        await node.publisher.sync()
        node.manager.set_chips(chips_with({3: ChipState.UNKNOWN}))
        assert await node.publisher.sync()
        assert [(t["value"], t["effect"]) for t in node.devices()["ascend910-3"]] == [("unknown", "NoSchedule")]
        node.manager.set_chips(chips_with({3: ChipState.CARD_DROP}))  # still Unhealthy, now a listed level
        assert await node.publisher.sync()
        assert [(t["value"], t["effect"]) for t in node.devices()["ascend910-3"]] == [("card_drop", "NoExecute")]


async def test_a_gate_turned_off_under_a_tainted_slice_is_noticed_at_the_next_registration(node: Node) -> None:
    """The apiserver restarts with DRADeviceTaints off while chip 3 is tainted. An update of our
    slice would still keep taints (the stored slice uses them), though the scheduler now ignores
    them: the probe is a dry-run create under a generated name, which the stored slice cannot sway,
    so chip 3 leaves the slice instead of staying offered with a taint nobody reads."""
    await node.publisher.sync()
    node.manager.set_chips(chips_with({3: ChipState.CARD_DROP}))
    assert await node.publisher.sync()
    assert node.publisher.taints_served is True and node.devices()["ascend910-3"]
    node.fake.device_taints = False
    node.publisher.kick(verify=True)  # the kubelet registered us again
    assert await node.publisher.sync()
    assert node.publisher.taints_served is False
    assert sorted(node.devices()) == [f"ascend910-{p}" for p in range(8) if p != 3]
    assert all(not taints for taints in node.devices().values())
    probes = node.slice_writes(dry_run=True)
    assert [(p.method, p.body["metadata"].get("name"), p.body["metadata"]["generateName"]) for p in probes] == [
        ("POST", None, f"{slice_name(NODE)}-probe-")
    ] * 2
    assert [r.path for r in node.fake.requests if r.method == "POST" and "dryRun" not in r.query].count(
        "/apis/resource.k8s.io/v1/resourceslices"
    ) == 1  # no probe was stored: only the first write created anything
    assert len(node.fake.objects("resourceslices")) == 1
