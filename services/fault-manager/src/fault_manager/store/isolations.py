"""Escalations (UpgradeFaultReason entries): recorded, adopted from a ConfigMap with their isolation, released."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from ascend_common.faults import is_plain_hex
from sqlalchemy import Connection, insert, update
from sqlmodel import select

from .database import Database, detached
from .manual_separation import set_separated
from .models import EscalationRow, columns_of

_X = columns_of(EscalationRow)


def _stored_code(code: str) -> str:
    """Hex codes upper-case (so one code is one row, however spelt); a literal such as the reference's
    "AutofillFaultCode" as it is."""
    return code.upper() if is_plain_hex(code) else code


def _add(conn: Connection, chip: str, code: str, level: str, upgrade_type: str, upgrade_time_ms: int) -> int:
    code = _stored_code(code)
    conn.execute(
        insert(EscalationRow).prefix_with("OR IGNORE"),
        {"chip": chip, "code": code, "level": level, "upgrade_type": upgrade_type,
         "upgrade_time_ms": int(upgrade_time_ms)},
    )  # fmt: skip
    # Either the row just inserted or the active one that made the insert a no-op.
    found = conn.execute(
        select(_X.id).where(
            _X.chip == chip, _X.code == code, _X.upgrade_type == upgrade_type, _X.released_at_ms.is_(None)
        )
    ).scalar_one()
    return int(found)


class Isolations:
    def __init__(self, db: Database) -> None:
        self._db = db

    def add(self, chip: str, code: str, level: str, upgrade_type: str, upgrade_time_ms: int) -> int:
        """Record an escalation; while one for the same chip, code and type is active, return its id instead."""
        with self._db.write("adding an escalation") as conn:
            return _add(conn, chip, code, level, upgrade_type, upgrade_time_ms)

    def adopt(self, adopted: Mapping[str, Sequence[tuple[str, str, str, int]]], by: str, at_ms: int) -> None:
        """Isolate every chip of `adopted` with its reasons (code, level, upgrade type, upgrade time ms),
        in one transaction: a crash half-way would leave chips whose reasons a restart cannot find."""
        with self._db.write("adopting isolations") as conn:
            for chip, reasons in adopted.items():
                set_separated(conn, chip, True, by, at_ms)
                for code, level, upgrade_type, upgrade_time_ms in reasons:
                    _add(conn, chip, code, level, upgrade_type, upgrade_time_ms)

    def escalations(self, active_only: bool = True, chip: str | None = None) -> list[EscalationRow]:
        """Escalations by chip, oldest first; released ones too unless `active_only`."""
        stmt = select(EscalationRow)
        if active_only:
            stmt = stmt.where(_X.released_at_ms.is_(None))
        if chip is not None:
            stmt = stmt.where(_X.chip == chip)
        stmt = stmt.order_by(_X.chip, _X.upgrade_time_ms, _X.id)
        with self._db.read("reading escalations") as conn:
            return detached(conn, stmt)

    def release(
        self,
        chip: str,
        released_at_ms: int,
        reason: str,
        code: str | None = None,
        upgrade_type: str | None = None,
        *,
        level: str | None = None,
    ) -> int:
        """Release a chip's active escalations (all, or those of one code / type / level); returns how many."""
        stmt = (
            update(EscalationRow)
            .where(_X.chip == chip, _X.released_at_ms.is_(None))
            .values(released_at_ms=int(released_at_ms), release_reason=reason)
        )
        if code is not None:
            stmt = stmt.where(_X.code == _stored_code(code))
        if upgrade_type is not None:
            stmt = stmt.where(_X.upgrade_type == upgrade_type)
        if level is not None:
            stmt = stmt.where(_X.level == level)
        with self._db.write("releasing escalations") as conn:
            return int(conn.execute(stmt).rowcount)
