"""FaultDuration and FaultFrequency over a code's timeline (contract section 7)."""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence

import pytest
from ascend_common.faults import (
    TICK,
    CodeEvent,
    DurationRule,
    DurationState,
    FaultLevel,
    FrequencyRule,
    FrequencyState,
    counting_spans,
    default_fault_customization,
    duration_state,
    frequency_state,
    occurrences,
    presence,
)
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

LINK_DOWN = "81078603"
HBM_ECC = "80E01801"
DAY = 86400


def _link_down_duration() -> DurationRule:
    rule = default_fault_customization().duration_rule(LINK_DOWN)
    assert rule is not None
    return rule


def _packaged_frequency(code: str) -> FrequencyRule:
    rule = default_fault_customization().frequency_rule(code)
    assert rule is not None
    return rule


def _occur(at: float) -> CodeEvent:
    return CodeEvent(at, "occur")


def _recover(at: float) -> CodeEvent:
    return CodeEvent(at, "recover")


def _once(at: float) -> CodeEvent:
    return CodeEvent(at, "once")


def _duration(fault_timeout: int, recover_timeout: int) -> DurationRule:
    return DurationRule(frozenset({"1"}), fault_timeout, recover_timeout, FaultLevel.PRE_SEPARATE_NPU)


def _frequency(times: int, window: int, release: int = 0) -> FrequencyRule:
    return FrequencyRule(frozenset({"1"}), window, times, FaultLevel.MANUALLY_SEPARATE_NPU, release)


IDLE = DurationState(counting=False, pending=False, since=None, changes_at=None)
NOT_ESCALATED = FrequencyState(escalated=False, escalated_at=None, count_in_window=0, releases_at=None)


def released(at: float) -> FrequencyState:
    return FrequencyState(escalated=False, escalated_at=None, count_in_window=0, releases_at=None, released_at=at)


def _pending(until: float) -> DurationState:
    return DurationState(counting=False, pending=True, since=None, changes_at=until)


def _counting(since: float, clears_at: float | None = None) -> DurationState:
    return DurationState(counting=True, pending=False, since=since, changes_at=clears_at)


# --- events -----------------------------------------------------------------------------------------


def test_event_kind_and_time_are_checked() -> None:
    with pytest.raises(ValueError, match="event kind must be one of"):
        CodeEvent(0.0, "assert")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="finite"):
        CodeEvent(math.nan, "occur")
    with pytest.raises(ValueError, match="finite"):
        CodeEvent(math.inf, "recover")


# --- FaultDuration: the contract examples, on the packaged link-down rule (20 s / 60 s) -----------------


def test_packaged_link_down_rule_is_20s_60s_pre_separate() -> None:
    rule = _link_down_duration()
    assert (rule.fault_timeout_s, rule.recover_timeout_s, rule.handling) == (20, 60, FaultLevel.PRE_SEPARATE_NPU)


