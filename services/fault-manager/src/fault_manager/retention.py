"""Bounded history: old fault events pruned hourly, a second at a time (the store keeps what is still needed)."""

from __future__ import annotations

import asyncio
import logging

from ascend_common.clock import Clock

from fault_manager.store import Store, in_store_thread

log = logging.getLogger(__name__)
PRUNE_PERIOD_S = 3600.0


async def prune_forever(store: Store, clock: Clock, retention_s: float) -> None:
    while True:
        await asyncio.sleep(PRUNE_PERIOD_S)
        cutoff = int((clock.now() - retention_s) * 1000)
        try:
            result = await in_store_thread(store.retention.prune, cutoff, time_budget_s=1.0)
            log.info("pruned old fault events", extra={"result": str(result)})
        except Exception as exc:  # retention is housekeeping: report and try again later
            log.warning("pruning failed", extra={"error": str(exc)})
