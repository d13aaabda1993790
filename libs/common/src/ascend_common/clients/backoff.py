"""Exponential backoff with full jitter, for reconnect loops."""

from __future__ import annotations

import random
from dataclasses import dataclass, field


@dataclass
class Backoff:
    base: float = 0.05
    cap: float = 5.0
    _attempt: int = field(default=0, init=False)

    def next(self) -> float:
        """Seconds to wait before the next attempt."""
        delay = min(self.cap, self.base * (2**self._attempt))
        self._attempt = min(self._attempt + 1, 30)
        return random.uniform(delay / 2, delay)

    def reset(self) -> None:
        self._attempt = 0
