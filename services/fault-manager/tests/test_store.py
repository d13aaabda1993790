"""The fault-manager's SQLite store: events, state, escalations, isolation, resets, token buckets, retention, errors."""

from __future__ import annotations

import dataclasses
import sqlite3
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from fault_manager.hotreset import stored_tokens
from fault_manager.store import MAX_PAGE, FaultEventRow, Store, StoreError

C0, C1, C2 = "Ascend910-0", "Ascend910-1", "Ascend910-2"


@pytest.fixture
def db_path() -> Iterator[Path]:
    # Own temporary directory (not tmp_path): removed with the WAL and SHM files when the test ends.
    with tempfile.TemporaryDirectory(prefix="fm-store-") as tmp:
        yield Path(tmp) / "state" / "faults.db"


@pytest.fixture
def store(db_path: Path) -> Iterator[Store]:
    s = Store(db_path)
    yield s
    s.close()


def ev(
    seq: int,
    chip: str = C0,
    t: int | None = None,
    *,
    run: str = "run1",
    code: str = "80E01801",
    assertion: str = "occur",
    source: str = "subscription",
    severity: int | None = 2,
) -> FaultEventRow:
    raised = 1_000 * seq if t is None else t
    return FaultEventRow(
        event_id=f"{run}-{seq}",
        chip=chip,
        logic_id=int(chip.rsplit("-", 1)[1]),
        phy_id=int(chip.rsplit("-", 1)[1]),
        code=code,
        assertion=assertion,
        severity=severity,
        source=source,
        raised_at_ms=raised,
        recorded_at_ms=raised + 7,
    )


# --- events ---------------------------------------------------------------------------------------


def test_append_is_idempotent(store: Store) -> None:
    batch = [ev(1), ev(2, C1), ev(3)]
    assert store.events.append(batch) == 3
    assert store.events.append(batch) == 0  # the same batch again changes nothing
    assert store.events.append([ev(3), ev(4), ev(4)]) == 1  # duplicates inside a batch count once
    assert store.events.count() == 4
    assert store.events.count(C1) == 1
    assert store.events.append([]) == 0


@pytest.mark.parametrize("source", ["subscription", "poll", "hang", "reconcile"])
def test_every_exporter_source_is_stored(store: Store, source: str) -> None:
    # `hang` (issue 24's hung-job detection) was once refused, which stopped the reactor.
    event = ev(7, C1, severity=None, source=source)
    if source == "reconcile":
        event = dataclasses.replace(event, event_id="anchor-r-Ascend910-1-200001002-occur")
    assert store.events.append([event]) == 1
    (row,) = store.events.page(C1)
    assert row.source == source


def test_stored_event_round_trips(store: Store) -> None:
    original = ev(5, C2, t=12_345, code="8c1fa006", severity=None, source="poll", assertion="once")
    store.events.append([original])
    (row,) = store.events.page(C2)
    assert row.id is not None
    assert dataclasses.replace(row, id=None) == dataclasses.replace(original, code="8C1FA006")
    with pytest.raises(dataclasses.FrozenInstanceError):
        row.chip = C0  # type: ignore[misc]


