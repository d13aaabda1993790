"""Durable state of the fault-manager: one SQLite file (WAL) behind a synchronous, thread-safe API."""

from __future__ import annotations

from .migrations import CURRENT_VERSION
from .models import (
    RESET_OUTCOMES,
    ChipStateRow,
    EscalationRow,
    FaultEventLike,
    FaultEventRow,
    ManualAuditRow,
    PolicyRow,
    PruneResult,
    ResetAttemptRow,
)
from .store import MAX_PAGE, Store, StoreError

__all__ = [
    "CURRENT_VERSION",
    "MAX_PAGE",
    "RESET_OUTCOMES",
    "ChipStateRow",
    "EscalationRow",
    "FaultEventLike",
    "FaultEventRow",
    "ManualAuditRow",
    "PolicyRow",
    "PruneResult",
    "ResetAttemptRow",
    "Store",
    "StoreError",
]
