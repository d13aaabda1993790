"""The fault-manager's durable schema (SQLModel tables) and the rows the Store hands out.

The tables describe the *current* schema; `migrations.py` builds it with frozen raw SQL so that
an old file can be upgraded step by step (a test checks that both agree). The Store queries these
tables with SQLAlchemy Core and returns plain frozen dataclasses, never session-bound objects,
so callers on other threads meet no lazy loading and no detached-instance errors.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Protocol

from sqlalchemy import Index, Table, text
from sqlmodel import Field, SQLModel

# Values the contract allows; checked before anything is written so a bad batch changes nothing.
ASSERTIONS = frozenset({"occur", "recover", "once"})
SOURCES = frozenset({"subscription", "poll", "reconcile"})
# How a reset attempt ended; "refused": it never started (a job's reset ConfigMap refused the write: see its reason).
RESET_OUTCOMES = frozenset({"succeeded", "failed", "refused"})


# --- tables -------------------------------------------------------------------------------------


class FaultEvent(SQLModel, table=True):
    """One fault event as the exporter reported it, keyed by its event id `<run>-<seq>`."""

    __tablename__ = "fault_events"
    __table_args__ = (
        # Per-chip history, newest first, keyset-paginated on (raised_at_ms, id).
        Index("ix_fault_events_chip_time", "chip", "raised_at_ms", "id"),
        # The engine's per-code timelines (FaultDuration / FaultFrequency windows).
        Index("ix_fault_events_chip_code_time", "chip", "code", "raised_at_ms"),
        # Resuming the exporter stream: the highest seq stored for a run.
        Index("ix_fault_events_run_seq", "run_id", "seq"),
    )

    id: int | None = Field(default=None, primary_key=True)
    event_id: str = Field(unique=True)
    run_id: str
    seq: int
    chip: str
    logic_id: int
    phy_id: int
    code: str
    assertion: str
    severity: int | None = None
    source: str
    raised_at_ms: int
    recorded_at_ms: int


class ChipState(SQLModel, table=True):
    """The last verdict the engine computed per chip, so a restart starts where it stopped."""

    __tablename__ = "chip_states"

    chip: str = Field(primary_key=True)
    level: str
    schedulable: bool
    reason: str
    since_ms: int
    codes_json: str
    updated_ms: int


class Escalation(SQLModel, table=True):
    """An UpgradeFaultReason entry (FaultDuration / FaultFrequency / FaultAutofill)."""

    __tablename__ = "escalations"
    __table_args__ = (
        # At most one active escalation per chip, code and type: re-adding after a restart is a no-op.
        Index(
            "ux_escalations_active",
            "chip",
            "code",
            "upgrade_type",
            unique=True,
            sqlite_where=text("released_at_ms IS NULL"),
        ),
        Index("ix_escalations_chip_time", "chip", "upgrade_time_ms"),
        Index("ix_escalations_released", "released_at_ms"),
    )

    id: int | None = Field(default=None, primary_key=True)
    chip: str
    code: str
    level: str
    upgrade_type: str
    upgrade_time_ms: int
    released_at_ms: int | None = None
    release_reason: str | None = None


class ManualChip(SQLModel, table=True):
    """Chips currently in ManuallySeparateNPU."""

    __tablename__ = "manual_chips"

    chip: str = Field(primary_key=True)
    set_by: str
    since_ms: int


class ManualAudit(SQLModel, table=True):
    """Every change of manual isolation: who, when, on or off. Never pruned (rare rows)."""

    __tablename__ = "manual_audit"
    __table_args__ = (Index("ix_manual_audit_chip", "chip", "id"),)

    id: int | None = Field(default=None, primary_key=True)
    chip: str
    separated: bool
    set_by: str
    at_ms: int


class ResetAttempt(SQLModel, table=True):
    """One hot-reset attempt of a reset group."""

    __tablename__ = "reset_attempts"
    __table_args__ = (Index("ix_reset_attempts_finished", "finished_ms"),)

    id: int | None = Field(default=None, primary_key=True)
    group_name: str
    channel: str
    started_ms: int
    outcome: str | None = None
    error_code: int | None = None
    finished_ms: int | None = None
    reason: str | None = None  # why it was refused or failed, for the operator (GET /v1/resets)


class ResetAttemptChip(SQLModel, table=True):
    """The chips of a reset attempt (deleted with it)."""

    __tablename__ = "reset_attempt_chips"
    __table_args__ = (Index("ix_reset_attempt_chips_chip", "chip", "attempt_id"),)

    attempt_id: int = Field(foreign_key="reset_attempts.id", primary_key=True, ondelete="CASCADE")
    chip: str = Field(primary_key=True)


class ResetBucket(SQLModel, table=True):
    """A faulty chip's hot-reset token bucket (fault_manager.reset_tokens), created by its first reset."""

    __tablename__ = "reset_buckets"

    chip: str = Field(primary_key=True)
    # The reference keys its buckets by logic id; kept for the operator. NULL for a bucket converted
    # from the sliding-window release, which did not record it: the next consume fills it in.
    logic_id: int | None = None
    tokens: int
    last_refill_ms: int


