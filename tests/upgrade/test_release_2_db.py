"""Upgrading a database of the last schema-version-2 release: its sliding-window reset tokens become the
reference's per-chip buckets, and its reset attempts are kept (with no reason).

`release-2.db` was written by that release's own Store (commit 39dfcd5, `make_release_2_db.py`). Its
tokens, relative to the newest one (N, when Ascend910-0 took its third):

| chip | tokens taken (h before N) | left at N | bucket after the upgrade |
|---|---|---|---|
| Ascend910-0 | 5, 1, 0 (a ring with -1 twice) | 0 | 0 tokens, refilled at N-5h+6h |
| Ascend910-1 | 5, 1 (ring with -0) | 1 | 1 token, refilled at N-5h+6h |
| Ascend910-2 | 6 (exactly a window before N: given back), 2 | 2 | 2 tokens, refilled at N-2h+6h |
| Ascend910-3 | 10, 9 | 3 | none: full |
| Ascend910-4 | 8, 7, 6h-1ms | 2 | 2 tokens, refilled at N+1ms |
"""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path

from fault_manager.hotreset import stored_tokens
from fault_manager.store import Store
from fault_manager.store.migrations import CURRENT_VERSION

FIXTURE = Path(__file__).with_name("release-2.db")
H = 3_600_000
N = 1_790_000_000_000  # the newest token in the fixture


def copy(tmp: Path) -> Path:
    db = tmp / "fm.db"
    shutil.copyfile(FIXTURE, db)
    return db


def test_the_fixture_is_a_release_2_file(tmp_path: Path) -> None:
    # A copy: even a read-only connection leaves -wal and -shm files next to a WAL database.
    with sqlite3.connect(copy(tmp_path)) as raw:
        assert raw.execute("SELECT MAX(version) FROM schema_version").fetchone() == (2,)
        assert raw.execute("SELECT MAX(taken_ms), COUNT(*) FROM reset_tokens").fetchone() == (N, 12)
    raw.close()


def test_release_2_tokens_become_buckets(tmp_path: Path) -> None:
    db = copy(tmp_path)
    with Store(db) as store:
        assert store.db.schema_version() == CURRENT_VERSION == 3
        assert stored_tokens.tokens_by_chip(store.buckets, N) == {
            "Ascend910-0": 0,
            "Ascend910-1": 1,
            "Ascend910-2": 2,
            "Ascend910-4": 2,
        }
        assert stored_tokens.tokens(store.buckets, "Ascend910-3", N) == 3
        # Each bucket is full again when the sliding window would have given back its oldest counted token.
        assert stored_tokens.tokens_by_chip(store.buckets, N + 1) == {
            "Ascend910-0": 0,
            "Ascend910-1": 1,
            "Ascend910-2": 2,
            "Ascend910-4": 3,
        }
        assert stored_tokens.tokens_by_chip(store.buckets, N + H) == {
            "Ascend910-0": 3,
            "Ascend910-1": 3,
            "Ascend910-2": 2,
            "Ascend910-4": 3,
        }
        assert stored_tokens.tokens(store.buckets, "Ascend910-2", N + 4 * H) == 3
        # The faulty chip alone pays: Ascend910-0 waits for its refill, Ascend910-1 spends its last token.
        assert stored_tokens.consume(store.buckets, "Ascend910-0", 0, N + H - 1) is False
        assert stored_tokens.consume(store.buckets, "Ascend910-1", 1, N + 1) is True
        assert stored_tokens.consume(store.buckets, "Ascend910-1", 1, N + 2) is False
        assert stored_tokens.consume(store.buckets, "Ascend910-0", 0, N + H) is True
        assert stored_tokens.tokens(store.buckets, "Ascend910-0", N + H) == 2
    with sqlite3.connect(db) as raw:
        tables = {t for (t,) in raw.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        logic = dict(raw.execute("SELECT chip, logic_id FROM reset_buckets").fetchall())
    raw.close()
    assert "reset_tokens" not in tables
    # The old file had no logic ids; a consume fills one in.
    assert logic == {"Ascend910-0": 0, "Ascend910-1": 1, "Ascend910-2": None, "Ascend910-4": None}


def test_release_2_reset_attempts_are_kept(tmp_path: Path) -> None:
    db = copy(tmp_path)
    with Store(db) as store:
        attempts = store.resets.recent()
        assert len(attempts) == 10
        assert {a.reason for a in attempts} == {None}
        newest, failed = attempts[0], attempts[1]
        assert (newest.chips, newest.outcome, newest.finished_ms) == (("Ascend910-0",), None, None)
        assert (failed.chips, failed.outcome, failed.error_code, failed.finished_ms) == (
            ("Ascend910-0", "Ascend910-1"),
            "failed",
            -8012,
            N - H + 30_000,
        )
        assert [a.outcome for a in attempts].count("succeeded") == 7
        # The attempt left running by the old release can be finished with a reason by the new one.
        assert store.resets.finish(newest.id, "failed", -8006, N + 60_000, reason="restarted mid-reset")
        assert store.resets.recent(limit=1)[0].reason == "restarted mid-reset"
