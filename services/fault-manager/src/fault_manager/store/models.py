"""The fault-manager's durable schema: one SQLModel class per table, the one declaration of its columns and indexes.

The classes describe the *current* schema (what the repositories query and what the schema test
compares with `migrations.py`); `migrations.py` builds it with frozen raw SQL so that an old file
can be upgraded step by step. Repositories read and write through these classes only, by column
name. What they hand out is never bound to a session: instances are loaded in a session that is
closed before they leave the store (detached, every column loaded, no relationship to lazy-load),
so callers on the event loop's thread never touch the database.

A table's class is named `<thing>Row`, and a repository that hands out whole rows hands out its
instances; but two tables' rows leave as records that are no table: `FaultEventRow`, the engine's
fault event value (see there why it is a frozen dataclass), and `ResetAttemptRow`, an attempt with
the chips of its second table. Their classes are named `StoredFaultEvent` and `StoredResetAttempt`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, fields
from typing import Any

from ascend_common.schemas.exporter import EventSource
from sqlalchemy import Column, Index, text
from sqlalchemy.orm import class_mapper
from sqlalchemy.sql.base import ReadOnlyColumnCollection
from sqlmodel import Field, SQLModel

# Values the contract allows; checked before anything is written so a bad batch changes nothing.
ASSERTIONS = frozenset({"occur", "recover", "once"})
# Every source the exporter may send (derived, so a new one, such as `hang`, is not refused and
# does not stop the reactor), and the fault-manager's own reconcile.
SOURCES = frozenset({*(s.value for s in EventSource), "reconcile"})
# How a reset attempt ended; "refused": it never started (a job's reset ConfigMap refused the write: see its reason).
RESET_OUTCOMES = frozenset({"succeeded", "failed", "refused"})


# --- fault_events -------------------------------------------------------------------------------


class StoredFaultEvent(SQLModel, table=True):
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


@dataclass(frozen=True, slots=True)
class FaultEventRow:
    """A fault event; run_id and seq are not carried: the store splits them off `event_id`.

    A frozen dataclass, not a `StoredFaultEvent` instance, on purpose: it is the reactor's input value,
    built from the exporter's stream before any row exists and matched by type there; and
    the hot reads (a history page, a chip's timeline, the replay at start) build one per row from
    Core results on `StoredFaultEvent`'s columns, by name (`FAULT_EVENT_COLUMNS`): loading detached
    ORM instances instead made a 100-row history page about twice as slow (p50 1.1 ms against 0.56 ms
    on a 200,000-event file here). Its fields are a subset of `StoredFaultEvent`'s names, which
    `FAULT_EVENT_COLUMNS` checks at import.
    """

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
    id: int | None = None  # the row id once stored; `FaultEventLog.page(before_id=...)` pages on it


def columns_of(model: type[SQLModel]) -> ReadOnlyColumnCollection[str, Column[Any]]:
    """A table class's columns by name, for Core statements (typed as columns, which the class's
    attributes are not to a type checker)."""
    return class_mapper(model).columns


def _columns_named_as(record: type[Any], model: type[SQLModel]) -> tuple[Column[Any], ...]:
    by_name = columns_of(model)
    return tuple(by_name[f.name] for f in fields(record))  # a KeyError at import: a field with no column


FAULT_EVENT_COLUMNS = _columns_named_as(FaultEventRow, StoredFaultEvent)


# --- chip_states --------------------------------------------------------------------------------


class ChipStateRow(SQLModel, table=True):
    """The last verdict the engine computed per chip, so a restart starts where it stopped."""

    __tablename__ = "chip_states"

    chip: str = Field(primary_key=True)
    level: str
    schedulable: bool
    reason: str
    since_ms: int
    codes_json: str
    updated_ms: int

    @property
    def codes(self) -> Any:
        return json.loads(self.codes_json)


# --- escalations --------------------------------------------------------------------------------


class EscalationRow(SQLModel, table=True):
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
    upgrade_type: str  # FaultDuration / FaultFrequency / FaultAutofill
    upgrade_time_ms: int
    released_at_ms: int | None = None
    release_reason: str | None = None

    @property
    def active(self) -> bool:
        return self.released_at_ms is None


# --- manual_chips, manual_audit -----------------------------------------------------------------


class ManualChipRow(SQLModel, table=True):
    """A chip currently in ManuallySeparateNPU (handed out as a set of names)."""

    __tablename__ = "manual_chips"

    chip: str = Field(primary_key=True)
    set_by: str
    since_ms: int


class ManualAuditRow(SQLModel, table=True):
    """A change of manual isolation: who, when, on or off; never pruned (rare rows)."""

    __tablename__ = "manual_audit"
    __table_args__ = (Index("ix_manual_audit_chip", "chip", "id"),)

    id: int | None = Field(default=None, primary_key=True)
    chip: str
    separated: bool
    set_by: str
    at_ms: int


# --- reset_attempts, reset_attempt_chips --------------------------------------------------------


class StoredResetAttempt(SQLModel, table=True):
    """One hot-reset attempt of a reset group (handed out with its chips as `ResetAttemptRow`)."""

    __tablename__ = "reset_attempts"
    __table_args__ = (Index("ix_reset_attempts_finished", "finished_ms"),)

    id: int | None = Field(default=None, primary_key=True)
    group_name: str
    channel: str
    started_ms: int
    outcome: str | None = None  # None while running, else one of RESET_OUTCOMES
    error_code: int | None = None
    finished_ms: int | None = None
    reason: str | None = None  # why it was refused or failed, for the operator (GET /v1/resets)


class ResetAttemptChipRow(SQLModel, table=True):
    """A chip of a reset attempt, deleted with it."""

    __tablename__ = "reset_attempt_chips"
    __table_args__ = (Index("ix_reset_attempt_chips_chip", "chip", "attempt_id"),)

    attempt_id: int = Field(foreign_key="reset_attempts.id", ondelete="CASCADE", primary_key=True)
    chip: str = Field(primary_key=True)


@dataclass(frozen=True, slots=True)
class ResetAttemptRow:
    """A reset attempt with its chips: rows of two tables, so no one table's class (built by column name)."""

    id: int
    group_name: str
    chips: tuple[str, ...]
    channel: str
    started_ms: int
    outcome: str | None  # None while running, else one of RESET_OUTCOMES
    error_code: int | None
    finished_ms: int | None
    reason: str | None = None  # why it was refused or failed; None before schema version 3


# --- reset_buckets ------------------------------------------------------------------------------


class ResetBucketRow(SQLModel, table=True):
    """A faulty chip's hot-reset token bucket, handed out as reset_buckets.StoredBucket."""

    __tablename__ = "reset_buckets"

    chip: str = Field(primary_key=True)
    # The reference keys its buckets by logic id; kept for the operator. NULL for a bucket converted
    # from the sliding-window release, which did not record it: the next consume fills it in.
    logic_id: int | None = None
    tokens: int
    last_refill_ms: int


# --- policy_versions ----------------------------------------------------------------------------


class PolicyRow(SQLModel, table=True):
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


# --- schema_version -----------------------------------------------------------------------------


class SchemaVersionRow(SQLModel, table=True):
    """One row per applied migration; the schema version is the highest (written by migrations.py)."""

    __tablename__ = "schema_version"

    version: int = Field(primary_key=True)
    name: str
    applied_ms: int
