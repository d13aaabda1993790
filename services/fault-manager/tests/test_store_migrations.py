"""Schema versions of the store: a fresh file matches the SQLModel tables; older files upgrade in place."""

from __future__ import annotations

import sqlite3
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fault_manager.hotreset import stored_tokens
from fault_manager.store import CURRENT_VERSION, FaultEventRow, Store, StoreError
from sqlalchemy import create_engine
from sqlmodel import SQLModel

# The v1 layout exactly as that version wrote it. Frozen here on purpose, independent of
# migrations.py: if a migration is edited after release, this file still is what is on disks.
V1_SCHEMA = """
CREATE TABLE schema_version (version INTEGER NOT NULL PRIMARY KEY, name VARCHAR NOT NULL, applied_ms INTEGER NOT NULL);
CREATE TABLE fault_events (
    id INTEGER NOT NULL PRIMARY KEY, event_id VARCHAR NOT NULL UNIQUE, chip VARCHAR NOT NULL,
    logic_id INTEGER NOT NULL, phy_id INTEGER NOT NULL, code VARCHAR NOT NULL, assertion VARCHAR NOT NULL,
    severity INTEGER, raised_at_ms INTEGER NOT NULL, recorded_at_ms INTEGER NOT NULL);
CREATE INDEX ix_fault_events_chip ON fault_events (chip, raised_at_ms);
CREATE TABLE chip_states (
    chip VARCHAR NOT NULL PRIMARY KEY, level VARCHAR NOT NULL, schedulable BOOLEAN NOT NULL,
    reason VARCHAR NOT NULL, since_ms INTEGER NOT NULL, codes_json VARCHAR NOT NULL, updated_ms INTEGER NOT NULL);
CREATE TABLE escalations (
    id INTEGER NOT NULL PRIMARY KEY, chip VARCHAR NOT NULL, code VARCHAR NOT NULL, level VARCHAR NOT NULL,
    upgrade_type VARCHAR NOT NULL, upgrade_time_ms INTEGER NOT NULL, released_at_ms INTEGER, release_reason VARCHAR);
CREATE UNIQUE INDEX ux_escalations_active ON escalations (chip, code, upgrade_type) WHERE released_at_ms IS NULL;
CREATE INDEX ix_escalations_chip_time ON escalations (chip, upgrade_time_ms);
CREATE INDEX ix_escalations_released ON escalations (released_at_ms);
CREATE TABLE manual_chips (chip VARCHAR NOT NULL PRIMARY KEY, set_by VARCHAR NOT NULL, since_ms INTEGER NOT NULL);
CREATE TABLE reset_attempts (
    id INTEGER NOT NULL PRIMARY KEY, group_name VARCHAR NOT NULL, channel VARCHAR NOT NULL,
    started_ms INTEGER NOT NULL, outcome VARCHAR, error_code INTEGER, finished_ms INTEGER);
CREATE INDEX ix_reset_attempts_finished ON reset_attempts (finished_ms);
CREATE TABLE reset_attempt_chips (
    attempt_id INTEGER NOT NULL, chip VARCHAR NOT NULL, PRIMARY KEY (attempt_id, chip),
    FOREIGN KEY (attempt_id) REFERENCES reset_attempts (id) ON DELETE CASCADE);
CREATE INDEX ix_reset_attempt_chips_chip ON reset_attempt_chips (chip, attempt_id);
CREATE TABLE reset_tokens (id INTEGER NOT NULL PRIMARY KEY, chip VARCHAR NOT NULL, taken_ms INTEGER NOT NULL);
CREATE INDEX ix_reset_tokens_chip_time ON reset_tokens (chip, taken_ms);
CREATE INDEX ix_reset_tokens_time ON reset_tokens (taken_ms);
CREATE TABLE policy_versions (
    id INTEGER NOT NULL PRIMARY KEY, source VARCHAR NOT NULL, digest VARCHAR NOT NULL,
    content_json VARCHAR NOT NULL, accepted BOOLEAN NOT NULL, error VARCHAR, saved_ms INTEGER NOT NULL);
CREATE INDEX ix_policy_versions_accepted ON policy_versions (accepted, id);
INSERT INTO schema_version VALUES (1, 'initial layout', 1000);
"""

