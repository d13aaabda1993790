"""Durable state of the fault-manager: one SQLite file (WAL), a synchronous, thread-safe repository per aggregate,
and one async door (`in_store_thread`) through which the event loop calls them."""

from __future__ import annotations

from .database import StoreError
from .door import in_store_thread
from .fault_events import MAX_PAGE
from .migrations import CURRENT_VERSION
from .models import (
    RESET_OUTCOMES,
    ChipStateRow,
    EscalationRow,
    FaultEventRow,
    ManualAuditRow,
    PolicyRow,
    ResetAttemptRow,
)
from .retention import PruneResult
from .store import Store

__all__ = [
    "CURRENT_VERSION",
    "MAX_PAGE",
    "RESET_OUTCOMES",
    "ChipStateRow",
    "EscalationRow",
    "FaultEventRow",
    "ManualAuditRow",
    "PolicyRow",
    "PruneResult",
    "ResetAttemptRow",
    "Store",
    "StoreError",
    "in_store_thread",
]
