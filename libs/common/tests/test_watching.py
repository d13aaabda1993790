"""The list+watch rules (ascend_common.watching): timeouts, backoff, what follows each kind of end."""

from __future__ import annotations

import pytest
from ascend_common.watching import Ending, Step, WatchEnd, WatchPolicy, backoff_s, next_step, watch_timeout_s

POLICY = WatchPolicy()  # 300-600 s, backoff 0.8-30 s, Retry-After up to 60 s


@pytest.mark.parametrize(
    ("u", "expected"),
    [(0.0, 300), (0.5, 450), (0.999999, 600), (0.1, 330)],
)
def test_watch_timeout_spreads_over_five_to_ten_minutes(u: float, expected: int) -> None:
    assert watch_timeout_s(POLICY, u) == expected


def test_a_fixed_policy_asks_for_one_timeout() -> None:
    fixed = WatchPolicy.fixed(7)
    assert {watch_timeout_s(fixed, u) for u in (0.0, 0.5, 0.99)} == {7}


@pytest.mark.parametrize(
    ("failures", "u", "expected"),
    [
        (1, 0.0, 0.4),  # half of base ...
        (1, 1.0, 0.8),  # ... to all of it
        (2, 0.0, 0.8),
        (3, 0.5, 2.4),  # ceiling 3.2: 1.6 + 0.8
        (6, 1.0, 25.6),
        (7, 0.0, 15.0),  # capped at 30 s: between 15 and 30
        (50, 1.0, 30.0),
        (0, 1.0, 0.8),  # never less than a first failure's
    ],
)
def test_backoff_is_exponential_with_equal_jitter(failures: int, u: float, expected: float) -> None:
    assert backoff_s(failures, 0.8, 30.0, u) == pytest.approx(expected)


@pytest.mark.parametrize(
    ("end", "failures", "expected"),
    [
        # Ran its course (the server's timeout): resume at once from the last resourceVersion, no list.
        (WatchEnd(Ending.CLOSED, said=0, lasted_s=300, timeout_s=300), 3, Step(False, 0.0, 0)),
        # Ended early, but it said something (events, a bookmark): a healthy watch.
        (WatchEnd(Ending.CLOSED, said=1, lasted_s=2, timeout_s=300), 2, Step(False, 0.0, 0)),
        # Ended early with nothing said: backed off, not retried at once; resumed, not re-listed.
        (WatchEnd(Ending.CLOSED, said=0, lasted_s=1, timeout_s=300), 0, Step(False, 0.6, 1)),
        (WatchEnd(Ending.CLOSED, said=0, lasted_s=1, timeout_s=300), 1, Step(False, 1.2, 2)),
        # A first 410: one list, at once.
        (WatchEnd(Ending.GONE, said=4, lasted_s=100, timeout_s=300), 0, Step(True, 0.0, 1)),
        # A 410 after failures (a server back from an outage): its backoff (1.2 s) or a draw from
        # the 10 s relist spread (5 s at u = 0.5), whichever is longer.
        (WatchEnd(Ending.GONE), 1, Step(True, 5.0, 2)),
        (WatchEnd(Ending.GONE), 6, Step(True, 22.5, 7)),  # the backoff (15-30 s) is longer
        # 429: at least its Retry-After, then the watch resumes.
        (WatchEnd(Ending.THROTTLED, retry_after_s=5), 0, Step(False, 5.0, 1)),
        (WatchEnd(Ending.THROTTLED, retry_after_s=0.1), 0, Step(False, 0.6, 1)),  # backoff is longer
        (WatchEnd(Ending.THROTTLED, retry_after_s=3600), 0, Step(False, 60.0, 1)),  # bounded
        (WatchEnd(Ending.THROTTLED), 0, Step(False, 0.6, 1)),  # no Retry-After: plain backoff
        # Refused, 5xx, a broken stream: backoff, then resume from the same resourceVersion.
        (WatchEnd(Ending.FAILED, said=9, lasted_s=100, timeout_s=300), 0, Step(False, 0.6, 1)),
        # A failed list is listed again, after backoff (and Retry-After).
        (WatchEnd(Ending.FAILED, listing=True), 0, Step(True, 0.6, 1)),
        (WatchEnd(Ending.THROTTLED, retry_after_s=2, listing=True), 0, Step(True, 2.0, 1)),
        (WatchEnd(Ending.GONE, listing=True), 0, Step(True, 0.6, 1)),  # an expired continue token
    ],
)
def test_next_step(end: WatchEnd, failures: int, expected: Step) -> None:
    step = next_step(end, failures, POLICY, 0.5)
    assert step.relist == expected.relist and step.failures == expected.failures
    assert step.delay_s == pytest.approx(expected.delay_s)


@pytest.mark.parametrize(
    ("u", "spread", "cap", "expected"),
    [
        (0.0, 10.0, 30.0, 0.8),  # the draw is 0: the backoff of a second failure (0.8-1.6 s)
        (0.9, 10.0, 30.0, 9.0),
        (0.9, 10.0, 2.0, 1.8),  # the spread no wider than the backoff cap
        (0.9, 0.0, 30.0, 1.52),  # no spread: plain backoff
    ],
)
def test_a_relist_after_an_outage_is_spread(u: float, spread: float, cap: float, expected: float) -> None:
    policy = WatchPolicy(backoff_max_s=cap, relist_spread_s=spread)
    step = next_step(WatchEnd(Ending.GONE), 1, policy, u)
    assert step.relist and step.delay_s == pytest.approx(expected)


def test_spreads_a_fleet_of_relists_over_the_window() -> None:
    """A fleet whose retries land together: their relists spread over the whole window."""
    delays = [next_step(WatchEnd(Ending.GONE), 3, POLICY, i / 100).delay_s for i in range(100)]
    assert min(delays) == pytest.approx(3.2) and max(delays) == pytest.approx(9.9)  # backoff 3.2-6.4 s


def test_a_negative_spread_is_refused() -> None:
    with pytest.raises(ValueError, match="relist spread"):
        WatchPolicy(relist_spread_s=-1)


@pytest.mark.parametrize(
    ("low", "high", "base", "cap"),
    [(0, 10, 1.0, 2.0), (11, 10, 1.0, 2.0), (1, 1, 0.0, 1.0), (1, 1, 2.0, 1.0)],
)
def test_a_policy_out_of_range_is_refused(low: int, high: int, base: float, cap: float) -> None:
    with pytest.raises(ValueError, match="is not"):
        WatchPolicy(low, high, base, cap)