@pytest.mark.parametrize(
    ("bad", "message"),
    [
        (dataclasses.replace(ev(9), event_id="no-seq-here"), "<run>-<seq>"),
        (dataclasses.replace(ev(9), event_id="42"), "<run>-<seq>"),
        (dataclasses.replace(ev(9), event_id="-42"), "<run>-<seq>"),
        (ev(9, assertion="cleared"), "assertion"),
        (ev(9, source="guess"), "source"),
        (dataclasses.replace(ev(9), chip=""), "chip and code"),
    ],
)
def test_malformed_batch_writes_nothing(store: Store, bad: FaultEventRow, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        store.events.append([ev(1), bad, ev(2)])
    assert store.events.count() == 0


def test_two_threads_append_overlapping_batches(store: Store) -> None:
    # Both threads write the same 2,000 ids in different orders: each id must be stored and
    # counted exactly once, and a reader running meanwhile must never fail.
    ids = list(range(1, 2_001))
    orders = [ids, ids[::-1]]
    counted = [0, 0]
    errors: list[BaseException] = []
    start = threading.Barrier(3)
    done = threading.Event()

    def writer(k: int) -> None:
        try:
            start.wait()
            for i in range(0, len(ids), 100):
                chunk = orders[k][i : i + 100]
                counted[k] += store.events.append([ev(s, (C0, C1)[s % 2]) for s in chunk])
        except BaseException as exc:
            errors.append(exc)

    def reader() -> None:
        try:
            start.wait()
            while not done.is_set():
                rows = store.events.page(C0, limit=50)
                assert rows == sorted(rows, key=lambda r: (r.raised_at_ms, r.id or 0), reverse=True)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=writer, args=(k,)) for k in (0, 1)]
    watcher = threading.Thread(target=reader)
    for t in [*threads, watcher]:
        t.start()
    for t in threads:
        t.join(timeout=60)
    done.set()
    watcher.join(timeout=60)
    assert not errors
    assert sum(counted) == len(ids)
    assert store.events.count() == len(ids)


def test_last_event_id_per_run(store: Store) -> None:
    assert store.events.last_event_id("r") is None
    assert store.events.last_event_id() is None
    store.events.append([ev(10, run="6790abc1-f3"), ev(9, run="6790abc1-f3"), ev(2, run="other")])
    # Numeric, not textual: "-10" beats "-9"; a run id may contain '-'.
    assert store.events.last_event_id("6790abc1-f3") == "6790abc1-f3-10"
    assert store.events.last_event_id("other") == "other-2"
    assert store.events.last_event_id("6790abc1") is None
    assert store.events.last_event_id() == "other-2"  # the one stored last, whatever its run
    store.events.append([ev(3, run="6790abc1-f3")])
    assert store.events.last_event_id("6790abc1-f3") == "6790abc1-f3-10"


def test_reconciled_events_are_stored_in_no_run(store: Store) -> None:
    # A reconcile after an exporter restart synthesises `<anchor>-r-<chip>-<code>-<kind>` ids;
    # storing one once raised and stopped ingestion for good (found by the exporter-kill drill).
    store.events.append([ev(4, run="run1")])
    synthetic = dataclasses.replace(ev(4, run="run1"), event_id=f"run1-4-r-{C0}-80E01801-recover",
                                    assertion="recover", source="reconcile", severity=None)  # fmt: skip
    assert store.events.append([synthetic]) == 1
    assert store.events.append([synthetic]) == 0, "idempotent like any event"
    assert store.events.last_event_id("run1") == "run1-4", "a run never resumes from a synthetic event"
    assert [e.event_id for e in store.events.page(C0)] == [synthetic.event_id, "run1-4"]


@pytest.fixture
def timeline(store: Store) -> Store:
    # C0: events at 100, 200, ..., 1000 ms, and a tie at 500 ms; C1: noise that must never show.
    events = [ev(i, C0, t=i * 100) for i in range(1, 11)]
    events.append(ev(11, C0, t=500, code="8C1FA006"))
    events += [ev(100 + i, C1, t=i * 100 + 50) for i in range(1, 11)]
    store.events.append(events)
    return store


@pytest.mark.parametrize(
    ("since", "until", "limit", "want"),
    [
        (None, None, 100, ["1000", "900", "800", "700", "600", "500#11", "500#5", "400", "300", "200", "100"]),
        (None, None, 3, ["1000", "900", "800"]),
        (300, 600, 100, ["600", "500#11", "500#5", "400", "300"]),  # both bounds inclusive
        (450, None, 2, ["1000", "900"]),
        (None, 250, 100, ["200", "100"]),
        (1001, None, 100, []),
        (600, 400, 100, []),
    ],
)
def test_history_order_range_limit(
    timeline: Store, since: int | None, until: int | None, limit: int, want: list[str]
) -> None:
    rows = timeline.events.page(C0, since_ms=since, until_ms=until, limit=limit)
    got = [
        f"{r.raised_at_ms}#{r.event_id.rsplit('-', 1)[1]}" if r.raised_at_ms == 500 else str(r.raised_at_ms)
        for r in rows
    ]
    assert got == want
    assert all(r.chip == C0 for r in rows)


