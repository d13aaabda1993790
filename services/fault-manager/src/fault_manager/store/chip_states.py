"""The last verdict the engine computed per chip, so a restart starts where it stopped."""

from __future__ import annotations

import json
from typing import Any

from sqlalchemy import select
from sqlalchemy.dialects.sqlite import insert

from .database import Database
from .models import CHIP_STATES, ChipStateRow

_S = CHIP_STATES.c


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
        stmt = insert(CHIP_STATES)
        stmt = stmt.on_conflict_do_update(
            index_elements=[_S.chip], set_={name: stmt.excluded[name] for name in values if name != "chip"}
        )
        with self._db.write("saving chip states") as conn:
            conn.execute(stmt, [values])

    def all(self) -> dict[str, ChipStateRow]:
        stmt = select(_S.chip, _S.level, _S.schedulable, _S.reason, _S.since_ms, _S.codes_json, _S.updated_ms).order_by(
            _S.chip
        )
        with self._db.read("reading chip states") as conn:
            rows = conn.execute(stmt).all()
        return {row[0]: ChipStateRow(*row) for row in rows}
