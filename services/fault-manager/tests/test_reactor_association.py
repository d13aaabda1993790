"""The HBM / AI-core association in the reactor: what the verdicts and the device-info ConfigMap's
`-Fault` list show, with injected time; the raw events stay in the store; a restart decides the same."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from ascend_common.clock import ManualClock
from ascend_common.schemas.exporter import ChipList
from fault_manager.events.fault_events import FaultEvents
from fault_manager.policy.engine import FaultEngine
from fault_manager.policy.keeper import build
from fault_manager.publishing.reports import device_info
from fault_manager.reactor.inputs import Inbox, Snapshot
from fault_manager.reactor.published import NodeState, Published
from fault_manager.reactor.reactor import Reactor
from fault_manager.reactor.verdicts import VerdictBoard
from fault_manager.store import FaultEventRow, Store

from tests.support.chips import exporter_chip

HBM, AIV = "80E01801", "80CB8009"
# The reference associates only while 80E01801 has a FaultDuration rule (none in the packaged file).
WITH_RULE = {
    "faultCustomization.json": json.dumps(
        {"FaultDuration": [{"EventId": [HBM], "FaultTimeout": 0, "RecoverTimeout": 0, "FaultHandling": "SeparateNPU"}]}
    )
}


class ListSink:
    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = []

    async def emit(self, event: dict[str, Any]) -> None:
        self.events.append(event)


@dataclass
class Node:
    reactor: Reactor
    inbox: Inbox
    published: Published
    clock: ManualClock
    store: Store
    sink: ListSink
    task: asyncio.Task[None]

    async def settle(self) -> None:
        """Let the reactor take every input and what fell due at the clock's time (an asked no-op)."""
        await self.inbox.set_resetting((), False)

    def codes(self, logic: int) -> list[str]:
        return self.published.verdicts()[f"Ascend910-{logic}"].codes

    def fault_list(self) -> dict[str, list[str]]:
        out: dict[str, list[str]] = {}
        cfg = json.loads(device_info(self.published.state).render(0)["DeviceInfoCfg"])
        for f in json.loads(cfg["DeviceInfo"]["DeviceList"]["huawei.com/Ascend910-Fault"]):
            out.setdefault(f["npu_name"], []).append(f["fault_code"])
        return out

    async def stop(self) -> None:
        self.task.cancel()
        await asyncio.wait([self.task])


async def start(db: Path, clock: ManualClock, files: dict[str, str], *, listing: bool = True) -> Node:
    store = Store(db)
    engine = FaultEngine(build(files))
    inbox = Inbox()
    published = Published(VerdictBoard(), NodeState(engine.policy))
    sink = ListSink()
    events = FaultEvents(sink, "node-a", clock.now, pod="fm-0", fault_format="reference")
    reactor = Reactor(engine, store, inbox, published, clock, events, "mindx-dl-deviceinfo-node-a")
    await reactor.start()
    task = asyncio.create_task(reactor.run())
    node = Node(reactor, inbox, published, clock, store, sink, task)
    if listing:
        inbox.put(Snapshot(ChipList(last_event_id=None, chips=[exporter_chip(i, i) for i in range(4)]), None))
    await node.settle()
    return node


_seq = iter(range(1, 1_000_000))


def arrive(node: Node, logic: int, code: str, raised: float) -> None:
    """The exporter's event of `code` on chip `logic`, raised at `raised` (s), arriving now."""
    node.inbox.put(
        FaultEventRow(
            event_id=f"run-a-{next(_seq)}", chip=f"Ascend910-{logic}", logic_id=logic, phy_id=logic, code=code,
            assertion="occur", severity=2, source="subscription", raised_at_ms=int(raised * 1000),
            recorded_at_ms=int(node.clock.now() * 1000),
        )
    )  # fmt: skip