@pytest.mark.parametrize(
    ("events", "now", "expected"),
    [
        # present 10 s: pending, then never counts
        ([_occur(100)], 100, _pending(120)),
        ([_occur(100)], 109, _pending(120)),
        ([_occur(100), _recover(110)], 110, IDLE),
        ([_occur(100), _recover(110)], 120, IDLE),
        ([_occur(100), _recover(110)], 100_000, IDLE),
        # present 25 s: counts from t+20 until 60 s after the recovery
        ([_occur(100)], 119.5, _pending(120)),
        ([_occur(100)], 120, _pending(120)),
        ([_occur(100)], 120.001, _counting(120)),
        ([_occur(100), _recover(125)], 124, _counting(120)),
        ([_occur(100), _recover(125)], 125, _counting(120, 185)),
        ([_occur(100), _recover(125)], 184.9, _counting(120, 185)),
        ([_occur(100), _recover(125)], 185, _counting(120, 185)),
        ([_occur(100), _recover(125)], 185.001, IDLE),
        ([_occur(100), _recover(125)], 1000, IDLE),
        # boundaries are strict (reference timeoutOrRecoveryAlgorithm: duration <= threshold continues):
        # present exactly FaultTimeout does not count, a millisecond more does
        ([_occur(100), _recover(120)], 120, IDLE),
        ([_occur(100), _recover(120)], 1000, IDLE),
        ([_occur(100), _recover(120.001)], 121, _counting(120, 180.001)),
        # an occur inside RecoverTimeout continues the fault; since is kept
        ([_occur(100), _recover(125), _occur(150)], 150, _counting(120)),
        ([_occur(100), _recover(125), _occur(150)], 500, _counting(120)),
        ([_occur(100), _recover(125), _occur(150), _recover(160)], 219, _counting(120, 220)),
        ([_occur(100), _recover(125), _occur(150), _recover(160)], 220, _counting(120, 220)),
        ([_occur(100), _recover(125), _occur(150), _recover(160)], 220.001, IDLE),
        # an occur exactly RecoverTimeout after the recovery still continues the fault; later is a fresh one
        ([_occur(100), _recover(125), _occur(185)], 185, _counting(120)),
        ([_occur(100), _recover(125), _occur(185.001)], 186, _pending(205.001)),
        ([_occur(100), _recover(125), _occur(185.001)], 205.002, _counting(205.001)),
        # a recover inside FaultTimeout ends it; the next occur starts the clock afresh
        ([_occur(100), _recover(115), _occur(118)], 130, _pending(138)),
        ([_occur(100), _recover(115), _occur(118)], 138, _pending(138)),
        ([_occur(100), _recover(115), _occur(118)], 139, _counting(138)),
        # a repeated occur while present does not restart the clock (reference merges equal assertions)
        ([_occur(100), _occur(115)], 121, _counting(120)),
        # a recover with nothing present is ignored
        ([_recover(90), _occur(100)], 110, _pending(120)),
        # a once event lasts an instant: it never reaches a positive FaultTimeout
        ([_once(100)], 100, IDLE),
        ([_once(100)], 200, IDLE),
        # a once event while present changes nothing
        ([_occur(100), _once(110)], 119, _pending(120)),
        # events after now are not seen yet
        ([_occur(100), _recover(105)], 104, _pending(120)),
        # events are put in time order first
        ([_recover(125), _occur(100)], 130, _counting(120, 185)),
        # nothing happened
        ([], 0, IDLE),
    ],
)
def test_link_down_duration(events: list[CodeEvent], now: float, expected: DurationState) -> None:
    assert duration_state(_link_down_duration(), events, now) == expected


@pytest.mark.parametrize(
    ("rule", "events", "now", "expected"),
    [
        # FaultTimeout 0: counts as soon as it has lasted at all (strictly more than 0)
        (_duration(0, 60), [_occur(5)], 5, _pending(5)),
        (_duration(0, 60), [_occur(5)], 5.001, _counting(5)),
        # a once event lasts no time, so it never counts
        (_duration(0, 60), [_once(5)], 5, IDLE),
        (_duration(0, 60), [_once(5)], 65, IDLE),
        # RecoverTimeout 0: clears as soon as it has been gone at all
        (_duration(10, 0), [_occur(5), _recover(30)], 29, _counting(15)),
        (_duration(10, 0), [_occur(5), _recover(30)], 30, _counting(15, 30)),
        (_duration(10, 0), [_occur(5), _recover(30)], 30.001, IDLE),
        # both 0: an instant fault is over at once
        (_duration(0, 0), [_once(5)], 5, IDLE),
        # the upper bounds of the ranges
        (_duration(600, 86400), [_occur(0), _recover(600)], 600, IDLE),
        (_duration(600, 86400), [_occur(0), _recover(600.001)], 601, _counting(600, 87000.001)),
        (_duration(600, 86400), [_occur(0), _recover(600.001)], 87000.002, IDLE),
    ],
)
def test_duration_edge_rules(rule: DurationRule, events: list[CodeEvent], now: float, expected: DurationState) -> None:
    assert duration_state(rule, events, now) == expected


