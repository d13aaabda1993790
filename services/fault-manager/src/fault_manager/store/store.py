"""The fault-manager's durable state: one SQLite file on a hostPath, so a restart loses nothing.

Synchronous and thread-safe: the async engine calls it through `asyncio.to_thread`. Reads run in
parallel on pooled connections (WAL: readers never wait for the writer); writes are serialised by
one in-process lock and open with BEGIN IMMEDIATE, so a transaction never has to upgrade a read
lock (which fails at once with SQLITE_BUSY instead of waiting) and another process sharing the
file (a second replica during a rollout, an operator's sqlite3 shell) is waited for up to the
busy timeout. Every database failure surfaces as `StoreError` naming the file.
"""

from __future__ import annotations

import json
import logging
import sqlite3
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, cast

from ascend_common.faults import is_plain_hex
from sqlalchemy import Connection, Engine, create_engine, delete, event, func, insert, select, tuple_, update
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.engine import URL
from sqlalchemy.exc import DBAPIError, SQLAlchemyError
from sqlalchemy.orm import Mapped
from sqlalchemy.pool import QueuePool
from sqlmodel import col

from ..reset_tokens import TOKEN_REFILL_INTERVAL_MS, TokenBucket, consume_token, tokens_left
from . import migrations
from .models import (
    ASSERTIONS,
    RESET_OUTCOMES,
    SOURCES,
    ChipState,
    ChipStateRow,
    Escalation,
    EscalationRow,
    FaultEvent,
    FaultEventLike,
    FaultEventRow,
    ManualAudit,
    ManualAuditRow,
    ManualChip,
    PolicyRow,
    PolicyVersion,
    PruneResult,
    ResetAttempt,
    ResetAttemptChip,
    ResetAttemptRow,
    ResetBucket,
    table,
)

log = logging.getLogger(__name__)

MAX_PAGE = 10_000  # one history page; keeps a single call's memory bounded

_BEGIN_OPTION = "fm_begin"  # execution option carrying the BEGIN flavour to the "begin" hook

_EVENTS = table(FaultEvent)
_CHIP_STATES = table(ChipState)
_ESCALATIONS = table(Escalation)
_MANUAL = table(ManualChip)
_AUDIT = table(ManualAudit)
_RESETS = table(ResetAttempt)
_RESET_CHIPS = table(ResetAttemptChip)
_BUCKETS = table(ResetBucket)
_POLICIES = table(PolicyVersion)


def _pk(column: Mapped[int | None]) -> Mapped[int]:
    # The models' primary keys are `int | None` only until a row is inserted; a stored row has one.
    return cast("Mapped[int]", column)


_escalation_id = _pk(col(Escalation.id))
_audit_id = _pk(col(ManualAudit.id))
_reset_id = _pk(col(ResetAttempt.id))
_policy_id = _pk(col(PolicyVersion.id))

# Columns in FaultEventRow field order, so a result row maps positionally onto the dataclass.
_EVENT_COLUMNS = (
    col(FaultEvent.event_id),
    col(FaultEvent.chip),
    col(FaultEvent.logic_id),
    col(FaultEvent.phy_id),
    col(FaultEvent.code),
    col(FaultEvent.assertion),
    col(FaultEvent.severity),
    col(FaultEvent.source),
    col(FaultEvent.raised_at_ms),
    col(FaultEvent.recorded_at_ms),
    col(FaultEvent.id),
)
_ESCALATION_COLUMNS = (
    _escalation_id,
    col(Escalation.chip),
    col(Escalation.code),
    col(Escalation.level),
    col(Escalation.upgrade_type),
    col(Escalation.upgrade_time_ms),
    col(Escalation.released_at_ms),
    col(Escalation.release_reason),
)
_POLICY_COLUMNS = (
    _policy_id,
    col(PolicyVersion.source),
    col(PolicyVersion.digest),
    col(PolicyVersion.content_json),
    col(PolicyVersion.accepted),
    col(PolicyVersion.error),
    col(PolicyVersion.saved_ms),
)

# A chip list straight from the (chip, ...) index: one seek per distinct chip instead of a scan of
# every event (SQLite has no skip-scan without ANALYZE statistics).
_DISTINCT_EVENT_CHIPS = """
    WITH RECURSIVE c(chip) AS (
        SELECT MIN(chip) FROM fault_events
        UNION ALL
        SELECT (SELECT MIN(chip) FROM fault_events WHERE chip > c.chip) FROM c WHERE c.chip IS NOT NULL
    )
    SELECT chip FROM c WHERE chip IS NOT NULL"""