V1_DATA = """
INSERT INTO fault_events VALUES (1, '65f0a1b2c3-d4-7', 'Ascend910-3', 3, 3, '80E01801', 'occur', 2, 5000, 5001);
INSERT INTO fault_events VALUES (2, '65f0a1b2c3-d4-12', 'Ascend910-3', 3, 3, '81078603', 'occur', NULL, 6000, 6001);
INSERT INTO fault_events VALUES (3, '65f0a1b2c3-d4-9', 'Ascend910-3', 3, 3, '80E01801', 'recover', 2, 7000, 7001);
INSERT INTO fault_events VALUES (4, 'older-run-3', 'Ascend910-0', 0, 0, '8C1FA006', 'once', 3, 4000, 4001);
INSERT INTO chip_states VALUES ('Ascend910-3', 'PreSeparateNPU', 0, 'link down > 20 s', 6000, '["81078603"]', 6500);
INSERT INTO escalations VALUES (1, 'Ascend910-3', '81078603', 'PreSeparateNPU', 'FaultDuration', 26000, NULL, NULL);
INSERT INTO manual_chips VALUES ('Ascend910-5', 'configmap', 3000);
INSERT INTO reset_attempts VALUES (1, 'ring-0', 'inband', 100, 'succeeded', NULL, 900);
INSERT INTO reset_attempt_chips VALUES (1, 'Ascend910-0'), (1, 'Ascend910-1');
INSERT INTO reset_tokens VALUES (1, 'Ascend910-0', 100);
INSERT INTO policy_versions VALUES (1, 'configmap', 'abc', '{}', 1, NULL, 50);
"""