def test_counting_spans_list_every_episode() -> None:
    events = [_occur(0), _recover(10), _occur(100), _recover(130), _occur(300)]
    rule = _link_down_duration()
    assert counting_spans(rule, events, 110) == []
    assert counting_spans(rule, events, 310) == [(120, 190)]  # the third episode is still inside its FaultTimeout
    assert counting_spans(rule, events, 320) == [(120, 190)]  # exactly FaultTimeout: not yet
    assert counting_spans(rule, events, 321) == [(120, 190), (320, None)]
    assert counting_spans(rule, events) == [(120, 190), (320, None)]


# --- occurrences and presence ----------------------------------------------------------------------


def test_occurrences_are_occur_and_once_events() -> None:
    events = [_occur(1), _recover(2), _once(3), _occur(4), _occur(5), _recover(9)]
    assert occurrences(events) == [1, 3, 4, 5]
    assert occurrences(events, now=3) == [1, 3]
    assert occurrences([]) == []


def test_occurrences_of_a_duration_code_are_its_counting_starts() -> None:
    # reference handleFaultQueue: a FaultDuration code reaches FaultFrequency when it starts counting
    events = [_occur(0), _recover(10), _occur(100), _recover(125), _occur(1000)]
    rule = _link_down_duration()
    assert occurrences(events, duration=rule, now=2000) == [120, 1020]
    assert occurrences(events, duration=rule, now=1010) == [120]


def test_presence_spans() -> None:
    events = [_occur(0), _occur(1), _recover(10), _once(20), _recover(25), _occur(30)]
    assert presence(events) == [(0, 10), (30, None)]
    assert presence(events, now=20) == [(0, 10)]
    assert presence(events, duration=_duration(5, 0), now=100) == [(5, 10), (35, None)]


# --- FaultFrequency: the contract examples, on the packaged rules --------------------------------------


def test_packaged_frequency_rules() -> None:
    hbm = _packaged_frequency(HBM_ECC)
    assert (hbm.times, hbm.time_window_s, hbm.handling, hbm.release_time_window_s) == (
        2,
        DAY,
        FaultLevel.MANUALLY_SEPARATE_NPU,
        0,
    )
    link = _packaged_frequency(LINK_DOWN)
    assert (link.times, link.time_window_s, link.handling, link.release_time_window_s) == (
        5,
        DAY,
        FaultLevel.MANUALLY_SEPARATE_NPU,
        172800,
    )


@pytest.mark.parametrize(
    ("occurred", "now", "released_at", "expected"),
    [
        # one occurrence: counted, nothing more
        ([1000], 1000, None, FrequencyState(False, None, 1, None)),
        # two within 24 h: ManuallySeparateNPU at the second, for good (no ReleaseTimeWindow)
        ([1000, 5000], 5000, None, FrequencyState(True, 5000, 0, None)),
        ([1000, 5000], 10 * DAY, None, FrequencyState(True, 5000, 0, None)),
        # exactly TimeWindow apart is still inside the window (both ends count, as in the reference)
        ([1000, 1000 + DAY], 1000 + DAY, None, FrequencyState(True, 1000 + DAY, 0, None)),
        ([1000, 1000 + DAY + 0.5], 1000 + DAY + 0.5, None, FrequencyState(False, None, 1, None)),
        # the first occurrence leaves the window after TimeWindow
        ([1000], 1000 + DAY, None, FrequencyState(False, None, 1, None)),
        ([1000], 1000 + DAY + 1, None, NOT_ESCALATED),
        # not yet: the second occurrence is after now
        ([1000, 5000], 4999, None, FrequencyState(False, None, 1, None)),
        # an administrator released the chip: the old occurrences no longer count
        ([1000, 5000], 6000, 5500, NOT_ESCALATED),
        ([1000, 5000, 7000], 7000, 5500, FrequencyState(False, None, 1, None)),
        ([1000, 5000, 7000, 8000], 8000, 5500, FrequencyState(True, 8000, 0, None)),
        # an occurrence exactly at the release is part of what was released
        ([1000, 5000, 5500, 7000], 7000, 5500, FrequencyState(False, None, 1, None)),
    ],
)
def test_hbm_ecc_frequency(
    occurred: list[float], now: float, released_at: float | None, expected: FrequencyState
) -> None:
    assert frequency_state(_packaged_frequency(HBM_ECC), occurred, now, released_at) == expected