@pytest.mark.parametrize(("since", "until", "page"), [(None, None, 3), (None, None, 1), (200, 800, 2), (None, 500, 4)])
def test_history_keyset_pages_cover_everything_once(
    timeline: Store, since: int | None, until: int | None, page: int
) -> None:
    everything = timeline.events.page(C0, since_ms=since, until_ms=until, limit=MAX_PAGE)
    paged: list[FaultEventRow] = []
    before = None
    for _ in range(len(everything) + 1):  # bounded: a cursor that does not advance must fail, not hang
        rows = timeline.events.page(C0, since_ms=since, until_ms=until, limit=page, before_id=before)
        if not rows:
            break
        assert len(rows) <= page
        paged += rows
        before = rows[-1].id
    assert paged == everything


def test_history_cursor_of_another_chip_or_gone_yields_nothing(timeline: Store) -> None:
    other = timeline.events.page(C1, limit=1)[0]
    assert timeline.events.page(C0, before_id=other.id) == []
    assert timeline.events.page(C0, before_id=10**9) == []


@pytest.mark.parametrize("limit", [0, -1, MAX_PAGE + 1])
def test_history_limit_is_bounded(store: Store, limit: int) -> None:
    with pytest.raises(ValueError, match="limit"):
        store.events.page(C0, limit=limit)


def test_events_since_is_a_per_code_timeline(timeline: Store) -> None:
    rows = timeline.events.timeline(C0, "80e01801", since_ms=800)  # codes match case-insensitively
    assert [r.raised_at_ms for r in rows] == [800, 900, 1000]  # oldest first, since inclusive
    assert [r.event_id for r in timeline.events.timeline(C0, "8C1FA006", 0)] == ["run1-11"]
    assert timeline.events.timeline(C0, "80E01801", 0, limit=2)[-1].raised_at_ms == 200
    assert timeline.events.timeline(C2, "80E01801", 0) == []


# --- state that must survive a restart --------------------------------------------------------------


def test_chip_states_upsert_and_survive_reopen(db_path: Path) -> None:
    with Store(db_path) as s:
        s.states.save(C0, "NormalNPU", True, "", 1, [], 1)
        s.states.save(C0, "SeparateNPU", False, "code 80E01801", 5, {"80E01801": 4}, 6)
        s.states.save(C1, "RestartNPU", False, "", 2, ["8C1FA006"], 3)
    with Store(db_path) as s:
        states = s.states.all()
    assert sorted(states) == [C0, C1]
    assert (states[C0].level, states[C0].schedulable, states[C0].since_ms, states[C0].updated_ms) == (
        "SeparateNPU",
        False,
        5,
        6,
    )
    assert states[C0].codes == {"80E01801": 4}
    assert states[C1].codes == ["8C1FA006"]