class PolicyVersion(SQLModel, table=True):
    """Each fault policy the engine was offered, accepted or not; the last accepted one is reloaded."""

    __tablename__ = "policy_versions"
    __table_args__ = (Index("ix_policy_versions_accepted", "accepted", "id"),)

    id: int | None = Field(default=None, primary_key=True)
    source: str
    digest: str
    content_json: str
    accepted: bool
    error: str | None = None
    saved_ms: int


class SchemaVersion(SQLModel, table=True):
    """One row per applied migration; the schema version is the highest."""

    __tablename__ = "schema_version"

    version: int = Field(primary_key=True)
    name: str
    applied_ms: int


STORE_TABLES: tuple[type[SQLModel], ...] = (
    FaultEvent,
    ChipState,
    Escalation,
    ManualChip,
    ManualAudit,
    ResetAttempt,
    ResetAttemptChip,
    ResetBucket,
    PolicyVersion,
    SchemaVersion,
)


def table(model: type[SQLModel]) -> Table:
    """The Core table of a model (SQLModel leaves `__table__` untyped)."""
    name = model.__tablename__
    assert isinstance(name, str)
    return SQLModel.metadata.tables[name]


# --- rows handed out ----------------------------------------------------------------------------


class FaultEventLike(Protocol):
    """What `Store.append_events` reads from each event (a FaultEventRow, a FaultEvent, ...)."""

    @property
    def event_id(self) -> str: ...
    @property
    def chip(self) -> str: ...
    @property
    def logic_id(self) -> int: ...
    @property
    def phy_id(self) -> int: ...
    @property
    def code(self) -> str: ...
    @property
    def assertion(self) -> str: ...
    @property
    def severity(self) -> int | None: ...
    @property
    def source(self) -> str: ...
    @property
    def raised_at_ms(self) -> int: ...
    @property
    def recorded_at_ms(self) -> int: ...


@dataclass(frozen=True, slots=True)
class FaultEventRow:
    event_id: str  # `<run>-<seq>` from the exporter
    chip: str  # "Ascend910-3"
    logic_id: int
    phy_id: int
    code: str  # upper-case hex, no 0x
    assertion: str  # occur / recover / once
    severity: int | None  # None when read by polling
    source: str  # subscription / poll / reconcile
    raised_at_ms: int
    recorded_at_ms: int
    id: int | None = None  # the row id once stored; `history(before_id=...)` pages on it


@dataclass(frozen=True, slots=True)
class ChipStateRow:
    chip: str
    level: str
    schedulable: bool
    reason: str
    since_ms: int
    codes_json: str
    updated_ms: int

    @property
    def codes(self) -> Any:
        return json.loads(self.codes_json)


@dataclass(frozen=True, slots=True)
class EscalationRow:
    id: int
    chip: str
    code: str
    level: str
    upgrade_type: str  # FaultDuration / FaultFrequency / FaultAutofill
    upgrade_time_ms: int
    released_at_ms: int | None
    release_reason: str | None

    @property
    def active(self) -> bool:
        return self.released_at_ms is None


@dataclass(frozen=True, slots=True)
class ManualAuditRow:
    id: int
    chip: str
    separated: bool
    set_by: str
    at_ms: int


@dataclass(frozen=True, slots=True)
class ResetAttemptRow:
    id: int
    group_name: str
    chips: tuple[str, ...]
    channel: str
    started_ms: int
    outcome: str | None  # None while running, else one of RESET_OUTCOMES
    error_code: int | None
    finished_ms: int | None
    reason: str | None = None  # why it was refused or failed; None before schema version 3


@dataclass(frozen=True, slots=True)
class PolicyRow:
    id: int
    source: str
    digest: str
    content_json: str
    accepted: bool
    error: str | None
    saved_ms: int


@dataclass(frozen=True, slots=True)
class PruneResult:
    events: int = 0
    escalations: int = 0
    reset_attempts: int = 0
    complete: bool = True  # False: the time budget ran out; call prune again later