def test_link_down_frequency_releases_after_two_quiet_days() -> None:
    rule = _packaged_frequency(LINK_DOWN)
    flaps = [0, 3600, 7200, 10800]
    assert frequency_state(rule, flaps, 10800) == FrequencyState(False, None, 4, None)
    five = [*flaps, 14400]
    assert frequency_state(rule, five, 14400) == FrequencyState(True, 14400, 0, 14400 + 172800)
    # still held at the boundary (reference: now - lastRecover > ReleaseTimeWindow), released just after
    assert frequency_state(rule, five, 14400 + 172800).escalated
    assert frequency_state(rule, five, 14400 + 172800.001) == released(14400 + 172800)
    # an occurrence while escalated keeps it alive and is not counted toward a new escalation
    six = [*five, 100000]
    assert frequency_state(rule, six, 100000 + 172800) == FrequencyState(True, 14400, 0, 100000 + 172800)
    assert frequency_state(rule, six, 100000 + 172800.001) == released(100000 + 172800)
    # after the release counting starts afresh: one new occurrence does not re-isolate
    after = [*five, 14400 + 172800 + 10]
    assert frequency_state(rule, after, 14400 + 172800 + 10) == FrequencyState(False, None, 1, None, 14400 + 172800)


def test_occurrence_exactly_at_the_release_keeps_it_and_one_after_counts_afresh() -> None:
    rule = _frequency(times=1, window=60, release=100)
    assert frequency_state(rule, [0, 99], 99) == FrequencyState(True, 0, 0, 199)
    # at 100 the escalation of 0 is still held, so the occurrence only keeps it alive
    assert frequency_state(rule, [0, 100], 100) == FrequencyState(True, 0, 0, 200)
    # after 100 it was released first, then the new occurrence escalates again on its own
    assert frequency_state(rule, [0, 100.5], 100.5) == FrequencyState(True, 100.5, 0, 200.5, 100)


def test_release_waits_for_the_code_to_be_gone() -> None:
    # the reference releases only when the fault has recovered and stayed recovered for ReleaseTimeWindow
    rule = _frequency(times=2, window=600, release=100)
    events = [_occur(0), _recover(10), _occur(20)]
    occurred, spans = occurrences(events), presence(events)
    assert frequency_state(rule, occurred, 5000) == released(120)  # by occurrences alone
    assert frequency_state(rule, occurred, 5000, present=spans) == FrequencyState(True, 20, 0, None)
    gone = [*events, _recover(5000)]
    assert frequency_state(rule, occurrences(gone), 5100, present=presence(gone)) == FrequencyState(True, 20, 0, 5100)
    assert frequency_state(rule, occurrences(gone), 5100.001, present=presence(gone)) == released(5100)
    # a presence beginning at or before the release boundary holds it; one beginning after it is too late
    once = _frequency(times=1, window=600, release=100)
    assert frequency_state(once, [0], 150, present=[(100, 200)]) == FrequencyState(True, 0, 0, 300)
    assert frequency_state(once, [0], 150, present=[(100.001, 200)]) == released(100)
    # a presence that started after the release does not bring the escalation back
    late = [_occur(0), _recover(1), _occur(5), _recover(6), _occur(500)]
    assert frequency_state(rule, [0, 5], 600, present=presence(late)) == released(106)


def test_admin_release_cuts_presence_too() -> None:
    rule = _frequency(times=1, window=600, release=100)
    # present since 0 and still present; released by an administrator at 50; a new occurrence at 60
    escalated = frequency_state(rule, [0, 60], 70, released_at=50, present=[(0, None)])
    assert escalated == FrequencyState(True, 60, 0, None)  # present: the release clock does not run
    assert frequency_state(rule, [0], 70, released_at=50, present=[(0, None)]) == NOT_ESCALATED
    # the release clock of a frequency escalation: released() names the boundary it passed