def test_escalations_survive_reopen_and_release(db_path: Path) -> None:
    with Store(db_path) as s:
        first = s.isolations.add(C0, "81078603", "PreSeparateNPU", "FaultDuration", 1_000)
        # Re-adding the active one (an engine restart replays its rules) keeps one entry.
        assert s.isolations.add(C0, "81078603", "PreSeparateNPU", "FaultDuration", 2_000) == first
        s.isolations.add(C0, "80E01801", "SeparateNPU", "FaultFrequency", 1_500)
        s.isolations.add(C1, "40F84E00", "SeparateNPU", "FaultAutofill", 3_000)
    with Store(db_path) as s:
        active = s.isolations.escalations()
        assert [(e.chip, e.code, e.upgrade_type, e.upgrade_time_ms) for e in active] == [
            (C0, "81078603", "FaultDuration", 1_000),
            (C0, "80E01801", "FaultFrequency", 1_500),
            (C1, "40F84E00", "FaultAutofill", 3_000),
        ]
        assert s.isolations.release(C0, 9_000, "ReleaseTimeWindow", code="80e01801") == 1
        assert s.isolations.release(C0, 9_500, "admin removed it from ManuallySeparateNPU") == 1
        assert s.isolations.release(C0, 9_600, "again") == 0
        assert [e.chip for e in s.isolations.escalations()] == [C1]
        released = [e for e in s.isolations.escalations(active_only=False, chip=C0) if not e.active]
        assert {(e.code, e.released_at_ms, e.release_reason) for e in released} == {
            ("80E01801", 9_000, "ReleaseTimeWindow"),
            ("81078603", 9_500, "admin removed it from ManuallySeparateNPU"),
        }
        # Once released, the same escalation can happen again as a new entry.
        assert s.isolations.add(C0, "81078603", "PreSeparateNPU", "FaultDuration", 10_000) != first


def test_manual_isolation_is_audited(db_path: Path) -> None:
    with Store(db_path) as s:
        assert s.manual.chips() == set()
        assert s.manual.set_separated(C0, True, "configmap", 100) is True
        assert s.manual.set_separated(C0, True, "configmap", 200) is False  # no change, no audit entry
        assert s.manual.set_separated(C1, True, "api:alice", 300) is True
        assert s.manual.set_separated(C0, False, "api:bob", 400) is True
        assert s.manual.set_separated(C2, False, "api:bob", 500) is False
    with Store(db_path) as s:
        assert s.manual.chips() == {C1}
        audit = s.manual.audit()
        assert [(a.chip, a.separated, a.set_by, a.at_ms) for a in audit] == [
            (C0, False, "api:bob", 400),
            (C1, True, "api:alice", 300),
            (C0, True, "configmap", 100),
        ]
        assert [a.at_ms for a in s.manual.audit(chip=C0, limit=1)] == [400]


def test_reset_attempts_are_recorded(store: Store) -> None:
    first = store.resets.record("ring-0", [C1, C0, C0], "inband", 1_000)
    second = store.resets.record("chip-2", [C2], "inband", 2_000)
    assert store.resets.finish(first, "failed", -8012, 1_500, reason="reset failed (-8012): busy") is True
    assert store.resets.finish(second, "succeeded", None, 2_500) is True
    assert store.resets.finish(999, "succeeded", None, 3_000) is False
    attempts = store.resets.recent()
    assert [(a.id, a.group_name, a.chips, a.outcome, a.error_code, a.reason) for a in attempts] == [
        (second, "chip-2", (C2,), "succeeded", None, None),
        (first, "ring-0", (C0, C1), "failed", -8012, "reset failed (-8012): busy"),
    ]
    assert [a.id for a in store.resets.recent(chip=C1)] == [first]
    assert [a.id for a in store.resets.recent(limit=1)] == [second]


def test_refused_resets_are_recorded_with_their_reason(store: Store) -> None:
    refused = store.resets.refuse("ring-0", [C0, C1], "auto", 5_000, "no reset token left")
    (row,) = store.resets.recent()
    assert (row.id, row.chips, row.outcome, row.started_ms, row.finished_ms, row.reason) == (
        refused,
        (C0, C1),
        "refused",
        5_000,
        5_000,
        "no reset token left",
    )
    # A reason given at the start is kept when the finish gives none.
    started = store.resets.record("chip-2", [C2], "auto", 6_000, reason="operator request")
    assert store.resets.recent()[0].reason == "operator request"
    store.resets.finish(started, "succeeded", None, 6_500)
    assert store.resets.recent()[0].reason == "operator request"
    with pytest.raises(ValueError, match="reset outcome 'timeout'"):
        store.resets.finish(started, "timeout", None, 7_000)


