"""The fault-manager's durable schema, and the one record type of each table the store hands out.

A table is declared once, as SQLAlchemy Core (its columns and indexes: what the repositories query
and what the schema test compares with `migrations.py`); the rows it hands out are one frozen
dataclass per table, mapped positionally by its repository. A table has no second Python class:
records are plain values, never session-bound objects, so callers on other threads meet no lazy
loading, and a page of history costs one small object per row (loading SQLModel table instances
instead made a 100-row page about 80 % slower here).

The tables describe the *current* schema; `migrations.py` builds it with frozen raw SQL so that
an old file can be upgraded step by step (a test checks that both agree).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Boolean, Column, ForeignKey, Index, Integer, MetaData, String, Table, text
from sqlalchemy.types import TypeEngine

# Values the contract allows; checked before anything is written so a bad batch changes nothing.
ASSERTIONS = frozenset({"occur", "recover", "once"})
SOURCES = frozenset({"subscription", "poll", "reconcile"})
# How a reset attempt ended; "refused": it never started (a job's reset ConfigMap refused the write: see its reason).
RESET_OUTCOMES = frozenset({"succeeded", "failed", "refused"})

METADATA = MetaData()


def _required(name: str, kind: type[TypeEngine[Any]], *, unique: bool = False) -> Column[Any]:
    return Column(name, kind, nullable=False, unique=unique)


def _optional(name: str, kind: type[TypeEngine[Any]]) -> Column[Any]:
    return Column(name, kind, nullable=True)


def _row_id() -> Column[Any]:
    return Column("id", Integer, primary_key=True)


# --- fault_events -------------------------------------------------------------------------------

FAULT_EVENTS = Table(
    "fault_events",  # one fault event as the exporter reported it, keyed by its event id `<run>-<seq>`
    METADATA,
    _row_id(),
    _required("event_id", String, unique=True),
    _required("run_id", String),
    _required("seq", Integer),
    _required("chip", String),
    _required("logic_id", Integer),
    _required("phy_id", Integer),
    _required("code", String),
    _required("assertion", String),
    _optional("severity", Integer),
    _required("source", String),
    _required("raised_at_ms", Integer),
    _required("recorded_at_ms", Integer),
    # Per-chip history, newest first, keyset-paginated on (raised_at_ms, id).
    Index("ix_fault_events_chip_time", "chip", "raised_at_ms", "id"),
    # The engine's per-code timelines (FaultDuration / FaultFrequency windows).
    Index("ix_fault_events_chip_code_time", "chip", "code", "raised_at_ms"),
    # Resuming the exporter stream: the highest seq stored for a run.
    Index("ix_fault_events_run_seq", "run_id", "seq"),
)


@dataclass(frozen=True, slots=True)
class FaultEventRow:
    """A fault event; run_id and seq are not carried: the store splits them off `event_id`."""

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


# --- chip_states --------------------------------------------------------------------------------

CHIP_STATES = Table(
    "chip_states",  # the last verdict the engine computed per chip, so a restart starts where it stopped
    METADATA,
    Column("chip", String, primary_key=True),
    _required("level", String),
    _required("schedulable", Boolean),
    _required("reason", String),
    _required("since_ms", Integer),
    _required("codes_json", String),
    _required("updated_ms", Integer),
)


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


# --- escalations --------------------------------------------------------------------------------

ESCALATIONS = Table(
    "escalations",  # an UpgradeFaultReason entry (FaultDuration / FaultFrequency / FaultAutofill)
    METADATA,
    _row_id(),
    _required("chip", String),
    _required("code", String),
    _required("level", String),
    _required("upgrade_type", String),
    _required("upgrade_time_ms", Integer),
    _optional("released_at_ms", Integer),
    _optional("release_reason", String),
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


# --- manual_chips, manual_audit -----------------------------------------------------------------

MANUAL_CHIPS = Table(
    "manual_chips",  # chips currently in ManuallySeparateNPU (handed out as a set of names)
    METADATA,
    Column("chip", String, primary_key=True),
    _required("set_by", String),
    _required("since_ms", Integer),
)

MANUAL_AUDIT = Table(
    "manual_audit",  # every change of manual isolation: who, when, on or off; never pruned (rare rows)
    METADATA,
    _row_id(),
    _required("chip", String),
    _required("separated", Boolean),
    _required("set_by", String),
    _required("at_ms", Integer),
    Index("ix_manual_audit_chip", "chip", "id"),
)


@dataclass(frozen=True, slots=True)
class ManualAuditRow:
    id: int
    chip: str
    separated: bool
    set_by: str
    at_ms: int


# --- reset_attempts, reset_attempt_chips --------------------------------------------------------

RESET_ATTEMPTS = Table(
    "reset_attempts",  # one hot-reset attempt of a reset group
    METADATA,
    _row_id(),
    _required("group_name", String),
    _required("channel", String),
    _required("started_ms", Integer),
    _optional("outcome", String),
    _optional("error_code", Integer),
    _optional("finished_ms", Integer),
    _optional("reason", String),  # why it was refused or failed, for the operator (GET /v1/resets)
    Index("ix_reset_attempts_finished", "finished_ms"),
)

RESET_ATTEMPT_CHIPS = Table(
    "reset_attempt_chips",  # the chips of a reset attempt (deleted with it; handed out as ResetAttemptRow.chips)
    METADATA,
    Column("attempt_id", Integer, ForeignKey("reset_attempts.id", ondelete="CASCADE"), primary_key=True),
    Column("chip", String, primary_key=True),
    Index("ix_reset_attempt_chips_chip", "chip", "attempt_id"),
)


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


# --- reset_buckets ------------------------------------------------------------------------------

RESET_BUCKETS = Table(
    "reset_buckets",  # a faulty chip's hot-reset token bucket, handed out as reset_tokens.TokenBucket
    METADATA,
    Column("chip", String, primary_key=True),
    # The reference keys its buckets by logic id; kept for the operator. NULL for a bucket converted
    # from the sliding-window release, which did not record it: the next consume fills it in.
    _optional("logic_id", Integer),
    _required("tokens", Integer),
    _required("last_refill_ms", Integer),
)


# --- policy_versions ----------------------------------------------------------------------------

POLICY_VERSIONS = Table(
    "policy_versions",  # each fault policy the engine was offered, accepted or not; the last accepted one is reloaded
    METADATA,
    _row_id(),
    _required("source", String),
    _required("digest", String),
    _required("content_json", String),
    _required("accepted", Boolean),
    _optional("error", String),
    _required("saved_ms", Integer),
    Index("ix_policy_versions_accepted", "accepted", "id"),
)


@dataclass(frozen=True, slots=True)
class PolicyRow:
    id: int
    source: str
    digest: str
    content_json: str
    accepted: bool
    error: str | None
    saved_ms: int


# --- schema_version -----------------------------------------------------------------------------

SCHEMA_VERSION = Table(
    "schema_version",  # one row per applied migration; the schema version is the highest (read by migrations.py)
    METADATA,
    Column("version", Integer, primary_key=True),
    _required("name", String),
    _required("applied_ms", Integer),
)