def test_link_down_that_never_lasts_its_fault_timeout_never_isolates() -> None:
    # with the packaged rules a link-down occurs for FaultFrequency only when it starts counting
    duration, frequency = _link_down_duration(), _packaged_frequency(LINK_DOWN)
    short_flaps = [event for start in range(0, 3600, 600) for event in (_occur(start), _recover(start + 10))]
    assert frequency_state(frequency, occurrences(short_flaps, duration=duration), 3600) == NOT_ESCALATED
    long_flaps = [event for start in range(0, 3600, 600) for event in (_occur(start), _recover(start + 30))]
    counted = occurrences(long_flaps, duration=duration)
    assert counted == [20, 620, 1220, 1820, 2420, 3020]
    assert frequency_state(frequency, counted, 3600) == FrequencyState(True, 2420, 0, 3020 + 172800)


# --- properties ----------------------------------------------------------------------------------------

# Some properties hold only for escalated states, which assume() selects: filtering is the point.
_SETTINGS = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.filter_too_much])


@st.composite
def _episodes(draw: st.DrawFn, max_length: int) -> list[CodeEvent]:
    """Occur / recover pairs (and some once events) in time order, integer times."""
    events: list[CodeEvent] = []
    t = draw(st.integers(0, 100))
    for _ in range(draw(st.integers(0, 8))):
        if draw(st.booleans()) and draw(st.booleans()):
            events.append(_once(t))
        else:
            length = draw(st.integers(0, max_length))
            events += [_occur(t), _recover(t + length)]
            t += length
        t += draw(st.integers(0, 200))
    if draw(st.booleans()):
        events.append(_occur(t))  # still present at the end
    return events


def _samples(events: Sequence[CodeEvent], extra: Sequence[float]) -> list[float]:
    times = {event.at for event in events} | set(extra)
    return sorted(times | {t + 0.5 for t in times} | {t - 0.5 for t in times})


@_SETTINGS
@given(fault_timeout=st.integers(1, 600), recover_timeout=st.integers(0, 1000), data=st.data())
def test_duration_never_counts_a_fault_shorter_than_fault_timeout(
    fault_timeout: int, recover_timeout: int, data: st.DataObject
) -> None:
    rule = _duration(fault_timeout, recover_timeout)
    events = data.draw(_episodes(max_length=fault_timeout))
    if events and events[-1].kind == "occur":
        events = [*events, _recover(events[-1].at + fault_timeout)]
    for now in _samples(events, [0.0, 10**6]):
        state = duration_state(rule, events, now)
        assert not state.counting
        assert state.since is None
    assert occurrences(events, duration=rule) == []


@_SETTINGS
@given(
    fault_timeout=st.integers(0, 600),
    recover_timeout=st.integers(0, 1000),
    events=_episodes(max_length=1000),
    offsets=st.lists(st.floats(0, 5000, allow_nan=False), min_size=1, max_size=10),
)
def test_duration_state_changes_at_most_once_without_events(
    fault_timeout: int, recover_timeout: int, events: list[CodeEvent], offsets: list[float]
) -> None:
    rule = _duration(fault_timeout, recover_timeout)
    last = max((event.at for event in events), default=0.0)
    first = duration_state(rule, events, last)
    settled = None if first.changes_at is None else duration_state(rule, events, first.changes_at + TICK)
    if settled is not None:
        assert settled != first
        assert settled.changes_at is None  # one change, then nothing more happens on its own
    for offset in offsets:
        now = last + offset
        state = duration_state(rule, events, now)
        if first.changes_at is None or now <= first.changes_at:
            assert state == first
        else:
            assert state == settled


@_SETTINGS
@given(
    fault_timeout=st.integers(0, 600),
    recover_timeout=st.integers(0, 1000),
    events=_episodes(max_length=1000),
)
def test_duration_counts_only_spans_longer_than_fault_timeout(
    fault_timeout: int, recover_timeout: int, events: list[CodeEvent]
) -> None:
    rule = _duration(fault_timeout, recover_timeout)
    spans = presence(events)
    for start, end in counting_spans(rule, events):
        # every counting span starts FaultTimeout into a presence that lasted longer than that
        assert any(s + fault_timeout == start and (e is None or e > start) for s, e in spans)
        if end is not None:
            assert end >= start + recover_timeout


def _max_in_window(occurred: Sequence[float], window: float) -> int:
    return max((sum(1 for u in occurred if t - window <= u <= t) for t in occurred), default=0)


