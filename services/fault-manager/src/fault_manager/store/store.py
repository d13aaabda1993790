"""The fault-manager's durable state: one SQLite file, and one repository per aggregate over it."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from .chip_states import ChipStates
from .database import Database, wall_clock_ms
from .fault_events import FaultEventLog
from .isolations import Isolations
from .manual_separation import ManualSeparation
from .policy_versions import PolicyVersions
from .reset_attempts import ResetAttempts
from .reset_buckets import ResetBuckets
from .retention import Retention


class Store:
    """Opens (and migrates) the file; each attribute but `db` is the repository of one aggregate."""

    def __init__(
        self,
        path: Path,
        *,
        busy_timeout_s: float = 5.0,
        wall_ms: Callable[[], int] = wall_clock_ms,
        pool_size: int = 4,
    ) -> None:
        self.db = Database(path, busy_timeout_s=busy_timeout_s, wall_ms=wall_ms, pool_size=pool_size)
        self.events = FaultEventLog(self.db)
        self.states = ChipStates(self.db)
        self.isolations = Isolations(self.db)
        self.manual = ManualSeparation(self.db)
        self.resets = ResetAttempts(self.db)
        self.buckets = ResetBuckets(self.db)
        self.policies = PolicyVersions(self.db)
        self.retention = Retention(self.db)

    def close(self) -> None:
        """Close every pooled connection; the last close checkpoints the WAL into the file."""
        self.db.close()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()