H = 3_600_000


@pytest.mark.parametrize(
    ("steps", "interval_ms"),
    [
        # (now_ms, expected consume result, expected tokens left afterwards)
        ([(0, True, 2), (1, True, 1), (2, True, 0), (3, False, 0), (6 * H - 1, False, 0), (6 * H, True, 2)], 6 * H),
        # The whole bucket comes back at once, an interval after its last refill (not one token per take).
        (
            [
                (0, True, 2),
                (H, True, 1),
                (2 * H, True, 0),
                (6 * H, True, 2),
                (7 * H, True, 1),
                (7 * H + 1, True, 0),
                (8 * H, False, 0),
                (12 * H - 1, False, 0),
                (12 * H, True, 2),
            ],
            6 * H,
        ),
        # A drill with a time-scale factor passes a shrunk interval.
        ([(0, True, 2), (1, True, 1), (2, True, 0), (3, False, 0), (99, False, 0), (100, True, 2)], 100),
    ],
)
def test_reset_token_bucket_refills_whole(db_path: Path, steps: list[tuple[int, bool, int]], interval_ms: int) -> None:
    for now, taken, left in steps:
        # Reopened for each step: the bucket lives in the file, not in memory.
        with Store(db_path) as s:
            assert stored_tokens.consume(s.buckets, C0, 0, now, interval_ms=interval_ms) is taken, now
            assert stored_tokens.tokens(s.buckets, C0, now, interval_ms=interval_ms) == left, now
    with Store(db_path) as s:
        assert stored_tokens.tokens(s.buckets, C1, 0) == 3


def test_reset_tokens_charge_the_faulty_chip_alone(store: Store, db_path: Path) -> None:
    assert stored_tokens.tokens_by_chip(store.buckets, 0) == {}
    assert stored_tokens.tokens(store.buckets, C0, 0) == 3  # reading creates no bucket
    assert stored_tokens.tokens_by_chip(store.buckets, 0) == {}
    for t in range(3):
        assert stored_tokens.consume(store.buckets, C0, 0, t)
    assert stored_tokens.consume(store.buckets, C0, 0, 10) is False
    assert (stored_tokens.tokens(store.buckets, C0, 10), stored_tokens.tokens(store.buckets, C1, 10)) == (0, 3)
    assert stored_tokens.consume(store.buckets, C1, 1, 10) is True
    assert stored_tokens.tokens_by_chip(store.buckets, 10) == {C0: 0, C1: 2}
    # Each bucket's interval started at its own first reset.
    assert stored_tokens.tokens_by_chip(store.buckets, 6 * H) == {C0: 3, C1: 2}
    assert stored_tokens.tokens_by_chip(store.buckets, 6 * H + 10) == {C0: 3, C1: 3}
    with sqlite3.connect(db_path) as raw:
        rows = raw.execute("SELECT chip, logic_id, tokens, last_refill_ms FROM reset_buckets ORDER BY chip").fetchall()
    raw.close()
    assert rows == [(C0, 0, 0, 0), (C1, 1, 2, 10)]  # reads refill nothing in the file


def test_reset_token_consume_records_the_latest_logic_id(store: Store, db_path: Path) -> None:
    stored_tokens.consume(store.buckets, C2, 7, 0)
    stored_tokens.consume(store.buckets, C2, 5, 1)  # renumbered (a driver reload): the bucket is the chip's
    with sqlite3.connect(db_path) as raw:
        assert raw.execute("SELECT logic_id, tokens FROM reset_buckets").fetchall() == [(5, 1)]
    raw.close()