# The v2 layout as that version wrote it (tests/upgrade/release-2.db holds the same, written by that release).
V2_SCHEMA = """
CREATE TABLE schema_version (version INTEGER NOT NULL PRIMARY KEY, name VARCHAR NOT NULL, applied_ms INTEGER NOT NULL);
CREATE TABLE chip_states (
    chip VARCHAR NOT NULL PRIMARY KEY, level VARCHAR NOT NULL, schedulable BOOLEAN NOT NULL,
    reason VARCHAR NOT NULL, since_ms INTEGER NOT NULL, codes_json VARCHAR NOT NULL, updated_ms INTEGER NOT NULL);
CREATE TABLE escalations (
    id INTEGER NOT NULL PRIMARY KEY, chip VARCHAR NOT NULL, code VARCHAR NOT NULL, level VARCHAR NOT NULL,
    upgrade_type VARCHAR NOT NULL, upgrade_time_ms INTEGER NOT NULL, released_at_ms INTEGER, release_reason VARCHAR);
CREATE UNIQUE INDEX ux_escalations_active ON escalations (chip, code, upgrade_type) WHERE released_at_ms IS NULL;
CREATE INDEX ix_escalations_chip_time ON escalations (chip, upgrade_time_ms);
CREATE INDEX ix_escalations_released ON escalations (released_at_ms);
CREATE TABLE manual_chips (chip VARCHAR NOT NULL PRIMARY KEY, set_by VARCHAR NOT NULL, since_ms INTEGER NOT NULL);
CREATE TABLE reset_attempts (
    id INTEGER NOT NULL PRIMARY KEY, group_name VARCHAR NOT NULL, channel VARCHAR NOT NULL,
    started_ms INTEGER NOT NULL, outcome VARCHAR, error_code INTEGER, finished_ms INTEGER);
CREATE INDEX ix_reset_attempts_finished ON reset_attempts (finished_ms);
CREATE TABLE reset_attempt_chips (
    attempt_id INTEGER NOT NULL, chip VARCHAR NOT NULL, PRIMARY KEY (attempt_id, chip),
    FOREIGN KEY (attempt_id) REFERENCES reset_attempts (id) ON DELETE CASCADE);
CREATE INDEX ix_reset_attempt_chips_chip ON reset_attempt_chips (chip, attempt_id);
CREATE TABLE reset_tokens (id INTEGER NOT NULL PRIMARY KEY, chip VARCHAR NOT NULL, taken_ms INTEGER NOT NULL);
CREATE INDEX ix_reset_tokens_chip_time ON reset_tokens (chip, taken_ms);
CREATE INDEX ix_reset_tokens_time ON reset_tokens (taken_ms);
CREATE TABLE policy_versions (
    id INTEGER NOT NULL PRIMARY KEY, source VARCHAR NOT NULL, digest VARCHAR NOT NULL,
    content_json VARCHAR NOT NULL, accepted BOOLEAN NOT NULL, error VARCHAR, saved_ms INTEGER NOT NULL);
CREATE INDEX ix_policy_versions_accepted ON policy_versions (accepted, id);
CREATE TABLE fault_events (
    id INTEGER NOT NULL PRIMARY KEY, event_id VARCHAR NOT NULL UNIQUE, run_id VARCHAR NOT NULL, seq INTEGER NOT NULL,
    chip VARCHAR NOT NULL, logic_id INTEGER NOT NULL, phy_id INTEGER NOT NULL, code VARCHAR NOT NULL,
    assertion VARCHAR NOT NULL, severity INTEGER, source VARCHAR NOT NULL, raised_at_ms INTEGER NOT NULL,
    recorded_at_ms INTEGER NOT NULL);
CREATE INDEX ix_fault_events_chip_time ON fault_events (chip, raised_at_ms, id);
CREATE INDEX ix_fault_events_chip_code_time ON fault_events (chip, code, raised_at_ms);
CREATE INDEX ix_fault_events_run_seq ON fault_events (run_id, seq);
CREATE TABLE manual_audit (
    id INTEGER NOT NULL PRIMARY KEY, chip VARCHAR NOT NULL, separated BOOLEAN NOT NULL, set_by VARCHAR NOT NULL,
    at_ms INTEGER NOT NULL);
CREATE INDEX ix_manual_audit_chip ON manual_audit (chip, id);
INSERT INTO schema_version VALUES (1, 'initial layout', 1000);
INSERT INTO schema_version VALUES (2, 'event run/seq and source, history indexes, manual isolation audit', 1000);
INSERT INTO reset_attempts VALUES (1, 'Ascend910-0,Ascend910-1', 'auto', 100, 'failed', -8012, 900);
INSERT INTO reset_attempts VALUES (2, 'Ascend910-2', 'auto', 1000, NULL, NULL, NULL);
INSERT INTO reset_attempt_chips VALUES (1, 'Ascend910-0'), (1, 'Ascend910-1'), (2, 'Ascend910-2');
"""
H = 3_600_000
N = 1_790_000_000_000  # the newest token of a v2 file


@pytest.fixture
def tmp_dir() -> Iterator[Path]:
    with tempfile.TemporaryDirectory(prefix="fm-migrate-") as tmp:
        yield Path(tmp)


def write_v1(path: Path, data: str = V1_DATA) -> None:
    with sqlite3.connect(path) as raw:
        raw.executescript(V1_SCHEMA + data)
    raw.close()


def write_v2(path: Path, tokens: list[tuple[str, int]], extra: str = "") -> None:
    with sqlite3.connect(path) as raw:
        raw.executescript(V2_SCHEMA + extra)
        raw.executemany("INSERT INTO reset_tokens (chip, taken_ms) VALUES (?, ?)", tokens)
    raw.close()


