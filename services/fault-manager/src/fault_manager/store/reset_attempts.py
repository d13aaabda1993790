"""Hot-reset attempts of reset groups, with their chips: started, finished, or refused before they started."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import Connection, insert, select, update

from .database import Database
from .models import RESET_ATTEMPT_CHIPS, RESET_ATTEMPTS, RESET_OUTCOMES, ResetAttemptRow

_R = RESET_ATTEMPTS.c
_C = RESET_ATTEMPT_CHIPS.c


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
        insert(RESET_ATTEMPTS),
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
    new_id = int(attempt_id[0])
    unique_chips = sorted(set(chips))
    if unique_chips:
        conn.execute(insert(RESET_ATTEMPT_CHIPS), [{"attempt_id": new_id, "chip": c} for c in unique_chips])
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
        stmt = update(RESET_ATTEMPTS).where(_R.id == attempt_id).values(**values)
        with self._db.write("finishing a reset attempt") as conn:
            return int(conn.execute(stmt).rowcount) > 0

    def refuse(self, group: str, chips: Sequence[str], channel: str, at_ms: int, reason: str) -> int:
        """Record a reset that was refused before it started (outcome "refused"), finished at once."""
        with self._db.write("recording a refused reset") as conn:
            return _insert(conn, group, chips, channel, at_ms, reason=reason, outcome="refused", finished_ms=int(at_ms))

    def recent(self, limit: int = 100, chip: str | None = None) -> list[ResetAttemptRow]:
        """Reset attempts, newest first (only those involving `chip` when given)."""
        stmt = select(
            _R.id, _R.group_name, _R.channel, _R.started_ms, _R.outcome, _R.error_code, _R.finished_ms, _R.reason
        )
        if chip is not None:
            stmt = stmt.where(_R.id.in_(select(_C.attempt_id).where(_C.chip == chip)))
        stmt = stmt.order_by(_R.id.desc()).limit(limit)
        with self._db.read("reading reset attempts") as conn:
            attempts = conn.execute(stmt).all()
            ids = [a[0] for a in attempts]
            chips: dict[int, list[str]] = {i: [] for i in ids}
            if ids:
                for attempt_id, name in conn.execute(
                    select(_C.attempt_id, _C.chip).where(_C.attempt_id.in_(ids)).order_by(_C.attempt_id, _C.chip)
                ):
                    chips[attempt_id].append(name)
        return [
            ResetAttemptRow(
                id=a[0],
                group_name=a[1],
                chips=tuple(chips[a[0]]),
                channel=a[2],
                started_ms=a[3],
                outcome=a[4],
                error_code=a[5],
                finished_ms=a[6],
                reason=a[7],
            )
            for a in attempts
        ]
