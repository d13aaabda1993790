"""How a list+watch keeps going, as client-go's reflector runs one: pure rules, no I/O.

The shell (`ascend_common.adapters.kube.watch.Reflector`) asks these what to do after each watch
and each failed list: the server-side timeout to ask for, whether to list again, how long to wait.
Randomness comes in as `u`, a draw from [0, 1), so that each rule is a plain table.

- A watch asks the server for a timeout drawn from [min_timeout_s, max_timeout_s] (client-go:
  minWatchTimeout 5 min times 1 + rand), so that a fleet's watches do not all end together.
- A watch that ran its course, or that said anything (an event, a bookmark), is resumed at once
  from the last resourceVersion it saw: no list.
- 410 Gone: that resourceVersion left the server's window; list again (one paginated list), at
  once the first time.
- A 410 after failures is a server back from an outage (a restarted kube-apiserver's watch cache
  starts at etcd's current revision, so every client's resume gets one): the list waits its
  backoff or a draw from [0, relist_spread_s), whichever is longer (the spread no wider than the
  backoff cap), so that a fleet whose retries reach the new server together does not list
  together. client-go has no such spread; it lists as soon as its retry lands.
- 429 (API Priority and Fairness): wait at least its Retry-After, and resume.
- Any other failure, and a watch that ended early having said nothing (a proxy, a sick server):
  backoff with jitter, then resume from the same resourceVersion (a 410 then says if it is too old).
- A list that failed is tried again after backoff (Retry-After honoured the same way).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass


@dataclass(frozen=True)
class WatchPolicy:
    min_timeout_s: int = 300  # client-go's minWatchTimeout
    max_timeout_s: int = 600
    backoff_base_s: float = 0.8  # client-go's reflector backoff starts at 800 ms ...
    backoff_max_s: float = 30.0  # ... and is capped at 30 s
    max_retry_after_s: float = 60.0  # a Retry-After beyond this is taken as this
    relist_spread_s: float = 10.0  # the window a relist after an outage is drawn from

    def __post_init__(self) -> None:
        if not 1 <= self.min_timeout_s <= self.max_timeout_s:
            raise ValueError(f"watch timeout range {self.min_timeout_s}-{self.max_timeout_s} s is not 1 <= min <= max")
        if not 0 < self.backoff_base_s <= self.backoff_max_s:
            raise ValueError(f"backoff {self.backoff_base_s}-{self.backoff_max_s} s is not 0 < base <= cap")
        if self.relist_spread_s < 0:
            raise ValueError(f"relist spread {self.relist_spread_s} s is not >= 0")

    @classmethod
    def fixed(cls, timeout_s: int, backoff_base_s: float = 0.8, backoff_max_s: float = 30.0) -> WatchPolicy:
        """One timeout for every watch (tests, and callers that want one)."""
        timeout = max(1, int(timeout_s))
        return cls(timeout, timeout, backoff_base_s, max(backoff_base_s, backoff_max_s))


def watch_timeout_s(policy: WatchPolicy, u: float) -> int:
    """The timeoutSeconds to ask for: spread evenly over the policy's range by `u` in [0, 1)."""
    span = policy.max_timeout_s - policy.min_timeout_s
    return min(policy.max_timeout_s, policy.min_timeout_s + int(u * (span + 1)))


def backoff_s(failures: int, base: float, cap: float, u: float) -> float:
    """The wait after the n-th failure in a row (n >= 1): between half and all of base * 2**(n-1),
    capped at `cap` (equal jitter: never zero, never in step with other clients)."""
    ceiling = min(cap, base * 2.0 ** min(max(failures, 1) - 1, 30))
    return ceiling / 2 + u * ceiling / 2


class Ending(enum.Enum):
    CLOSED = "closed"  # the server ended the stream without an error (its timeout, or a proxy's)
    GONE = "gone"  # 410: the resourceVersion is out of the server's window
    THROTTLED = "throttled"  # 429
    FAILED = "failed"  # anything else: refused, 5xx, transport, a broken stream


@dataclass(frozen=True)
class WatchEnd:
    """How one watch (or, with `listing`, one list) ended."""

    ending: Ending
    said: int = 0  # events and bookmarks received
    lasted_s: float = 0.0
    timeout_s: int = 0  # the timeoutSeconds it asked for
    retry_after_s: float | None = None
    listing: bool = False


@dataclass(frozen=True)
class Step:
    """What to do next: list again or resume the watch, after `delay_s`; `failures` in a row so far."""

    relist: bool
    delay_s: float
    failures: int


def ran_its_course(end: WatchEnd) -> bool:
    """A healthy watch: it said something, or lasted at least half the time it asked for."""
    return end.ending is Ending.CLOSED and (end.said > 0 or end.lasted_s >= end.timeout_s / 2)


def next_step(end: WatchEnd, failures: int, policy: WatchPolicy, u: float) -> Step:
    """After a watch or a list ended as `end`, with `failures` failures in a row before it."""
    if not end.listing and ran_its_course(end):
        return Step(relist=False, delay_s=0.0, failures=0)
    count = failures + 1
    delay = backoff_s(count, policy.backoff_base_s, policy.backoff_max_s, u)
    if end.ending is Ending.GONE and not end.listing:
        # Being away too long is routine: the first 410 lists at once. One after failures (an
        # outage) or after another 410 waits its backoff or a draw from the spread, if longer.
        if failures == 0:
            return Step(relist=True, delay_s=0.0, failures=count)
        spread = min(policy.relist_spread_s, policy.backoff_max_s)
        return Step(relist=True, delay_s=max(delay, u * spread), failures=count)
    if end.ending is Ending.THROTTLED and end.retry_after_s is not None:
        delay = max(delay, min(end.retry_after_s, policy.max_retry_after_s))
    return Step(relist=end.listing, delay_s=delay, failures=count)