def schema_of(path: Path) -> dict[str, Any]:
    """Tables, columns, indexes and foreign keys as SQLite itself reports them."""
    out: dict[str, Any] = {}
    raw = sqlite3.connect(path)
    try:
        tables = [
            r[0] for r in raw.execute("SELECT name FROM sqlite_master WHERE type='table' AND name NOT LIKE 'sqlite_%'")
        ]
        for name in sorted(tables):
            columns = {c[1]: (c[2].upper(), bool(c[3]), c[5]) for c in raw.execute(f"PRAGMA table_info({name})")}
            indexes = set()
            for _seq, index, unique, origin, partial in raw.execute(f"PRAGMA index_list({name})"):
                cols = tuple(c[2] for c in raw.execute(f"PRAGMA index_info({index})"))
                # Automatic indexes (UNIQUE / composite PRIMARY KEY) are named after their table: compare by kind.
                label = origin if index.startswith("sqlite_autoindex_") else index
                indexes.add((label, cols, bool(unique), bool(partial)))
            fks = {(f[2], f[3], f[4], f[6]) for f in raw.execute(f"PRAGMA foreign_key_list({name})")}
            out[name] = {"columns": columns, "indexes": indexes, "fks": fks}
    finally:
        raw.close()
    return out


def test_fresh_file_matches_the_declared_tables(tmp_dir: Path) -> None:
    with Store(tmp_dir / "migrated.db") as s:
        assert s.db.schema_version() == CURRENT_VERSION
    engine = create_engine(f"sqlite:///{tmp_dir / 'models.db'}")
    # The store's SQLModel classes (store/models.py, imported with the store) are the declaration.
    SQLModel.metadata.create_all(engine)
    engine.dispose()
    migrated, models = schema_of(tmp_dir / "migrated.db"), schema_of(tmp_dir / "models.db")
    assert sorted(migrated) == sorted(models)
    for name in models:
        assert migrated[name] == models[name], name


def test_v1_file_is_upgraded_in_place_without_losing_data(tmp_dir: Path) -> None:
    path = tmp_dir / "faults.db"
    write_v1(path)
    with Store(path) as s:
        assert s.db.schema_version() == CURRENT_VERSION
        rows = s.events.page("Ascend910-3")
        # Events kept their ids and order; run and seq were split on the last '-'.
        assert [(r.id, r.event_id, r.raised_at_ms) for r in rows] == [
            (3, "65f0a1b2c3-d4-9", 7000),
            (2, "65f0a1b2c3-d4-12", 6000),
            (1, "65f0a1b2c3-d4-7", 5000),
        ]
        assert s.events.last_event_id("65f0a1b2c3-d4") == "65f0a1b2c3-d4-12"
        assert s.events.last_event_id("older-run") == "older-run-3"
        # v1 had no source: a NULL severity can only come from polling.
        assert {r.event_id: r.source for r in rows} == {
            "65f0a1b2c3-d4-9": "subscription",
            "65f0a1b2c3-d4-12": "poll",
            "65f0a1b2c3-d4-7": "subscription",
        }
        assert [r.raised_at_ms for r in s.events.timeline("Ascend910-3", "80E01801", 0)] == [5000, 7000]
        assert s.states.all()["Ascend910-3"].codes == ["81078603"]
        assert [(e.chip, e.code, e.upgrade_time_ms) for e in s.isolations.escalations()] == [
            ("Ascend910-3", "81078603", 26000)
        ]
        assert s.manual.chips() == {"Ascend910-5"}
        # The new audit starts with what was isolated at upgrade time.
        assert [(a.chip, a.separated, a.set_by, a.at_ms) for a in s.manual.audit()] == [
            ("Ascend910-5", True, "configmap", 3000)
        ]
        assert [(a.chips, a.reason) for a in s.resets.recent()] == [(("Ascend910-0", "Ascend910-1"), None)]
        assert stored_tokens.tokens_by_chip(s.buckets, 200) == {"Ascend910-0": 2}
        last_good = s.policies.last_good()
        assert last_good is not None
        assert last_good.digest == "abc"
        # The upgraded file takes new writes (the new columns are filled in).
        new = FaultEventRow("65f0a1b2c3-d4-13", "Ascend910-3", 3, 3, "80E01801", "occur", 2, "subscription", 8000, 8001)
        assert s.events.append([new]) == 1
        assert s.events.last_event_id("65f0a1b2c3-d4") == "65f0a1b2c3-d4-13"
    fresh = tmp_dir / "fresh.db"
    Store(fresh).close()
    assert schema_of(path) == schema_of(fresh)
    with sqlite3.connect(path) as raw:
        versions = raw.execute("SELECT version, applied_ms FROM schema_version ORDER BY version").fetchall()
    raw.close()
    assert [v for v, _ in versions] == list(range(1, CURRENT_VERSION + 1))
    assert versions[0][1] == 1000  # v1's own row is untouched