class StoreError(Exception):
    """The database cannot be used: not SQLite, corrupt, locked too long, too new, or closed."""

    def __init__(self, path: Path, message: str) -> None:
        super().__init__(f"fault store {path}: {message}")
        self.path = path


def _stored_code(code: str) -> str:
    """Hex codes upper-case (so one code is one row, however spelt); a literal such as the reference's
    "AutofillFaultCode" as it is."""
    return code.upper() if is_plain_hex(code) else code


def _wall_ms() -> int:
    return time.time_ns() // 1_000_000


def _describe(exc: BaseException) -> str:
    orig = exc.orig if isinstance(exc, DBAPIError) else exc
    text = str(orig).strip() or type(orig).__name__
    if "locked" in text or "busy" in text:
        text += " (another connection or process holds the write lock longer than the busy timeout)"
    return text


class Store:
    """Fault events, chip verdicts, escalations, manual isolation, resets and policies in SQLite."""

    def __init__(
        self,
        path: Path,
        *,
        busy_timeout_s: float = 5.0,
        wall_ms: Callable[[], int] = _wall_ms,
        pool_size: int = 4,
    ) -> None:
        self.path = Path(path)
        self._wall_ms = wall_ms
        self._busy_ms = max(0, int(busy_timeout_s * 1000))
        self._write_lock = threading.Lock()
        self._closed = False
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise StoreError(self.path, f"cannot create its directory: {exc}") from exc
        self._engine = self._make_engine(pool_size)
        try:
            with self._errors("opening"):
                applied = migrations.upgrade(self._write, self._wall_ms())
        except BaseException:
            self._engine.dispose()
            raise
        if applied:
            log.info("fault store migrated", extra={"path": str(self.path), "versions": applied})

    # --- plumbing ------------------------------------------------------------------------------

    def _make_engine(self, pool_size: int) -> Engine:
        engine = create_engine(
            URL.create("sqlite", database=str(self.path)),
            # Connections move between the to_thread workers; each is used by one thread at a time.
            connect_args={"check_same_thread": False},
            poolclass=QueuePool,
            pool_size=pool_size,
            max_overflow=pool_size,
        )
        busy_ms = self._busy_ms

        @event.listens_for(engine, "connect")
        def _on_connect(dbapi_conn: sqlite3.Connection, _record: Any) -> None:
            # Let SQLAlchemy's "begin" hook below decide how transactions start (the driver's own
            # implicit BEGIN is always DEFERRED and would skip the pragmas' autocommit needs).
            dbapi_conn.isolation_level = None
            cur = dbapi_conn.cursor()
            try:
                cur.execute(f"PRAGMA busy_timeout = {busy_ms}")
                cur.execute("PRAGMA foreign_keys = ON")  # reset_attempt_chips cascade with their attempt
                # WAL: readers never block the writer; NORMAL: durable at each checkpoint, never
                # corrupt, and no fsync per commit (a power loss may drop the last commits only).
                mode = cur.execute("PRAGMA journal_mode = WAL").fetchone()
                cur.execute("PRAGMA synchronous = NORMAL")
                # Bound the WAL file left after a checkpoint (hostPath disks are often small).
                cur.execute("PRAGMA journal_size_limit = 67108864")
            finally:
                cur.close()
            if mode is None or str(mode[0]).lower() != "wal":
                log.warning("fault store not in WAL mode", extra={"path": str(self.path), "mode": mode})

        @event.listens_for(engine, "begin")
        def _on_begin(conn: Connection) -> None:
            conn.exec_driver_sql(conn.get_execution_options().get(_BEGIN_OPTION, "BEGIN"))

        return engine

    @contextmanager
    def _errors(self, what: str) -> Iterator[None]:
        try:
            yield
        except migrations.SchemaError as exc:
            raise StoreError(self.path, f"{what}: {exc}") from exc
        except (SQLAlchemyError, sqlite3.Error) as exc:
            raise StoreError(self.path, f"{what}: {_describe(exc)}") from exc

    def _check_open(self) -> None:
        if self._closed:
            raise StoreError(self.path, "the store is closed")

    @contextmanager
    def _write(self) -> Iterator[Connection]:
        """One write transaction (BEGIN IMMEDIATE), committed on success, rolled back on error."""
        self._check_open()
        with self._write_lock, self._engine.connect() as conn:
            conn.execution_options(**{_BEGIN_OPTION: "BEGIN IMMEDIATE"})
            with conn.begin():
                yield conn

    @contextmanager
    def _read(self, what: str) -> Iterator[Connection]:
        """A read transaction: every query inside sees one snapshot of the file."""
        self._check_open()
        with self._errors(what), self._engine.connect() as conn:
            yield conn

    @contextmanager
    def _writing(self, what: str) -> Iterator[Connection]:
        with self._errors(what), self._write() as conn:
            yield conn

    def close(self) -> None:
        """Close every pooled connection; the last close checkpoints the WAL into the file."""
        if self._closed:
            return
        self._closed = True
        self._engine.dispose()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    def schema_version(self) -> int:
        with self._read("reading the schema version") as conn:
            return migrations.schema_version(conn)

    # --- fault events --------------------------------------------------------------------------

    @staticmethod
    def _event_params(e: FaultEventLike) -> dict[str, Any]:
        if e.source == "reconcile":
            # Made by a reconcile, not sent by the exporter (`<anchor>-r-<chip>-<code>-<kind>`):
            # in no run, so that resuming a run never starts from one.
            parts: tuple[str, int] | None = ("", 0)
        else:
            parts = migrations.split_event_id(e.event_id)
        if parts is None:
            raise ValueError(f"event id {e.event_id!r} is not <run>-<seq>")
        if e.assertion not in ASSERTIONS:
            raise ValueError(f"event {e.event_id}: assertion {e.assertion!r} not in {sorted(ASSERTIONS)}")
        if e.source not in SOURCES:
            raise ValueError(f"event {e.event_id}: source {e.source!r} not in {sorted(SOURCES)}")
        if not e.chip or not e.code:
            raise ValueError(f"event {e.event_id}: chip and code are required")
        return {
            "event_id": e.event_id,
            "run_id": parts[0],
            "seq": parts[1],
            "chip": e.chip,
            "logic_id": int(e.logic_id),
            "phy_id": int(e.phy_id),
            # Codes are matched as strings; the contract writes them upper-case.
            "code": e.code.upper(),
            "assertion": str(e.assertion),
            "severity": None if e.severity is None else int(e.severity),
            "source": str(e.source),
            "raised_at_ms": int(e.raised_at_ms),
            "recorded_at_ms": int(e.recorded_at_ms),
        }

    def append_events(self, events: Sequence[FaultEventLike]) -> int:
        """Store a batch in one transaction; an event id already stored is skipped. Returns how many were new.

        The whole batch is validated first: a malformed event raises ValueError and nothing is written.
        """
        if not events:
            return 0
        params = [self._event_params(e) for e in events]
        with self._writing("appending events") as conn:
            # total_changes() counts rows this connection inserted; INSERT OR IGNORE skips are not
            # counted, and the executemany rowcount is not reliable across drivers.
            before = conn.exec_driver_sql("SELECT total_changes()").scalar_one()
            conn.execute(insert(_EVENTS).prefix_with("OR IGNORE"), params)
            after = conn.exec_driver_sql("SELECT total_changes()").scalar_one()
        return int(after) - int(before)

    def count_events(self, chip: str | None = None) -> int:
        stmt = select(func.count()).select_from(_EVENTS)
        if chip is not None:
            stmt = stmt.where(col(FaultEvent.chip) == chip)
        with self._read("counting events") as conn:
            return int(conn.execute(stmt).scalar_one())

    def last_event_id(self, run_id: str | None = None) -> str | None:
        """The id of the highest seq stored for `run_id` (resume with Last-Event-ID); None: nothing stored.

        Without a run id: the event stored last, whatever its run.
        """
        if run_id is None:
            stmt = select(col(FaultEvent.event_id)).order_by(col(FaultEvent.id).desc()).limit(1)
        else:
            stmt = (
                select(col(FaultEvent.event_id))
                .where(col(FaultEvent.run_id) == run_id)
                .order_by(col(FaultEvent.seq).desc())
                .limit(1)
            )
        with self._read("reading the last event id") as conn:
            return conn.execute(stmt).scalar_one_or_none()

    def history(
        self,
        chip: str,
        since_ms: int | None = None,
        until_ms: int | None = None,
        limit: int = 100,
        before_id: int | None = None,
    ) -> list[FaultEventRow]:
        """A chip's events raised in [since_ms, until_ms] (both inclusive), newest first.

        Keyset pagination: pass the `id` of the last row of a page as `before_id` for the next
        one. A cursor row that is gone (pruned, oldest first) or not this chip's yields no rows.
        """
        if not 1 <= limit <= MAX_PAGE:
            raise ValueError(f"limit must be within 1..{MAX_PAGE}, got {limit}")
        raised, row_id = col(FaultEvent.raised_at_ms), col(FaultEvent.id)
        stmt = select(*_EVENT_COLUMNS).where(col(FaultEvent.chip) == chip)
        if since_ms is not None:
            stmt = stmt.where(raised >= since_ms)
        with self._read("reading history") as conn:
            if before_id is not None:
                cursor_ms = conn.execute(
                    select(raised).where(row_id == before_id, col(FaultEvent.chip) == chip)
                ).scalar_one_or_none()
                if cursor_ms is None:
                    return []
                # The plain upper bound lets the index range start at the cursor; the row-value
                # test then drops the cursor's own timestamp ties at or after it.
                until_ms = cursor_ms if until_ms is None else min(until_ms, cursor_ms)
                stmt = stmt.where(tuple_(raised, row_id) < tuple_(cursor_ms, before_id))
            if until_ms is not None:
                stmt = stmt.where(raised <= until_ms)
            rows = conn.execute(stmt.order_by(raised.desc(), row_id.desc()).limit(limit)).all()
        return [FaultEventRow(*row) for row in rows]

    def chip_history(self, chip: str, since_ms: int = 0) -> list[FaultEventRow]:
        """Every stored event of a chip since `since_ms`, oldest first (read in pages of MAX_PAGE)."""
        rows: list[FaultEventRow] = []
        before: int | None = None
        while True:
            page = self.history(chip, since_ms=since_ms, limit=MAX_PAGE, before_id=before)
            rows.extend(page)
            if len(page) < MAX_PAGE:
                break
            before = page[-1].id
        rows.reverse()
        return rows

    def events_since(self, chip: str, code: str, since_ms: int, limit: int | None = None) -> list[FaultEventRow]:
        """A chip's events of one code raised at or after `since_ms`, oldest first (the engine's timelines)."""
        raised = col(FaultEvent.raised_at_ms)
        stmt = (
            select(*_EVENT_COLUMNS)
            .where(col(FaultEvent.chip) == chip, col(FaultEvent.code) == code.upper(), raised >= since_ms)
            .order_by(raised, col(FaultEvent.id))
        )
        if limit is not None:
            stmt = stmt.limit(limit)
        with self._read("reading a timeline") as conn:
            rows = conn.execute(stmt).all()
        return [FaultEventRow(*row) for row in rows]

    # --- per-chip state ------------------------------------------------------------------------

    def save_chip_state(
        self,
        chip: str,
        level: str,
        schedulable: bool,
        reason: str,
        since_ms: int,
        codes: Any,
        updated_ms: int,
    ) -> None:
        """Upsert a chip's verdict; `codes` is any JSON value (stored compact with sorted keys)."""
        self.save_chip_states([ChipStateRow(chip, level, schedulable, reason, since_ms, _json(codes), updated_ms)])

    def save_chip_states(self, states: Iterable[ChipStateRow]) -> None:
        """Upsert many verdicts in one transaction (the engine saves a whole node at once)."""
        params = [
            {
                "chip": s.chip,
                "level": s.level,
                "schedulable": bool(s.schedulable),
                "reason": s.reason,
                "since_ms": int(s.since_ms),
                "codes_json": s.codes_json,
                "updated_ms": int(s.updated_ms),
            }
            for s in states
        ]
        if not params:
            return
        stmt = sqlite_insert(_CHIP_STATES)
        stmt = stmt.on_conflict_do_update(
            index_elements=[col(ChipState.chip)],
            set_={name: stmt.excluded[name] for name in params[0] if name != "chip"},
        )
        with self._writing("saving chip states") as conn:
            conn.execute(stmt, params)

    def chip_states(self) -> dict[str, ChipStateRow]:
        stmt = select(
            col(ChipState.chip),
            col(ChipState.level),
            col(ChipState.schedulable),
            col(ChipState.reason),
            col(ChipState.since_ms),
            col(ChipState.codes_json),
            col(ChipState.updated_ms),
        ).order_by(col(ChipState.chip))
        with self._read("reading chip states") as conn:
            rows = conn.execute(stmt).all()
        return {row[0]: ChipStateRow(*row) for row in rows}

    # --- escalations (UpgradeFaultReason) ------------------------------------------------------

    def add_escalation(self, chip: str, code: str, level: str, upgrade_type: str, upgrade_time_ms: int) -> int:
        """Record an escalation; while one for the same chip, code and type is active, return its id instead."""
        with self._writing("adding an escalation") as conn:
            return self._add_escalation(conn, chip, code, level, upgrade_type, upgrade_time_ms)

    @staticmethod
    def _add_escalation(
        conn: Connection, chip: str, code: str, level: str, upgrade_type: str, upgrade_time_ms: int
    ) -> int:
        code = _stored_code(code)
        conn.execute(
            insert(_ESCALATIONS).prefix_with("OR IGNORE"),
            {"chip": chip, "code": code, "level": level, "upgrade_type": upgrade_type,
             "upgrade_time_ms": int(upgrade_time_ms)},
        )  # fmt: skip
        # Either the row just inserted or the active one that made the insert a no-op.
        found = conn.execute(
            select(_escalation_id).where(
                col(Escalation.chip) == chip,
                col(Escalation.code) == code,
                col(Escalation.upgrade_type) == upgrade_type,
                col(Escalation.released_at_ms).is_(None),
            )
        ).scalar_one()
        return int(found)

    def adopt_isolations(self, adopted: Mapping[str, Sequence[tuple[str, str, str, int]]], by: str, at_ms: int) -> None:
        """Isolate every chip of `adopted` with its reasons (code, level, upgrade type, upgrade time ms),
        in one transaction: a crash half-way would leave chips whose reasons a restart cannot find."""
        with self._writing("adopting isolations") as conn:
            for chip, reasons in adopted.items():
                self._set_manual(conn, chip, True, by, at_ms)
                for code, level, upgrade_type, upgrade_time_ms in reasons:
                    self._add_escalation(conn, chip, code, level, upgrade_type, upgrade_time_ms)

    def escalations(self, active_only: bool = True, chip: str | None = None) -> list[EscalationRow]:
        """Escalations by chip, oldest first; released ones too unless `active_only`."""
        stmt = select(*_ESCALATION_COLUMNS)
        if active_only:
            stmt = stmt.where(col(Escalation.released_at_ms).is_(None))
        if chip is not None:
            stmt = stmt.where(col(Escalation.chip) == chip)
        stmt = stmt.order_by(col(Escalation.chip), col(Escalation.upgrade_time_ms), _escalation_id)
        with self._read("reading escalations") as conn:
            rows = conn.execute(stmt).all()
        return [EscalationRow(*row) for row in rows]

    def release_escalations(
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
            update(_ESCALATIONS)
            .where(col(Escalation.chip) == chip, col(Escalation.released_at_ms).is_(None))
            .values(released_at_ms=int(released_at_ms), release_reason=reason)
        )
        if code is not None:
            stmt = stmt.where(col(Escalation.code) == _stored_code(code))
        if upgrade_type is not None:
            stmt = stmt.where(col(Escalation.upgrade_type) == upgrade_type)
        if level is not None:
            stmt = stmt.where(col(Escalation.level) == level)
        with self._writing("releasing escalations") as conn:
            return int(conn.execute(stmt).rowcount)

    # --- manual isolation (ManuallySeparateNPU) ------------------------------------------------

    def set_manual(self, chip: str, on: bool, by: str, at_ms: int) -> bool:
        """Add or remove a chip from manual isolation; returns whether it changed (changes are audited)."""
        with self._writing("setting manual isolation") as conn:
            return self._set_manual(conn, chip, on, by, at_ms)

    @staticmethod
    def _set_manual(conn: Connection, chip: str, on: bool, by: str, at_ms: int) -> bool:
        present = (
            conn.execute(select(col(ManualChip.chip)).where(col(ManualChip.chip) == chip)).scalar_one_or_none()
            is not None
        )
        if present == on:
            return False  # no change: a periodic re-sync of the ConfigMap must not flood the audit
        if on:
            conn.execute(insert(_MANUAL), {"chip": chip, "set_by": by, "since_ms": int(at_ms)})
        else:
            conn.execute(delete(_MANUAL).where(col(ManualChip.chip) == chip))
        conn.execute(insert(_AUDIT), {"chip": chip, "separated": on, "set_by": by, "at_ms": int(at_ms)})
        return True

    def manual_chips(self) -> set[str]:
        with self._read("reading manual isolation") as conn:
            return set(conn.execute(select(col(ManualChip.chip))).scalars())

    def manual_audit(self, chip: str | None = None, limit: int = 100) -> list[ManualAuditRow]:
        """Changes of manual isolation, newest first."""
        stmt = select(
            _audit_id,
            col(ManualAudit.chip),
            col(ManualAudit.separated),
            col(ManualAudit.set_by),
            col(ManualAudit.at_ms),
        )
        if chip is not None:
            stmt = stmt.where(col(ManualAudit.chip) == chip)
        stmt = stmt.order_by(_audit_id.desc()).limit(limit)
        with self._read("reading the manual isolation audit") as conn:
            rows = conn.execute(stmt).all()
        return [ManualAuditRow(*row) for row in rows]

    # --- hot reset -----------------------------------------------------------------------------

    def record_reset_attempt(
        self, group: str, chips: Sequence[str], channel: str, started_ms: int, *, reason: str | None = None
    ) -> int:
        """Record a reset attempt starting at `started_ms`; `finish_reset_attempt` says how it ended."""
        with self._writing("recording a reset attempt") as conn:
            return self._insert_attempt(conn, group, chips, channel, started_ms, reason=reason)

    @staticmethod
    def _insert_attempt(
        conn: Connection,
        group: str,
        chips: Sequence[str],
        channel: str,
        started_ms: int,
        *,
        reason: str | None,
        outcome: str | None = None,
        finished_ms: int | None = None,
    ) -> int:
        result = conn.execute(
            insert(_RESETS),
            {
                "group_name": group,
                "channel": channel,
                "started_ms": int(started_ms),
                "outcome": outcome,
                "finished_ms": finished_ms,
                "reason": reason,
            },
        )
        attempt_id = result.inserted_primary_key
        assert attempt_id is not None
        new_id = int(attempt_id[0])
        unique_chips = sorted(set(chips))
        if unique_chips:
            conn.execute(insert(_RESET_CHIPS), [{"attempt_id": new_id, "chip": c} for c in unique_chips])
        return new_id

    def finish_reset_attempt(
        self,
        attempt_id: int,
        outcome: str,
        error_code: int | None,
        finished_ms: int,
        *,
        reason: str | None = None,
    ) -> bool:
        """Record how an attempt ended; False when no such attempt exists. A None reason keeps the recorded one."""
        if outcome not in RESET_OUTCOMES:
            raise ValueError(f"reset outcome {outcome!r} not in {sorted(RESET_OUTCOMES)}")
        values: dict[str, Any] = {"outcome": outcome, "error_code": error_code, "finished_ms": int(finished_ms)}
        if reason is not None:
            values["reason"] = reason
        stmt = update(_RESETS).where(_reset_id == attempt_id).values(**values)
        with self._writing("finishing a reset attempt") as conn:
            return int(conn.execute(stmt).rowcount) > 0

    def refuse_reset(self, group: str, chips: Sequence[str], channel: str, at_ms: int, reason: str) -> int:
        """Record a reset that was refused before it started (outcome "refused"), finished at once."""
        with self._writing("recording a refused reset") as conn:
            return self._insert_attempt(
                conn, group, chips, channel, at_ms, reason=reason, outcome="refused", finished_ms=int(at_ms)
            )

    def reset_attempts(self, limit: int = 100, chip: str | None = None) -> list[ResetAttemptRow]:
        """Reset attempts, newest first (only those involving `chip` when given)."""
        stmt = select(
            _reset_id,
            col(ResetAttempt.group_name),
            col(ResetAttempt.channel),
            col(ResetAttempt.started_ms),
            col(ResetAttempt.outcome),
            col(ResetAttempt.error_code),
            col(ResetAttempt.finished_ms),
            col(ResetAttempt.reason),
        )
        if chip is not None:
            stmt = stmt.where(
                _reset_id.in_(select(col(ResetAttemptChip.attempt_id)).where(col(ResetAttemptChip.chip) == chip))
            )
        stmt = stmt.order_by(_reset_id.desc()).limit(limit)
        with self._read("reading reset attempts") as conn:
            attempts = conn.execute(stmt).all()
            ids = [a[0] for a in attempts]
            chips: dict[int, list[str]] = {i: [] for i in ids}
            if ids:
                for attempt_id, name in conn.execute(
                    select(col(ResetAttemptChip.attempt_id), col(ResetAttemptChip.chip))
                    .where(col(ResetAttemptChip.attempt_id).in_(ids))
                    .order_by(col(ResetAttemptChip.attempt_id), col(ResetAttemptChip.chip))
                ):
                    chips[attempt_id].append(name)
        return [
            ResetAttemptRow(
                id=a[0],
                group_name=a[1],
                chips=tuple(chips[a[0]]),
                channel=a[2],
                started_ms=a[3],
                outcome=a[4],
                error_code=a[5],
                finished_ms=a[6],
                reason=a[7],
            )
            for a in attempts
        ]

    # --- hot-reset token buckets (fault_manager.reset_tokens) ----------------------------------

    @staticmethod
    def _bucket(conn: Connection, chip: str) -> TokenBucket | None:
        row = conn.execute(
            select(col(ResetBucket.tokens), col(ResetBucket.last_refill_ms)).where(col(ResetBucket.chip) == chip)
        ).first()
        return None if row is None else TokenBucket(int(row[0]), int(row[1]))

    def consume_reset_token(
        self, chip: str, logic_id: int, now_ms: int, *, interval_ms: int = TOKEN_REFILL_INTERVAL_MS
    ) -> bool:
        """Take one token of the faulty chip's bucket (created full on its first reset); False: none left.

        Read, rule and write in one write transaction, so two resets can never both take a chip's last token.
        """
        with self._writing("consuming a reset token") as conn:
            bucket, taken = consume_token(self._bucket(conn, chip), int(now_ms), interval_ms=interval_ms)
            stmt = sqlite_insert(_BUCKETS).values(
                chip=chip, logic_id=int(logic_id), tokens=bucket.tokens, last_refill_ms=bucket.last_refill_ms
            )
            conn.execute(
                stmt.on_conflict_do_update(
                    index_elements=[col(ResetBucket.chip)],
                    set_={name: stmt.excluded[name] for name in ("logic_id", "tokens", "last_refill_ms")},
                )
            )
        if taken:
            log.info("reset token consumed", extra={"chip": chip, "logic_id": logic_id, "tokens": bucket.tokens})
        return taken

    def reset_tokens(self, chip: str, now_ms: int, *, interval_ms: int = TOKEN_REFILL_INTERVAL_MS) -> int:
        """The tokens a chip has at `now_ms` (TOKEN_MAX_COUNT before its first reset). Reading writes nothing."""
        with self._read("reading reset tokens") as conn:
            return tokens_left(self._bucket(conn, chip), int(now_ms), interval_ms=interval_ms)

    def reset_buckets(self, now_ms: int, *, interval_ms: int = TOKEN_REFILL_INTERVAL_MS) -> dict[str, int]:
        """The tokens at `now_ms` of every chip that has a bucket, by chip; any other chip has TOKEN_MAX_COUNT."""
        stmt = select(col(ResetBucket.chip), col(ResetBucket.tokens), col(ResetBucket.last_refill_ms)).order_by(
            col(ResetBucket.chip)
        )
        with self._read("reading reset buckets") as conn:
            rows = conn.execute(stmt).all()
        return {
            chip: TokenBucket(int(tokens), int(last)).tokens_at(int(now_ms), interval_ms=interval_ms)
            for chip, tokens, last in rows
        }

    # --- fault policy versions -----------------------------------------------------------------

    def save_policy(
        self,
        source: str,
        digest: str,
        content_json: str,
        accepted: bool,
        error: str | None = None,
        saved_ms: int | None = None,
    ) -> int:
        """Record a policy offered to the engine; the same digest and verdict as the latest row reuses it."""
        with self._writing("saving a policy") as conn:
            latest = conn.execute(
                select(
                    _policy_id,
                    col(PolicyVersion.source),
                    col(PolicyVersion.digest),
                    col(PolicyVersion.accepted),
                )
                .order_by(_policy_id.desc())
                .limit(1)
            ).first()
            # The ConfigMap is re-read on every watch event and resync: do not store it again.
            if latest is not None and (latest[1], latest[2], bool(latest[3])) == (source, digest, accepted):
                return int(latest[0])
            result = conn.execute(
                insert(_POLICIES),
                {
                    "source": source,
                    "digest": digest,
                    "content_json": content_json,
                    "accepted": accepted,
                    "error": error,
                    "saved_ms": self._wall_ms() if saved_ms is None else int(saved_ms),
                },
            )
            key = result.inserted_primary_key
            assert key is not None
            return int(key[0])

    def last_good_policy(self) -> PolicyRow | None:
        stmt = (
            select(*_POLICY_COLUMNS).where(col(PolicyVersion.accepted).is_(True)).order_by(_policy_id.desc()).limit(1)
        )
        with self._read("reading the last good policy") as conn:
            row = conn.execute(stmt).first()
        return None if row is None else PolicyRow(*row)

    def policy_versions(self, limit: int = 20) -> list[PolicyRow]:
        stmt = select(*_POLICY_COLUMNS).order_by(_policy_id.desc()).limit(limit)
        with self._read("reading policy versions") as conn:
            rows = conn.execute(stmt).all()
        return [PolicyRow(*row) for row in rows]

    # --- retention -----------------------------------------------------------------------------

    def prune(
        self,
        older_than_ms: int,
        keep_min_per_chip: int = 1000,
        *,
        batch_size: int = 1000,
        time_budget_s: float | None = None,
    ) -> PruneResult:
        """Delete history older than `older_than_ms` in short transactions, oldest first.

        Events: each chip keeps at least its newest `keep_min_per_chip`. Escalations: only released
        ones go; active escalations are never pruned. Reset attempts: finished ones (with their
        chips). Reset token buckets are kept: one row per chip, and they are state, not history. Each batch
        commits on its own so appends interleave (a batch of 1,000 events held the write lock for
        10-25 ms on a 1,000,000-event file here); with a `time_budget_s` the call stops early and
        reports `complete=False` (call again later). Manual isolation audit and policy versions are
        kept: they are rare and are the audit trail.
        """
        if batch_size < 1 or keep_min_per_chip < 0:
            raise ValueError("batch_size must be >= 1 and keep_min_per_chip >= 0")
        deadline = None if time_budget_s is None else time.monotonic() + time_budget_s
        counts = {"events": 0, "escalations": 0, "reset_attempts": 0}

        def out_of_time() -> bool:
            return deadline is not None and time.monotonic() >= deadline

        raised, row_id, chip_col = col(FaultEvent.raised_at_ms), col(FaultEvent.id), col(FaultEvent.chip)
        with self._read("listing chips to prune") as conn:
            chips = [row[0] for row in conn.exec_driver_sql(_DISTINCT_EVENT_CHIPS)]
        for chip in chips:
            with self._read("finding the prune boundary") as conn:
                boundary = None
                if keep_min_per_chip > 0:
                    boundary = conn.execute(
                        select(raised, row_id)
                        .where(chip_col == chip)
                        .order_by(raised.desc(), row_id.desc())
                        .offset(keep_min_per_chip - 1)
                        .limit(1)
                    ).first()
                    if boundary is None:
                        continue  # fewer events than the minimum kept
            victims = select(row_id).where(chip_col == chip, raised < older_than_ms)
            if boundary is not None:
                victims = victims.where(tuple_(raised, row_id) < tuple_(boundary[0], boundary[1]))
            victims = victims.order_by(raised, row_id).limit(batch_size)
            while True:
                if out_of_time():
                    return PruneResult(**counts, complete=False)
                with self._writing("pruning events") as conn:
                    deleted = int(conn.execute(delete(_EVENTS).where(row_id.in_(victims))).rowcount)
                counts["events"] += deleted
                if deleted < batch_size:
                    break
        if out_of_time():
            return PruneResult(**counts, complete=False)
        with self._writing("pruning escalations and resets") as conn:
            counts["escalations"] = int(
                conn.execute(
                    delete(_ESCALATIONS).where(
                        col(Escalation.released_at_ms).is_not(None), col(Escalation.released_at_ms) < older_than_ms
                    )
                ).rowcount
            )
            counts["reset_attempts"] = int(
                conn.execute(
                    delete(_RESETS).where(
                        col(ResetAttempt.finished_ms).is_not(None), col(ResetAttempt.finished_ms) < older_than_ms
                    )
                ).rowcount
            )
        return PruneResult(**counts, complete=True)


def _json(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"))
