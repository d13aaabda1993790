"""Each fault policy the engine was offered, accepted or not; the last accepted one is reloaded at start."""

from __future__ import annotations

from sqlalchemy import insert
from sqlmodel import select

from .database import Database, detached
from .models import PolicyRow, columns_of

_P = columns_of(PolicyRow)


class PolicyVersions:
    def __init__(self, db: Database) -> None:
        self._db = db

    def save(
        self,
        source: str,
        digest: str,
        content_json: str,
        accepted: bool,
        error: str | None = None,
        saved_ms: int | None = None,
    ) -> int:
        """Record a policy offered to the engine; the same digest and verdict as the latest row reuses it."""
        with self._db.write("saving a policy") as conn:
            latest = conn.execute(
                select(_P.id, _P.source, _P.digest, _P.accepted).order_by(_P.id.desc()).limit(1)
            ).first()
            # The ConfigMap is re-read on every watch event and resync: do not store it again.
            offered = (source, digest, accepted)
            if latest is not None and (latest.source, latest.digest, bool(latest.accepted)) == offered:
                return int(latest.id)
            result = conn.execute(
                insert(PolicyRow),
                {
                    "source": source,
                    "digest": digest,
                    "content_json": content_json,
                    "accepted": accepted,
                    "error": error,
                    "saved_ms": self._db.wall_ms() if saved_ms is None else int(saved_ms),
                },
            )
            key = result.inserted_primary_key
            assert key is not None
            return int(key.id)

    def last_good(self) -> PolicyRow | None:
        stmt = select(PolicyRow).where(_P.accepted.is_(True)).order_by(_P.id.desc()).limit(1)
        with self._db.read("reading the last good policy") as conn:
            rows = detached(conn, stmt)
        return rows[0] if rows else None

    def recent(self, limit: int = 20) -> list[PolicyRow]:
        stmt = select(PolicyRow).order_by(_P.id.desc()).limit(limit)
        with self._db.read("reading policy versions") as conn:
            return detached(conn, stmt)
