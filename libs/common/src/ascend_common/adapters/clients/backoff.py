"""Exponential backoff with equal jitter, for reconnect and retry loops."""

from __future__ import annotations

import random
from dataclasses import dataclass, field

from ascend_common.watching import backoff_s


@dataclass
class Backoff:
    """The n-th delay since the last reset lies between half and all of base * 2**(n-1), capped at `cap`."""

    base: float = 0.05
    cap: float = 5.0
    _attempt: int = field(default=0, init=False)

    @property
    def attempts(self) -> int:
        """Delays handed out since the last reset: the failures in a row."""
        return self._attempt

    def next(self) -> float:
        """Seconds to wait before the next attempt."""
        self._attempt += 1
        return backoff_s(self._attempt, self.base, self.cap, random.random())

    def reset(self) -> None:
        self._attempt = 0
