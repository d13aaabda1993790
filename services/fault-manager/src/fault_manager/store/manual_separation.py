"""Manual isolation (ManuallySeparateNPU): the chips in it now, and the audit of every change."""

from __future__ import annotations

from sqlalchemy import Connection, delete, insert
from sqlmodel import select

from .database import Database, detached
from .models import ManualAuditRow, ManualChipRow, columns_of

_M = columns_of(ManualChipRow)
_A = columns_of(ManualAuditRow)


def set_separated(conn: Connection, chip: str, on: bool, by: str, at_ms: int) -> bool:
    """Within the caller's write transaction: add or remove the chip, audited; whether it changed."""
    present = conn.execute(select(_M.chip).where(_M.chip == chip)).scalar_one_or_none() is not None
    if present == on:
        return False  # no change: a periodic re-sync of the ConfigMap must not flood the audit
    if on:
        conn.execute(insert(ManualChipRow), {"chip": chip, "set_by": by, "since_ms": int(at_ms)})
    else:
        conn.execute(delete(ManualChipRow).where(_M.chip == chip))
    conn.execute(insert(ManualAuditRow), {"chip": chip, "separated": on, "set_by": by, "at_ms": int(at_ms)})
    return True


class ManualSeparation:
    def __init__(self, db: Database) -> None:
        self._db = db

    def set_separated(self, chip: str, on: bool, by: str, at_ms: int) -> bool:
        """Add or remove a chip from manual isolation; returns whether it changed (changes are audited)."""
        with self._db.write("setting manual isolation") as conn:
            return set_separated(conn, chip, on, by, at_ms)

    def chips(self) -> set[str]:
        with self._db.read("reading manual isolation") as conn:
            return set(conn.execute(select(_M.chip)).scalars())

    def audit(self, chip: str | None = None, limit: int = 100) -> list[ManualAuditRow]:
        """Changes of manual isolation, newest first."""
        stmt = select(ManualAuditRow)
        if chip is not None:
            stmt = stmt.where(_A.chip == chip)
        stmt = stmt.order_by(_A.id.desc()).limit(limit)
        with self._db.read("reading the manual isolation audit") as conn:
            return detached(conn, stmt)
