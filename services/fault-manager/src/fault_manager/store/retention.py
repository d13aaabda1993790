"""Bounded history: old fault events, released escalations and finished reset attempts are pruned."""

from __future__ import annotations

import time
from dataclasses import dataclass

from sqlalchemy import delete, select, tuple_

from .database import Database
from .models import EscalationRow, StoredFaultEvent, StoredResetAttempt, columns_of


@dataclass(frozen=True, slots=True)
class PruneResult:
    events: int = 0
    escalations: int = 0
    reset_attempts: int = 0
    complete: bool = True  # False: the time budget ran out; call prune again later


_E = columns_of(StoredFaultEvent)
_X = columns_of(EscalationRow)
_R = columns_of(StoredResetAttempt)

# A chip list straight from the (chip, ...) index: one seek per distinct chip instead of a scan of
# every event (SQLite has no skip-scan without ANALYZE statistics).
_DISTINCT_EVENT_CHIPS = """
    WITH RECURSIVE c(chip) AS (
        SELECT MIN(chip) FROM fault_events
        UNION ALL
        SELECT (SELECT MIN(chip) FROM fault_events WHERE chip > c.chip) FROM c WHERE c.chip IS NOT NULL
    )
    SELECT chip FROM c WHERE chip IS NOT NULL"""


class Retention:
    def __init__(self, db: Database) -> None:
        self._db = db

    def prune(
        self,
        older_than_ms: int,
        keep_min_per_chip: int = 1000,
        *,
        batch_size: int = 1000,
        time_budget_s: float | None = None,
    ) -> PruneResult:
        """Delete history older than `older_than_ms` in short transactions, oldest first.

        Events: each chip keeps at least its newest `keep_min_per_chip`. Escalations: only released
        ones go; active escalations are never pruned. Reset attempts: finished ones (with their
        chips). Reset token buckets are kept: one row per chip, and they are state, not history. Each batch
        commits on its own so appends interleave (a batch of 1,000 events held the write lock for
        10-25 ms on a 1,000,000-event file here); with a `time_budget_s` the call stops early and
        reports `complete=False` (call again later). Manual isolation audit and policy versions are
        kept: they are rare and are the audit trail.
        """
        if batch_size < 1 or keep_min_per_chip < 0:
            raise ValueError("batch_size must be >= 1 and keep_min_per_chip >= 0")
        deadline = None if time_budget_s is None else time.monotonic() + time_budget_s
        counts = {"events": 0, "escalations": 0, "reset_attempts": 0}

        def out_of_time() -> bool:
            return deadline is not None and time.monotonic() >= deadline

        raised, row_id, chip_col = _E.raised_at_ms, _E.id, _E.chip
        with self._db.read("listing chips to prune") as conn:
            chips = [row.chip for row in conn.exec_driver_sql(_DISTINCT_EVENT_CHIPS)]
        for chip in chips:
            with self._db.read("finding the prune boundary") as conn:
                boundary = None
                if keep_min_per_chip > 0:
                    boundary = conn.execute(
                        select(raised, row_id)
                        .where(chip_col == chip)
                        .order_by(raised.desc(), row_id.desc())
                        .offset(keep_min_per_chip - 1)
                        .limit(1)
                    ).first()
                    if boundary is None:
                        continue  # fewer events than the minimum kept
            victims = select(row_id).where(chip_col == chip, raised < older_than_ms)
            if boundary is not None:
                victims = victims.where(tuple_(raised, row_id) < tuple_(boundary.raised_at_ms, boundary.id))
            victims = victims.order_by(raised, row_id).limit(batch_size)
            while True:
                if out_of_time():
                    return PruneResult(**counts, complete=False)
                with self._db.write("pruning events") as conn:
                    deleted = int(conn.execute(delete(StoredFaultEvent).where(row_id.in_(victims))).rowcount)
                counts["events"] += deleted
                if deleted < batch_size:
                    break
        if out_of_time():
            return PruneResult(**counts, complete=False)
        with self._db.write("pruning escalations and resets") as conn:
            counts["escalations"] = int(
                conn.execute(
                    delete(EscalationRow).where(_X.released_at_ms.is_not(None), _X.released_at_ms < older_than_ms)
                ).rowcount
            )
            counts["reset_attempts"] = int(
                conn.execute(
                    delete(StoredResetAttempt).where(_R.finished_ms.is_not(None), _R.finished_ms < older_than_ms)
                ).rowcount
            )
        return PruneResult(**counts, complete=True)