def test_reset_tokens_with_a_clock_stepped_back(store: Store) -> None:
    assert stored_tokens.consume(store.buckets, C0, 0, 10 * H)
    # Before the last refill: nothing comes back, nothing breaks; the bucket is the same when time recovers.
    assert stored_tokens.consume(store.buckets, C0, 0, 3 * H)
    assert stored_tokens.consume(store.buckets, C0, 0, 3 * H)
    assert stored_tokens.consume(store.buckets, C0, 0, 4 * H) is False
    assert stored_tokens.tokens(store.buckets, C0, 16 * H - 1) == 0
    assert stored_tokens.tokens(store.buckets, C0, 16 * H) == 3


def test_concurrent_resets_never_share_the_last_token(store: Store) -> None:
    start = threading.Barrier(8)
    results: list[bool] = []
    lock = threading.Lock()

    def reset() -> None:
        start.wait()
        taken = stored_tokens.consume(store.buckets, C0, 0, 1_000)
        with lock:
            results.append(taken)

    threads = [threading.Thread(target=reset) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(results) == [False] * 5 + [True] * 3
    assert stored_tokens.tokens(store.buckets, C0, 1_000) == 0


def test_policy_versions_keep_the_last_good_one(store: Store) -> None:
    assert store.policies.last_good() is None
    good = store.policies.save("configmap", "d1", '{"a":1}', True, saved_ms=10)
    assert store.policies.save("configmap", "d1", '{"a":1}', True, saved_ms=11) == good  # a re-read
    bad = store.policies.save("configmap", "d2", "{", False, "faultCode.json: invalid JSON", saved_ms=20)
    last = store.policies.last_good()
    assert last is not None
    assert (last.id, last.digest, last.content_json, last.saved_ms) == (good, "d1", '{"a":1}', 10)
    assert [(p.id, p.accepted, p.error) for p in store.policies.recent()] == [
        (bad, False, "faultCode.json: invalid JSON"),
        (good, True, None),
    ]


# --- retention ------------------------------------------------------------------------------------


def test_prune_keeps_minimum_and_active_escalations(store: Store) -> None:
    store.events.append([ev(i, C0, t=i) for i in range(1, 51)] + [ev(100 + i, C1, t=i) for i in range(1, 6)])
    active = store.isolations.add(C0, "80E01801", "SeparateNPU", "FaultFrequency", 1)  # old but active
    store.isolations.add(C1, "8C1FA006", "RestartNPU", "FaultDuration", 1)
    store.isolations.release(C1, 2, "ReleaseTimeWindow")
    store.isolations.add(C2, "8C1FA006", "RestartNPU", "FaultDuration", 1)
    store.isolations.release(C2, 10_000, "ReleaseTimeWindow")  # released after the cutoff: kept
    old = store.resets.record("g", [C0, C1], "inband", 1)
    store.resets.finish(old, "succeeded", None, 2)
    running = store.resets.record("g", [C0], "inband", 3)  # never finished: kept

    result = store.retention.prune(older_than_ms=41, keep_min_per_chip=3, batch_size=7)

    assert result.complete
    # C0: events 1..40 are older than the cutoff and C0 keeps more than 3 newer ones.
    assert [r.raised_at_ms for r in store.events.page(C0, limit=MAX_PAGE)] == list(range(50, 40, -1))
    # C1: all five are older than the cutoff, but the newest three are kept.
    assert [r.raised_at_ms for r in store.events.page(C1)] == [5, 4, 3]
    assert (result.events, result.escalations, result.reset_attempts) == (42, 1, 1)
    assert [e.id for e in store.isolations.escalations()] == [active]
    assert {e.chip for e in store.isolations.escalations(active_only=False)} == {C0, C2}
    assert [a.id for a in store.resets.recent()] == [running]
    assert store.resets.recent(chip=C1) == []  # the pruned attempt's chips went with it


def test_prune_keeps_reset_buckets(store: Store) -> None:
    for t in (0, 1, 2):
        stored_tokens.consume(store.buckets, C0, 0, 10 * H + t)
    # An aggressive cutoff ("everything before now") must not hand out tokens again.
    result = store.retention.prune(older_than_ms=10 * H + 100, keep_min_per_chip=0)
    assert "reset_tokens" not in {f.name for f in dataclasses.fields(result)}
    assert stored_tokens.tokens(store.buckets, C0, 10 * H + 3) == 0
    assert stored_tokens.consume(store.buckets, C0, 0, 10 * H + 3) is False


def test_prune_stops_at_its_time_budget(store: Store) -> None:
    store.events.append([ev(i, C0, t=i) for i in range(1, 21)])
    partial = store.retention.prune(older_than_ms=100, keep_min_per_chip=0, batch_size=5, time_budget_s=0)
    assert not partial.complete
    rest = store.retention.prune(older_than_ms=100, keep_min_per_chip=0, batch_size=5)
    assert rest.complete
    assert partial.events + rest.events == 20
    assert store.events.count() == 0


# --- the file itself ------------------------------------------------------------------------------


def test_file_uses_wal(store: Store, db_path: Path) -> None:
    store.events.append([ev(1)])
    with sqlite3.connect(db_path) as raw:
        assert raw.execute("PRAGMA journal_mode").fetchone() == ("wal",)


def test_not_a_database_gives_a_clear_error(db_path: Path) -> None:
    db_path.parent.mkdir(parents=True)
    db_path.write_bytes(b"this is a policy file, not SQLite\n" * 200)
    with pytest.raises(StoreError, match="not a database") as info:
        Store(db_path)
    assert str(db_path) in str(info.value)
    assert info.value.path == db_path


def test_foreign_sqlite_file_is_refused(db_path: Path) -> None:
    db_path.parent.mkdir(parents=True)
    with sqlite3.connect(db_path) as raw:
        raw.execute("CREATE TABLE users (name TEXT)")
    with pytest.raises(StoreError, match="not a fault-manager database"):
        Store(db_path)


def test_locked_database_gives_a_clear_error(db_path: Path) -> None:
    s = Store(db_path, busy_timeout_s=0.2)
    try:
        s.events.append([ev(1)])
        other = sqlite3.connect(db_path, isolation_level=None)
        try:
            other.execute("BEGIN IMMEDIATE")  # another process holds the write lock
            other.execute("INSERT INTO manual_chips VALUES ('x', 'y', 1)")
            with pytest.raises(StoreError, match="locked") as info:
                s.events.append([ev(2)])
            assert str(db_path) in str(info.value)
            assert s.events.count() == 1  # WAL: reads still work while the writer waits
            with pytest.raises(StoreError, match="locked"):
                Store(db_path, busy_timeout_s=0.1).close()  # (a new process would wait, then fail)
        finally:
            other.execute("ROLLBACK")
            other.close()
        assert s.events.append([ev(2)]) == 1  # the store recovers once the lock is gone
    finally:
        s.close()


def test_closed_store_refuses_calls(db_path: Path) -> None:
    s = Store(db_path)
    s.close()
    s.close()  # idempotent
    with pytest.raises(StoreError, match="closed"):
        s.events.append([ev(1)])
    with pytest.raises(StoreError, match="closed"):
        s.events.page(C0)


def test_chip_history_reads_every_page_oldest_first(store: Store) -> None:
    """The start-up restore and `replay --db` read a chip's whole history past one page."""
    total = 2 * MAX_PAGE + 3
    store.events.append([ev(i + 1, t=1_000 + i // 3) for i in range(total)])  # timestamp ties across pages
    store.events.append([ev(total + 1, C1)])
    rows = store.events.of_chip(C0)
    assert [r.event_id for r in rows] == [f"run1-{i}" for i in range(1, total + 1)]
    later = store.events.of_chip(C0, since_ms=1_000 + MAX_PAGE // 3)
    assert later[0].event_id == f"run1-{3 * (MAX_PAGE // 3) + 1}" and later[-1].event_id == f"run1-{total}"
