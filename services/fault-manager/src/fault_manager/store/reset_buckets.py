"""Each faulty chip's hot-reset token bucket, as stored; the rule that spends and refills them is hot
reset's (fault_manager.hotreset.token_bucket, fault_manager.hotreset.stored_tokens), a layer above, which
turns a StoredBucket into its own TokenBucket."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple, TypeVar

from sqlalchemy import Connection, Row, select
from sqlalchemy.dialects.sqlite import insert

from .database import Database
from .models import ResetBucketRow, columns_of

# Handed out as a plain value (StoredBucket), so read through Core on ResetBucketRow's columns.
_B = columns_of(ResetBucketRow)
_T = TypeVar("_T")


class StoredBucket(NamedTuple):
    tokens: int
    last_refill_ms: int


def _token_bucket(row: Row[*tuple[Any, ...]]) -> StoredBucket:
    return StoredBucket(tokens=int(row.tokens), last_refill_ms=int(row.last_refill_ms))


def _bucket(conn: Connection, chip: str) -> StoredBucket | None:
    row = conn.execute(select(_B.tokens, _B.last_refill_ms).where(_B.chip == chip)).first()
    return None if row is None else _token_bucket(row)


class ResetBuckets:
    def __init__(self, db: Database) -> None:
        self._db = db

    def get(self, chip: str) -> StoredBucket | None:
        """The chip's bucket; None before its first reset."""
        with self._db.read("reading reset tokens") as conn:
            return _bucket(conn, chip)

    def all(self) -> dict[str, StoredBucket]:
        """Every chip's bucket, by chip."""
        stmt = select(_B.chip, _B.tokens, _B.last_refill_ms).order_by(_B.chip)
        with self._db.read("reading reset buckets") as conn:
            rows = conn.execute(stmt).all()
        return {row.chip: _token_bucket(row) for row in rows}

    def update(
        self, chip: str, logic_id: int, change: Callable[[StoredBucket | None], tuple[StoredBucket, _T]]
    ) -> tuple[StoredBucket, _T]:
        """Store `change(the chip's bucket)` with the chip's latest logic id; returns what `change` returned.

        Read, change and write in one write transaction, so two resets can never both take a chip's last token.
        """
        with self._db.write("consuming a reset token") as conn:
            bucket, result = change(_bucket(conn, chip))
            stmt = insert(ResetBucketRow).values(
                chip=chip, logic_id=int(logic_id), tokens=bucket.tokens, last_refill_ms=bucket.last_refill_ms
            )
            conn.execute(
                stmt.on_conflict_do_update(
                    index_elements=[_B.chip],
                    set_={name: stmt.excluded[name] for name in ("logic_id", "tokens", "last_refill_ms")},
                )
            )
        return bucket, result
