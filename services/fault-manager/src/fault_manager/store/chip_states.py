"""The last verdict the engine computed per chip, so a restart starts where it stopped."""

from __future__ import annotations

import json
from typing import Any

from sqlalchemy.dialects.sqlite import insert
from sqlmodel import col, select

from .database import Database, detached
from .models import ChipStateRow


class ChipStates:
    def __init__(self, db: Database) -> None:
        self._db = db

    def save(
        self,
        chip: str,
        level: str,
        schedulable: bool,
        reason: str,
        since_ms: int,
        codes: Any,
        updated_ms: int,
    ) -> None:
        """Upsert a chip's verdict; `codes` is any JSON value (stored compact with sorted keys)."""
        values = {
            "chip": chip,
            "level": level,
            "schedulable": bool(schedulable),
            "reason": reason,
            "since_ms": int(since_ms),
            "codes_json": json.dumps(codes, sort_keys=True, separators=(",", ":")),
            "updated_ms": int(updated_ms),
        }
        stmt = insert(ChipStateRow)
        stmt = stmt.on_conflict_do_update(
            index_elements=[col(ChipStateRow.chip)],
            set_={name: stmt.excluded[name] for name in values if name != "chip"},
        )
        with self._db.write("saving chip states") as conn:
            conn.execute(stmt, [values])

    def all(self) -> dict[str, ChipStateRow]:
        with self._db.read("reading chip states") as conn:
            rows = detached(conn, select(ChipStateRow).order_by(col(ChipStateRow.chip)))
        return {row.chip: row for row in rows}