def test_reopening_a_current_file_applies_nothing(tmp_dir: Path) -> None:
    path = tmp_dir / "faults.db"
    Store(path, wall_ms=lambda: 111).close()
    Store(path, wall_ms=lambda: 222).close()
    with sqlite3.connect(path) as raw:
        stamps = {t for (t,) in raw.execute("SELECT applied_ms FROM schema_version")}
    raw.close()
    assert stamps == {111}


def test_failed_migration_leaves_the_old_version_intact(tmp_dir: Path) -> None:
    # A stray table with v2's name makes v2 fail half-way: its whole transaction must roll back.
    path = tmp_dir / "faults.db"
    write_v1(path, V1_DATA + "CREATE TABLE manual_audit (x INTEGER);")
    with pytest.raises(StoreError, match="manual_audit") as info:
        Store(path)
    assert str(path) in str(info.value)
    with sqlite3.connect(path) as raw:
        assert raw.execute("SELECT MAX(version) FROM schema_version").fetchone() == (1,)
        assert raw.execute("SELECT COUNT(*) FROM fault_events").fetchone() == (4,)
        columns = {c[1] for c in raw.execute("PRAGMA table_info(fault_events)")}
        tables = {t for (t,) in raw.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    raw.close()
    assert "run_id" not in columns
    assert "fault_events_v1" not in tables


def test_newer_schema_is_refused(tmp_dir: Path) -> None:
    path = tmp_dir / "faults.db"
    Store(path).close()
    with sqlite3.connect(path) as raw:
        raw.execute("INSERT INTO schema_version VALUES (?, 'from the future', 0)", (CURRENT_VERSION + 1,))
    raw.close()
    with pytest.raises(StoreError, match=f"schema version {CURRENT_VERSION + 1} is newer"):
        Store(path)


@pytest.mark.parametrize(
    ("tokens", "buckets"),
    [
        pytest.param([], {}, id="no tokens taken: no buckets, every chip full"),
        pytest.param([("Ascend910-0", N)], {"Ascend910-0": (2, N)}, id="one take"),
        pytest.param(
            [("Ascend910-0", N - 5 * H), ("Ascend910-0", N - H), ("Ascend910-0", N)],
            {"Ascend910-0": (0, N - 5 * H)},
            id="three takes in the window: empty until the oldest would have come back",
        ),
        pytest.param(
            [("Ascend910-1", N - 6 * H), ("Ascend910-2", N - 6 * H), ("Ascend910-2", N - 2 * H), ("Ascend910-0", N)],
            {"Ascend910-0": (2, N), "Ascend910-2": (2, N - 2 * H)},
            id="a take a whole window before the newest no longer counts",
        ),
        pytest.param(
            [("Ascend910-4", N - 8 * H), ("Ascend910-4", N - 6 * H + 1), ("Ascend910-0", N)],
            {"Ascend910-0": (2, N), "Ascend910-4": (2, N - 6 * H + 1)},
            id="a take one ms inside the window counts",
        ),
        pytest.param(
            [("Ascend910-0", N - 4 * H + i) for i in range(5)],
            {"Ascend910-0": (0, N - 4 * H)},
            id="more takes than tokens (a non-default per): none left, never negative",
        ),
    ],
)
def test_v2_reset_tokens_become_buckets(
    tmp_dir: Path, tokens: list[tuple[str, int]], buckets: dict[str, tuple[int, int]]
) -> None:
    path = tmp_dir / "faults.db"
    write_v2(path, tokens)
    # Opened long after the file was written: the window is measured from its newest token, not from now.
    with Store(path, wall_ms=lambda: N + 1000 * H) as s:
        assert s.db.schema_version() == CURRENT_VERSION
    with sqlite3.connect(path) as raw:
        rows = raw.execute("SELECT chip, logic_id, tokens, last_refill_ms FROM reset_buckets ORDER BY chip").fetchall()
        tables = {t for (t,) in raw.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    raw.close()
    assert rows == [(chip, None, t, last) for chip, (t, last) in sorted(buckets.items())]
    assert "reset_tokens" not in tables
    with Store(path) as s:
        # Until a bucket's refill the chip has what the sliding window left it; then it is full.
        for chip, (left, last) in buckets.items():
            assert stored_tokens.tokens(s.buckets, chip, N) == left, chip
            assert stored_tokens.tokens(s.buckets, chip, last + 6 * H - 1) == left, chip
            assert stored_tokens.tokens(s.buckets, chip, last + 6 * H) == 3, chip
        assert stored_tokens.tokens(s.buckets, "Ascend910-7", N) == 3


def test_v2_file_upgrades_in_place(tmp_dir: Path) -> None:
    path = tmp_dir / "faults.db"
    write_v2(path, [("Ascend910-0", N - H), ("Ascend910-0", N)])
    with Store(path) as s:
        assert [(a.id, a.chips, a.outcome, a.error_code, a.finished_ms, a.reason) for a in s.resets.recent()] == [
            (2, ("Ascend910-2",), None, None, None, None),
            (1, ("Ascend910-0", "Ascend910-1"), "failed", -8012, 900, None),
        ]
        assert stored_tokens.tokens_by_chip(s.buckets, N) == {"Ascend910-0": 1}
        # The first consume after the upgrade fills in the logic id and spends the converted bucket.
        assert stored_tokens.consume(s.buckets, "Ascend910-0", 0, N + 1) is True
        assert stored_tokens.consume(s.buckets, "Ascend910-0", 0, N + 2) is False
        assert s.resets.finish(2, "refused", None, N, reason="no reset token left") is True
        assert s.resets.recent(limit=1)[0].reason == "no reset token left"
    with sqlite3.connect(path) as raw:
        assert raw.execute("SELECT logic_id, tokens FROM reset_buckets").fetchall() == [(0, 0)]
    raw.close()
    fresh = tmp_dir / "fresh.db"
    Store(fresh).close()
    assert schema_of(path) == schema_of(fresh)


def test_failed_v3_migration_keeps_the_v2_tokens(tmp_dir: Path) -> None:
    path = tmp_dir / "faults.db"
    write_v2(path, [("Ascend910-0", N)], extra="CREATE TABLE reset_buckets (x INTEGER);")
    with pytest.raises(StoreError, match="reset_buckets"):
        Store(path)
    with sqlite3.connect(path) as raw:
        assert raw.execute("SELECT MAX(version) FROM schema_version").fetchone() == (2,)
        assert raw.execute("SELECT chip, taken_ms FROM reset_tokens").fetchall() == [("Ascend910-0", N)]
        assert "reason" not in {c[1] for c in raw.execute("PRAGMA table_info(reset_attempts)")}
    raw.close()
