"""The fault-manager's reactor under test, for the unit tests that drive it through its Inbox."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from ascend_common.clock import ManualClock
from ascend_common.faults import default_fault_code_table, default_fault_customization, default_switch_fault_table
from fault_manager.policy.engine import FaultEngine, Policy
from fault_manager.reactor.inputs import Inbox
from fault_manager.reactor.published import NodeState, Published
from fault_manager.reactor.reactor import Reactor
from fault_manager.reactor.verdicts import VerdictBoard
from fault_manager.store import Store


@contextlib.asynccontextmanager
async def running_reactor(tmp_path: Path, **options: Any) -> AsyncIterator[tuple[Reactor, Inbox, Published]]:
    """A started reactor over the packaged policy, a fresh store and a manual clock, running until
    the block ends; `options` are the Reactor's keyword arguments (a rule switched on)."""
    store = Store(tmp_path / "fm.db")
    engine = FaultEngine(
        Policy(default_fault_code_table(), default_fault_customization(), default_switch_fault_table())
    )
    inbox = Inbox()
    published = Published(VerdictBoard(), NodeState(engine.policy))
    reactor = Reactor(engine, store, inbox, published, ManualClock(), None, "mindx-dl-deviceinfo-node-a", **options)
    await reactor.start()
    task = asyncio.create_task(reactor.run())
    try:
        yield reactor, inbox, published
    finally:
        task.cancel()
        await asyncio.wait([task])
        store.close()