@pytest.fixture
async def node(tmp_path: Path) -> AsyncIterator[Node]:
    n = await start(tmp_path / "fm.db", ManualClock(), WITH_RULE)
    try:
        yield n
    finally:
        await n.stop()
        n.store.close()


async def test_an_aicore_echo_of_an_hbm_fault_is_dropped_and_a_lone_one_is_published_5s_late(node: Node) -> None:
    t = node.clock.now()
    arrive(node, 1, HBM, t)
    arrive(node, 2, AIV, t)  # alone
    node.clock.advance(3)
    arrive(node, 1, AIV, t + 3)  # 3 s after the chip's 80E01801
    await node.settle()
    assert (node.codes(1), node.codes(2)) == ([HBM], [])
    node.clock.advance(2)  # t+5: the lone one is exactly 5 s old, not more
    await node.settle()
    assert node.codes(2) == []
    node.clock.advance(0.001)
    await node.settle()
    assert (node.codes(1), node.codes(2)) == ([HBM], [AIV])
    assert node.fault_list() == {"Ascend910-1": [HBM], "Ascend910-2": [AIV]}
    node.clock.advance(10)
    await node.settle()
    assert node.codes(1) == [HBM], "the dropped echo never comes back"
    # The store keeps every event the exporter sent, for audit and history.
    stored = [(r.chip, r.code) for c in ("Ascend910-1", "Ascend910-2") for r in node.store.events.of_chip(c)]
    assert stored == [("Ascend910-1", HBM), ("Ascend910-1", AIV), ("Ascend910-2", AIV)]
    # The reference writes an Event for every event the chip reported, the dropped echo's too.
    events = node.reactor.events
    assert events is not None and events.pending == 3 and node.sink.events == []  # queued, no sender started here
    await events.flush()
    assert sorted(e["message"].split("faultCodes:")[1].split(",")[0] for e in node.sink.events) == [AIV, AIV, HBM]


async def test_the_reactor_wakes_by_itself_when_a_held_event_falls_due(tmp_path: Path) -> None:
    """No input after the event: the reactor's own timer reports it (real time here, 5 s at most)."""
    clock = ManualClock(wall=time.time())
    node = await start(tmp_path / "fm.db", clock, WITH_RULE)
    try:
        arrive(node, 2, AIV, clock.now())
        await node.settle()
        assert node.reactor._idle_for() == pytest.approx(5.002, abs=0.01)
    finally:
        await node.stop()
        node.store.close()


async def test_without_the_80e01801_duration_rule_nothing_is_associated(tmp_path: Path) -> None:
    node = await start(tmp_path / "fm.db", ManualClock(), {})
    try:
        t = node.clock.now()
        arrive(node, 1, HBM, t)
        arrive(node, 1, AIV, t + 1)
        await node.settle()
        assert sorted(node.codes(1)) == sorted([HBM, AIV])
    finally:
        await node.stop()
        node.store.close()


async def test_a_restart_decides_the_same_and_keeps_holding_what_was_held(tmp_path: Path) -> None:
    clock = ManualClock()
    node = await start(tmp_path / "fm.db", clock, WITH_RULE)
    t = clock.now()
    arrive(node, 1, HBM, t)
    arrive(node, 1, AIV, t + 1)
    arrive(node, 2, AIV, t)
    clock.advance(6)
    arrive(node, 3, AIV, t + 6)
    await node.settle()
    assert (node.codes(1), node.codes(2), node.codes(3)) == ([HBM], [AIV], [])
    await node.stop()
    node.store.close()

    clock.advance(1)  # down for a second: chip 3's event is 1 s old, still held
    node = await start(tmp_path / "fm.db", clock, WITH_RULE, listing=False)
    try:
        assert (node.codes(1), node.codes(2), node.codes(3)) == ([HBM], [AIV], [])
        clock.advance(4.001)
        await node.settle()
        assert node.codes(3) == [AIV]
        assert node.codes(1) == [HBM]
    finally:
        await node.stop()
        node.store.close()
