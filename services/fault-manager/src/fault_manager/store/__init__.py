"""Durable state of the fault-manager: one SQLite file (WAL) behind a synchronous, thread-safe API."""

from __future__ import annotations

from .migrations import CURRENT_VERSION
from .models import (
    ChipStateRow,
    EscalationRow,
    FaultEventLike,
    FaultEventRow,
    ManualAuditRow,
    PolicyRow,
    PruneResult,
    ResetAttemptRow,
)
from .store import MAX_PAGE, TOKEN_WINDOW_MS, TOKENS_PER_WINDOW, Store, StoreError

__all__ = [
    "CURRENT_VERSION",
    "MAX_PAGE",
    "TOKENS_PER_WINDOW",
    "TOKEN_WINDOW_MS",
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
