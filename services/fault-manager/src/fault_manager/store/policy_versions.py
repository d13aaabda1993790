"""Each fault policy the engine was offered, accepted or not; the last accepted one is reloaded at start."""

from __future__ import annotations

from sqlalchemy import insert, select

from .database import Database
from .models import POLICY_VERSIONS, PolicyRow

_P = POLICY_VERSIONS.c
_ROW = (_P.id, _P.source, _P.digest, _P.content_json, _P.accepted, _P.error, _P.saved_ms)


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
            if latest is not None and (latest[1], latest[2], bool(latest[3])) == (source, digest, accepted):
                return int(latest[0])
            result = conn.execute(
                insert(POLICY_VERSIONS),
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
            return int(key[0])

    def last_good(self) -> PolicyRow | None:
        stmt = select(*_ROW).where(_P.accepted.is_(True)).order_by(_P.id.desc()).limit(1)
        with self._db.read("reading the last good policy") as conn:
            row = conn.execute(stmt).first()
        return None if row is None else PolicyRow(*row)

    def recent(self, limit: int = 20) -> list[PolicyRow]:
        stmt = select(*_ROW).order_by(_P.id.desc()).limit(limit)
        with self._db.read("reading policy versions") as conn:
            rows = conn.execute(stmt).all()
        return [PolicyRow(*row) for row in rows]
