"""Hot-reset attempts of reset groups, with their chips: started, finished, or refused before they started."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import Connection, insert, update
from sqlmodel import select

from .database import Database, detached
from .models import RESET_OUTCOMES, ResetAttemptChipRow, ResetAttemptRow, StoredResetAttempt, columns_of

_R = columns_of(StoredResetAttempt)
_C = columns_of(ResetAttemptChipRow)


def _insert(
    conn: Connection,
    group: str,
    chips: Sequence[str],
    channel: str,
    started_ms: int,
    *,
    reason: str | None,
    outcome: str | None = None,
    finished_ms: int | None = None,
) -> int:
    result = conn.execute(
        insert(StoredResetAttempt),
        {
            "group_name": group,
            "channel": channel,
            "started_ms": int(started_ms),
            "outcome": outcome,
            "finished_ms": finished_ms,
            "reason": reason,
        },
    )
    attempt_id = result.inserted_primary_key
    assert attempt_id is not None
    new_id = int(attempt_id.id)
    unique_chips = sorted(set(chips))
    if unique_chips:
        conn.execute(insert(ResetAttemptChipRow), [{"attempt_id": new_id, "chip": c} for c in unique_chips])
    return new_id


class ResetAttempts:
    def __init__(self, db: Database) -> None:
        self._db = db

    def record(
        self, group: str, chips: Sequence[str], channel: str, started_ms: int, *, reason: str | None = None
    ) -> int:
        """Record a reset attempt starting at `started_ms`; `finish` says how it ended."""
        with self._db.write("recording a reset attempt") as conn:
            return _insert(conn, group, chips, channel, started_ms, reason=reason)

    def finish(
        self,
        attempt_id: int,
        outcome: str,
        error_code: int | None,
        finished_ms: int,
        *,
        reason: str | None = None,
    ) -> bool:
        """Record how an attempt ended; False when no such attempt exists. A None reason keeps the recorded one."""
        if outcome not in RESET_OUTCOMES:
            raise ValueError(f"reset outcome {outcome!r} not in {sorted(RESET_OUTCOMES)}")
        values: dict[str, Any] = {"outcome": outcome, "error_code": error_code, "finished_ms": int(finished_ms)}
        if reason is not None:
            values["reason"] = reason
        stmt = update(StoredResetAttempt).where(_R.id == attempt_id).values(**values)
        with self._db.write("finishing a reset attempt") as conn:
            return int(conn.execute(stmt).rowcount) > 0

    def refuse(self, group: str, chips: Sequence[str], channel: str, at_ms: int, reason: str) -> int:
        """Record a reset that was refused before it started (outcome "refused"), finished at once."""
        with self._db.write("recording a refused reset") as conn:
            return _insert(conn, group, chips, channel, at_ms, reason=reason, outcome="refused", finished_ms=int(at_ms))

    def recent(self, limit: int = 100, chip: str | None = None) -> list[ResetAttemptRow]:
        """Reset attempts, newest first (only those involving `chip` when given)."""
        stmt = select(StoredResetAttempt)
        if chip is not None:
            stmt = stmt.where(_R.id.in_(select(_C.attempt_id).where(_C.chip == chip)))
        stmt = stmt.order_by(_R.id.desc()).limit(limit)
        with self._db.read("reading reset attempts") as conn:
            attempts = detached(conn, stmt)
            chips: dict[int | None, list[str]] = {a.id: [] for a in attempts}
            if attempts:
                for link in detached(
                    conn,
                    select(ResetAttemptChipRow).where(_C.attempt_id.in_(list(chips))).order_by(_C.attempt_id, _C.chip),
                ):
                    chips[link.attempt_id].append(link.chip)
        return [ResetAttemptRow(**a.model_dump(), chips=tuple(chips[a.id])) for a in attempts]
