"""The one SQLite file (WAL) every repository of the store works on: connections, transactions, errors.

Synchronous and thread-safe: the async engine calls the repositories through `door.in_store_thread`.
Reads run in parallel on pooled connections (WAL: readers never wait for the writer); writes are
serialised by one in-process lock and open with BEGIN IMMEDIATE, so a transaction never has to
upgrade a read lock (which fails at once with SQLITE_BUSY instead of waiting) and another process
sharing the file (a second replica during a rollout, an operator's sqlite3 shell) is waited for up
to the busy timeout. Every database failure surfaces as `StoreError` naming the file.
"""

from __future__ import annotations

import logging
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

from sqlalchemy import Connection, Engine, create_engine, event
from sqlalchemy.engine import URL
from sqlalchemy.exc import DBAPIError, SQLAlchemyError
from sqlalchemy.pool import QueuePool
from sqlmodel import Session, SQLModel
from sqlmodel.sql.expression import SelectOfScalar

from . import migrations

log = logging.getLogger(__name__)
_M = TypeVar("_M", bound=SQLModel)

_BEGIN_OPTION = "fm_begin"  # execution option carrying the BEGIN flavour to the "begin" hook


class StoreError(Exception):
    """The database cannot be used: not SQLite, corrupt, locked too long, too new, or closed."""

    def __init__(self, path: Path, message: str) -> None:
        super().__init__(f"fault store {path}: {message}")
        self.path = path


def wall_clock_ms() -> int:
    return time.time_ns() // 1_000_000


def _describe(exc: BaseException) -> str:
    orig = exc.orig if isinstance(exc, DBAPIError) else exc
    text = str(orig).strip() or type(orig).__name__
    if "locked" in text or "busy" in text:
        text += " (another connection or process holds the write lock longer than the busy timeout)"
    return text


def detached(conn: Connection, stmt: SelectOfScalar[_M]) -> list[_M]:
    """The table instances `stmt` selects, loaded in a session on `conn` that is closed before they
    are returned: detached, every column loaded, nothing left to lazy-load, so they can cross to the
    event loop's thread. The session joins the connection's transaction (begun here if no query
    began it yet) rather than owning one, so every query of a `Database.read` sees one snapshot."""
    if not conn.in_transaction():
        conn.begin()  # as a Core query's autobegin would; ended with the connection
    with Session(conn) as session:
        return list(session.exec(stmt).all())


class Database:
    """The file, opened and migrated to the current schema; `read` and `write` hand out transactions."""

    def __init__(
        self,
        path: Path,
        *,
        busy_timeout_s: float = 5.0,
        wall_ms: Callable[[], int] = wall_clock_ms,
        pool_size: int = 4,
    ) -> None:
        self.path = Path(path)
        self.wall_ms = wall_ms  # stamps migrations and policy versions saved without a time
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
                applied = migrations.upgrade(self._transaction, self.wall_ms())
        except BaseException:
            self._engine.dispose()
            raise
        if applied:
            log.info("fault store migrated", extra={"path": str(self.path), "versions": applied})

    def _make_engine(self, pool_size: int) -> Engine:
        engine = create_engine(
            URL.create("sqlite", database=str(self.path)),
            # Connections move between the door's worker threads; each is used by one thread at a time.
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
    def _transaction(self) -> Iterator[Connection]:
        """One write transaction (BEGIN IMMEDIATE), committed on success, rolled back on error."""
        self._check_open()
        with self._write_lock, self._engine.connect() as conn:
            conn.execution_options(**{_BEGIN_OPTION: "BEGIN IMMEDIATE"})
            with conn.begin():
                yield conn

    @contextmanager
    def read(self, what: str) -> Iterator[Connection]:
        """A read transaction: every query inside sees one snapshot of the file. `what` names it in errors."""
        self._check_open()
        with self._errors(what), self._engine.connect() as conn:
            yield conn

    @contextmanager
    def write(self, what: str) -> Iterator[Connection]:
        """A write transaction, the only one at a time in this process. `what` names it in errors."""
        with self._errors(what), self._transaction() as conn:
            yield conn

    def close(self) -> None:
        """Close every pooled connection; the last close checkpoints the WAL into the file."""
        if self._closed:
            return
        self._closed = True
        self._engine.dispose()

    def schema_version(self) -> int:
        with self.read("reading the schema version") as conn:
            return migrations.schema_version(conn)
