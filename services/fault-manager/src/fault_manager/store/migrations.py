"""Ordered, in-place schema migrations of the fault-manager's SQLite file.

Each migration is frozen raw SQL (plus Python where SQL cannot do the job), never derived from
the tables declared in models.py: those describe the *current* schema and keep changing, while a
migration must keep building exactly what its version had. A fresh file runs every migration, so
new and upgraded files take the same path; a test checks the result against the declared tables.

Every migration runs in its own write transaction together with its `schema_version` row, so a
crash (or a full disk) in the middle leaves the file at the previous version, never half-way.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass

from sqlalchemy import Connection


class SchemaError(Exception):
    """The file's schema cannot be used by this build (too new, or not ours)."""


@dataclass(frozen=True)
class Migration:
    version: int
    name: str
    apply: Callable[[Connection], None]


def _run(conn: Connection, statements: Sequence[str]) -> None:
    for sql in statements:
        conn.exec_driver_sql(sql)


# --- v1: the initial layout ---------------------------------------------------------------------

_V1 = (
    """CREATE TABLE schema_version (
        version INTEGER NOT NULL PRIMARY KEY,
        name VARCHAR NOT NULL,
        applied_ms INTEGER NOT NULL
    )""",
    """CREATE TABLE fault_events (
        id INTEGER NOT NULL PRIMARY KEY,
        event_id VARCHAR NOT NULL UNIQUE,
        chip VARCHAR NOT NULL,
        logic_id INTEGER NOT NULL,
        phy_id INTEGER NOT NULL,
        code VARCHAR NOT NULL,
        assertion VARCHAR NOT NULL,
        severity INTEGER,
        raised_at_ms INTEGER NOT NULL,
        recorded_at_ms INTEGER NOT NULL
    )""",
    "CREATE INDEX ix_fault_events_chip ON fault_events (chip, raised_at_ms)",
    """CREATE TABLE chip_states (
        chip VARCHAR NOT NULL PRIMARY KEY,
        level VARCHAR NOT NULL,
        schedulable BOOLEAN NOT NULL,
        reason VARCHAR NOT NULL,
        since_ms INTEGER NOT NULL,
        codes_json VARCHAR NOT NULL,
        updated_ms INTEGER NOT NULL
    )""",
    """CREATE TABLE escalations (
        id INTEGER NOT NULL PRIMARY KEY,
        chip VARCHAR NOT NULL,
        code VARCHAR NOT NULL,
        level VARCHAR NOT NULL,
        upgrade_type VARCHAR NOT NULL,
        upgrade_time_ms INTEGER NOT NULL,
        released_at_ms INTEGER,
        release_reason VARCHAR
    )""",
    """CREATE UNIQUE INDEX ux_escalations_active ON escalations (chip, code, upgrade_type)
        WHERE released_at_ms IS NULL""",
    "CREATE INDEX ix_escalations_chip_time ON escalations (chip, upgrade_time_ms)",
    "CREATE INDEX ix_escalations_released ON escalations (released_at_ms)",
    """CREATE TABLE manual_chips (
        chip VARCHAR NOT NULL PRIMARY KEY,
        set_by VARCHAR NOT NULL,
        since_ms INTEGER NOT NULL
    )""",
    """CREATE TABLE reset_attempts (
        id INTEGER NOT NULL PRIMARY KEY,
        group_name VARCHAR NOT NULL,
        channel VARCHAR NOT NULL,
        started_ms INTEGER NOT NULL,
        outcome VARCHAR,
        error_code INTEGER,
        finished_ms INTEGER
    )""",
    "CREATE INDEX ix_reset_attempts_finished ON reset_attempts (finished_ms)",
    """CREATE TABLE reset_attempt_chips (
        attempt_id INTEGER NOT NULL,
        chip VARCHAR NOT NULL,
        PRIMARY KEY (attempt_id, chip),
        FOREIGN KEY (attempt_id) REFERENCES reset_attempts (id) ON DELETE CASCADE
    )""",
    "CREATE INDEX ix_reset_attempt_chips_chip ON reset_attempt_chips (chip, attempt_id)",
    """CREATE TABLE reset_tokens (
        id INTEGER NOT NULL PRIMARY KEY,
        chip VARCHAR NOT NULL,
        taken_ms INTEGER NOT NULL
    )""",
    "CREATE INDEX ix_reset_tokens_chip_time ON reset_tokens (chip, taken_ms)",
    "CREATE INDEX ix_reset_tokens_time ON reset_tokens (taken_ms)",
    """CREATE TABLE policy_versions (
        id INTEGER NOT NULL PRIMARY KEY,
        source VARCHAR NOT NULL,
        digest VARCHAR NOT NULL,
        content_json VARCHAR NOT NULL,
        accepted BOOLEAN NOT NULL,
        error VARCHAR,
        saved_ms INTEGER NOT NULL
    )""",
    "CREATE INDEX ix_policy_versions_accepted ON policy_versions (accepted, id)",
)


