"""The exporter in the test's own process, for unit tests that drive one of its tasks by hand."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

from ascend_common.clock import SystemClock
from ascend_common.tokens import TokenTable
from dcmi_exporter.backends.base import Backend
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
