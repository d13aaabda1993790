"""The reactor under test, shared by the modules that drive it through its Inbox."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from ascend_common.clock import ManualClock
from ascend_common.faults import default_fault_code_table, default_fault_customization, default_switch_fault_table
from fault_manager.policy.engine import FaultEngine, Policy
from fault_manager.reactor.inputs import Inbox
from fault_manager.reactor.published import NodeState, Published
from fault_manager.reactor.reactor import Reactor
from fault_manager.reactor.verdicts import VerdictBoard
from fault_manager.store import Store


@pytest.fixture
def reactor_options() -> dict[str, Any]:
    """Keyword arguments of the Reactor under test; a module overrides this to switch a rule on."""
    return {}


@pytest.fixture
async def running(tmp_path: Path, reactor_options: dict[str, Any]) -> AsyncIterator[tuple[Reactor, Inbox, Published]]:
    """A started reactor over the packaged policy, a fresh store and a manual clock, running."""
    store = Store(tmp_path / "fm.db")
    engine = FaultEngine(
        Policy(default_fault_code_table(), default_fault_customization(), default_switch_fault_table())
    )
    inbox = Inbox()
    published = Published(VerdictBoard(), NodeState(engine.policy))
    reactor = Reactor(
        engine, store, inbox, published, ManualClock(), None, "mindx-dl-deviceinfo-node-a", **reactor_options
    )
    await reactor.start()
    task = asyncio.create_task(reactor.run())
    try:
        yield reactor, inbox, published
    finally:
        task.cancel()
        await asyncio.wait([task])
        store.close()
