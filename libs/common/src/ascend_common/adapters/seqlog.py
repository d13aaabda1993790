"""A bounded, sequence-numbered log of published items that readers tail and resume.

Shared by the exporter's event stream and the fault-manager's verdict stream: each item is
stored with its wire form (encoded once), readers ask for what came after the sequence
number they hold, and learn when the ring buffer no longer has it (they then re-read a
snapshot). Lives on one event loop thread: no locks.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Generic, TypeVar

T = TypeVar("T")


@dataclass(frozen=True)
class Entry(Generic[T]):
    seq: int
    item: T
    wire: bytes


class SeqLog(Generic[T]):
    def __init__(self, capacity: int) -> None:
        self._buffer: deque[Entry[T]] = deque(maxlen=capacity)
        self._head = 0
        self._changed = asyncio.Event()

    @property
    def head_seq(self) -> int:
        return self._head

    @property
    def next_seq(self) -> int:
        return self._head + 1

    def oldest_seq(self) -> int:
        return self._buffer[0].seq if self._buffer else self._head + 1

    def append(self, item: T, wire: bytes) -> int:
        """Store the item published as `next_seq`; wake every waiting reader."""
        self._head += 1
        self._buffer.append(Entry(self._head, item, wire))
        self._changed.set()
        self._changed = asyncio.Event()
        return self._head

    def holds_after(self, seq: int) -> bool:
        """Whether every item after `seq` is still in the buffer."""
        return seq >= self.oldest_seq() - 1

    def after(self, seq: int) -> list[Entry[T]] | None:
        """Items after `seq`, or None when some of them were evicted (the reader fell behind)."""
        if seq >= self._head:
            return []
        if not self.holds_after(seq):
            return None
        # Walk from the newest end: a tailing reader needs only the last few items.
        newer: list[Entry[T]] = []
        for entry in reversed(self._buffer):
            if entry.seq <= seq:
                break
            newer.append(entry)
        newer.reverse()
        return newer

    async def wait_after(self, seq: int, within: float | None) -> None:
        """Return when an item after `seq` exists, or after `within` seconds (None: no bound)."""
        if seq < self._head:
            return
        waiter = self._changed
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(within):
                await waiter.wait()

    async def frames(self, cursor: int, evicted: Callable[[int], bytes]) -> AsyncIterator[bytes]:
        """The wire frames after `cursor`, forever: what a stream handler sends (its response, an
        sse-starlette EventSourceResponse, pings an idle stream so proxies keep it).

        A reader that falls behind the buffer gets `evicted(cursor)` once and continues from the
        newest item.
        """
        while True:
            batch = self.after(cursor)
            if batch is None:
                yield evicted(cursor)
                cursor = self._head
                continue
            if batch:
                yield b"".join(entry.wire for entry in batch)
                cursor = batch[-1].seq
                continue
            await self.wait_after(cursor, None)