_occurrence_lists = st.lists(st.integers(0, 5000), max_size=15).map(sorted)
_frequency_rules = st.builds(
    _frequency,
    times=st.integers(1, 6),
    window=st.integers(60, 1000),
    release=st.one_of(st.just(0), st.integers(60, 2000)),
)


@_SETTINGS
@given(rule=_frequency_rules, occurred=_occurrence_lists, now=st.integers(0, 8000))
def test_frequency_never_escalates_with_fewer_than_times_in_any_window(
    rule: FrequencyRule, occurred: list[int], now: int
) -> None:
    state = frequency_state(rule, occurred, now)
    seen = [t for t in occurred if t <= now]
    if _max_in_window(seen, rule.time_window_s) < rule.times:
        assert not state.escalated
    if state.escalated:
        assert state.escalated_at is not None
        assert state.escalated_at in seen
        in_window = [t for t in seen if state.escalated_at - rule.time_window_s <= t <= state.escalated_at]
        assert len(in_window) >= rule.times
        assert state.count_in_window == 0
    else:
        assert state.count_in_window < rule.times
        assert state.escalated_at is None
        assert state.releases_at is None


@_SETTINGS
@given(
    rule=st.builds(_frequency, times=st.integers(1, 6), window=st.integers(60, 1000)),
    occurred=_occurrence_lists,
    extra=st.integers(0, 5000),
    now=st.integers(0, 8000),
)
def test_without_release_an_added_occurrence_never_un_escalates(
    rule: FrequencyRule, occurred: list[int], extra: int, now: int
) -> None:
    assume(frequency_state(rule, occurred, now).escalated)
    assert frequency_state(rule, sorted([*occurred, extra]), now).escalated


@_SETTINGS
@given(rule=_frequency_rules, occurred=_occurrence_lists, later=st.integers(0, 3000), wait=st.integers(0, 3000))
def test_a_new_occurrence_never_un_escalates_before_release(
    rule: FrequencyRule, occurred: list[int], later: int, wait: int
) -> None:
    assume(occurred)
    last = occurred[-1]
    before = frequency_state(rule, occurred, last + later)
    assume(before.escalated)
    new = last + later
    after = frequency_state(rule, [*occurred, new], new + wait)
    still = frequency_state(rule, [*occurred, new], new)
    assert still.escalated
    assert still.escalated_at == before.escalated_at
    if before.releases_at is not None:
        assert still.releases_at is not None
        assert still.releases_at >= before.releases_at
    if rule.release_time_window_s == 0 or wait < rule.release_time_window_s:
        assert after.escalated


@_SETTINGS
@given(
    rule=_frequency_rules,
    occurred=_occurrence_lists,
    offsets=st.lists(st.floats(0, 10000, allow_nan=False), min_size=2, max_size=10).map(sorted),
)
def test_frequency_state_is_monotone_in_time_without_occurrences(
    rule: FrequencyRule, occurred: list[int], offsets: list[float]
) -> None:
    last = occurred[-1] if occurred else 0
    states = [(last + offset, frequency_state(rule, occurred, last + offset)) for offset in offsets]
    for (t1, s1), (t2, s2) in itertools.pairwise(states):
        assert s2.count_in_window <= s1.count_in_window
        assert s1.escalated or not s2.escalated  # once released it stays released
        if s1.escalated and not s2.escalated:
            assert s1.releases_at is not None
            # The state changes strictly after its boundary (timeline's rule): still escalated at
            # releases_at itself, released after it.
            assert t1 <= s1.releases_at < t2
        if s1.escalated and s2.escalated:
            assert s1 == s2


@_SETTINGS
@given(rule=_frequency_rules, occurred=_occurrence_lists, released_at=st.integers(0, 5000), now=st.integers(0, 8000))
def test_an_admin_release_forgets_what_came_before(
    rule: FrequencyRule, occurred: list[int], released_at: int, now: int
) -> None:
    kept = [t for t in occurred if t > released_at]
    assert frequency_state(rule, occurred, now, released_at) == frequency_state(rule, kept, now)
    if len(kept) < rule.times:
        assert not frequency_state(rule, occurred, now, released_at).escalated