def _v1(conn: Connection) -> None:
    _run(conn, _V1)


# --- v2: run/seq for resuming, event source, history indexes, manual isolation audit -----------


def split_event_id(event_id: str) -> tuple[str, int] | None:
    """`<run>-<seq>` -> (run, seq); the run id may itself contain '-', the seq never does."""
    run, sep, seq = event_id.rpartition("-")
    if not sep or not run or not seq.isdigit() or not seq.isascii():
        return None
    return run, int(seq)


def _event_run(event_id: str) -> str:
    parts = split_event_id(event_id)
    return parts[0] if parts else event_id


def _event_seq(event_id: str) -> int:
    parts = split_event_id(event_id)
    return parts[1] if parts else 0


_V2_EVENTS = (
    # SQLite cannot add NOT NULL columns computed from other columns, so the table is rebuilt
    # (its documented 12-step recipe, minus the foreign-key steps: nothing references it).
    "ALTER TABLE fault_events RENAME TO fault_events_v1",
    "DROP INDEX ix_fault_events_chip",
    """CREATE TABLE fault_events (
        id INTEGER NOT NULL PRIMARY KEY,
        event_id VARCHAR NOT NULL UNIQUE,
        run_id VARCHAR NOT NULL,
        seq INTEGER NOT NULL,
        chip VARCHAR NOT NULL,
        logic_id INTEGER NOT NULL,
        phy_id INTEGER NOT NULL,
        code VARCHAR NOT NULL,
        assertion VARCHAR NOT NULL,
        severity INTEGER,
        source VARCHAR NOT NULL,
        raised_at_ms INTEGER NOT NULL,
        recorded_at_ms INTEGER NOT NULL
    )""",
    # v1 did not record the source; a polled code has no severity (contract section 7), so a
    # NULL severity can only have come from polling.
    """INSERT INTO fault_events (id, event_id, run_id, seq, chip, logic_id, phy_id, code, assertion,
                                 severity, source, raised_at_ms, recorded_at_ms)
       SELECT id, event_id, fm_event_run(event_id), fm_event_seq(event_id), chip, logic_id, phy_id,
              code, assertion, severity, CASE WHEN severity IS NULL THEN 'poll' ELSE 'subscription' END,
              raised_at_ms, recorded_at_ms
       FROM fault_events_v1 ORDER BY id""",
    "DROP TABLE fault_events_v1",
    "CREATE INDEX ix_fault_events_chip_time ON fault_events (chip, raised_at_ms, id)",
    "CREATE INDEX ix_fault_events_chip_code_time ON fault_events (chip, code, raised_at_ms)",
    "CREATE INDEX ix_fault_events_run_seq ON fault_events (run_id, seq)",
)

_V2_AUDIT = (
    """CREATE TABLE manual_audit (
        id INTEGER NOT NULL PRIMARY KEY,
        chip VARCHAR NOT NULL,
        separated BOOLEAN NOT NULL,
        set_by VARCHAR NOT NULL,
        at_ms INTEGER NOT NULL
    )""",
    "CREATE INDEX ix_manual_audit_chip ON manual_audit (chip, id)",
    # The audit starts with what is isolated now, so `manual_audit()` explains every current entry.
    """INSERT INTO manual_audit (chip, separated, set_by, at_ms)
       SELECT chip, 1, set_by, since_ms FROM manual_chips ORDER BY since_ms, chip""",
)


