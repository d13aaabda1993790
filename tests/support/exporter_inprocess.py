"""The exporter in the test's own process, for unit tests that drive one of its tasks by hand."""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import AsyncIterator

from ascend_common.chips import ChipAddress
from ascend_common.clock import SystemClock
from ascend_common.tokens import TokenTable
from dcmi_exporter.backends.base import Backend
from dcmi_exporter.backends.sim import SimBackend
from dcmi_exporter.runtime import Exporter
from dcmi_exporter.settings import ExporterSettings


@contextlib.asynccontextmanager
async def ready_exporter(settings: ExporterSettings, backend: Backend) -> AsyncIterator[Exporter]:
    """Started, every chip read once (its node `ready`), stopped when the block ends."""
    exp = Exporter(settings, backend, SystemClock(), TokenTable())
    await exp.start()
    try:
        while not exp.poller.snapshot.node.ready:
            await asyncio.sleep(0.02)
        yield exp
    finally:
        await exp.stop()


class GatedSim(SimBackend):
    """The simulator (910b-8) whose discovery waits until the test sets `gate`: until then the node
    is not read, however loaded the machine is or is not. `chipless`: it then finds no chip."""

    def __init__(self, gate: threading.Event, *, chipless: bool = False) -> None:
        super().__init__("910b-8", clock=SystemClock())
        self.gate = gate
        self.chipless = chipless

    def discover(self) -> list[ChipAddress]:
        self.gate.wait(30)
        return [] if self.chipless else super().discover()
