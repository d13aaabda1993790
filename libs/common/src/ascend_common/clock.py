"""The one source of time for every service, replaceable in tests.

Policy windows (fault timeouts, frequency windows, idle and token periods) are shrunk by a
time-scale factor for drills; poll periods, rate limits and backoffs are never scaled, so
callers ask for `policy_seconds()` only where a policy window is meant.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Protocol


class Clock(Protocol):
    def now(self) -> float:
        """Wall-clock seconds since the epoch."""

    def monotonic(self) -> float:
        """Seconds from an arbitrary origin; never goes back."""

    @property
    def time_scale(self) -> float:
        """How many times faster policy time passes than real time (1.0 in production)."""


@dataclass(frozen=True)
class SystemClock:
    time_scale: float = 1.0

    def now(self) -> float:
        return time.time()

    def monotonic(self) -> float:
        return time.monotonic()


@dataclass
class ManualClock:
    """A clock that moves only when told to; for table-driven tests."""

    wall: float = 1_700_000_000.0
    mono: float = 1000.0
    time_scale: float = 1.0
    _history: list[float] = field(default_factory=list)

    def now(self) -> float:
        return self.wall

    def monotonic(self) -> float:
        return self.mono

    def advance(self, seconds: float) -> None:
        if seconds < 0:
            raise ValueError("a clock never goes back")
        self.wall += seconds
        self.mono += seconds


def policy_seconds(clock: Clock, seconds: float) -> float:
    """Real seconds a policy window of `seconds` lasts under the clock's time scale."""
    return seconds / clock.time_scale


def unix_ms(clock: Clock) -> int:
    return int(clock.now() * 1000)