def _v2(conn: Connection) -> None:
    raw = conn.connection.dbapi_connection
    assert isinstance(raw, sqlite3.Connection)
    # Splitting on the *last* '-' has no SQLite string function; the rebuild calls these per row
    # inside SQLite, so memory stays flat however many events the file holds.
    raw.create_function("fm_event_run", 1, _event_run, deterministic=True)
    raw.create_function("fm_event_seq", 1, _event_seq, deterministic=True)
    _run(conn, _V2_EVENTS)
    _run(conn, _V2_AUDIT)


# --- v3: the reference's per-chip token buckets replace the sliding window; why a reset failed ---

_V3 = (
    """CREATE TABLE reset_buckets (
        chip VARCHAR NOT NULL PRIMARY KEY,
        logic_id INTEGER,
        tokens INTEGER NOT NULL,
        last_refill_ms INTEGER NOT NULL
    )""",
    # The sliding window's rule, frozen here (3 tokens per chip, a token taken at t counts while
    # t > now - 6 h), measured from the newest token: "now" was at least that when the file was
    # written. A chip keeps what the window left it; its bucket refills when the window would have
    # given back its oldest counted token, so no chip waits longer than under the old rule. The
    # logic id was never stored (the chip name holds the phy id): NULL until the next consume.
    """INSERT INTO reset_buckets (chip, logic_id, tokens, last_refill_ms)
       SELECT chip, NULL, MAX(0, 3 - COUNT(*)), MIN(taken_ms)
       FROM reset_tokens
       WHERE taken_ms > (SELECT MAX(taken_ms) FROM reset_tokens) - 21600000
       GROUP BY chip
       ORDER BY chip""",
    "DROP TABLE reset_tokens",  # its two indexes go with it
    "ALTER TABLE reset_attempts ADD COLUMN reason VARCHAR",
)


def _v3(conn: Connection) -> None:
    _run(conn, _V3)


MIGRATIONS: tuple[Migration, ...] = (
    Migration(1, "initial layout", _v1),
    Migration(2, "event run/seq and source, history indexes, manual isolation audit", _v2),
    Migration(3, "per-chip reset token buckets, reset attempt reasons", _v3),
)
CURRENT_VERSION = MIGRATIONS[-1].version


def schema_version(conn: Connection) -> int:
    """The file's version: 0 for a file without our tables (new), else the highest applied migration."""
    tables = {row.name for row in conn.exec_driver_sql("SELECT name FROM sqlite_master WHERE type = 'table'")}
    if "schema_version" not in tables:
        foreign = sorted(t for t in tables if not t.startswith("sqlite_"))
        if foreign:
            raise SchemaError(f"not a fault-manager database: it has tables {foreign} but no schema_version")
        return 0
    version = conn.exec_driver_sql("SELECT MAX(version) FROM schema_version").scalar()
    return int(version or 0)


def upgrade(write: Callable[[], AbstractContextManager[Connection]], now_ms: int) -> list[int]:
    """Apply the pending migrations in order, one write transaction each; returns the versions applied.

    `write()` must open a write transaction (BEGIN IMMEDIATE), so two processes opening the same
    old file cannot both migrate it: the second waits, re-reads the version and finds nothing to do.
    """
    applied: list[int] = []
    while True:
        with write() as conn:
            version = schema_version(conn)
            if version > CURRENT_VERSION:
                raise SchemaError(
                    f"schema version {version} is newer than this build supports ({CURRENT_VERSION}); "
                    "refusing to downgrade it"
                )
            if version == CURRENT_VERSION:
                return applied
            step = MIGRATIONS[version]  # versions are 1..N without gaps: the next one is at index `version`
            step.apply(conn)
            conn.exec_driver_sql(
                "INSERT INTO schema_version (version, name, applied_ms) VALUES (?, ?, ?)",
                (step.version, step.name, now_ms),
            )
            applied.append(step.version)
