"""The exporter's event log: a bounded ring buffer with resumable cursors.

Ids are `<run_id>-<seq>`; seq starts at 1 for each run. Everything here runs on the event
loop thread, so publishing and reading need no lock.
"""

from __future__ import annotations

import asyncio
import contextlib
import secrets
import time
from collections import deque
from dataclasses import dataclass
from typing import Any

from ascend_common import sse
from ascend_common.schemas.exporter import EventType, ExporterEvent, GapData


@dataclass(frozen=True)
class Stored:
    seq: int
    event: ExporterEvent
    wire: bytes  # the SSE frame, encoded once


@dataclass(frozen=True)
class Resume:
    """Where a reader starts: after `seq`, preceded by a gap event when `gap` is set."""

    seq: int
    gap: GapData | None = None


class EventLog:
    def __init__(self, capacity: int, run_id: str | None = None) -> None:
        self.run_id = run_id or f"{int(time.time()):x}{secrets.token_hex(3)}"
        self._buffer: deque[Stored] = deque(maxlen=capacity)
        self._head = 0
        self._changed = asyncio.Event()
        self.published = 0

    @property
    def head_seq(self) -> int:
        return self._head

    @property
    def head_id(self) -> str | None:
        return self.make_id(self._head) if self._head else None

    def make_id(self, seq: int) -> str:
        return f"{self.run_id}-{seq}"

    def publish(self, type_: EventType, now: float, **fields: Any) -> ExporterEvent:
        self._head += 1
        event = ExporterEvent(id=self.make_id(self._head), type=type_, time=now, **fields)
        wire = sse.encode(type_.value, event.model_dump_json(exclude_none=True), event.id)
        self._buffer.append(Stored(self._head, event, wire))
        self.published += 1
        # Wake every waiting reader, then arm a fresh event for the next publish.
        self._changed.set()
        self._changed = asyncio.Event()
        return event

    def resume(self, last_event_id: str | None) -> Resume:
        if not last_event_id:
            return Resume(self._head)
        run, sep, seq_text = last_event_id.rpartition("-")
        if not sep or not seq_text.isdigit():
            return Resume(self._head, GapData(reason="malformed", requested=last_event_id, resume_after=self.head_id))
        if run != self.run_id:
            return Resume(self._head, GapData(reason="other_run", requested=last_event_id, resume_after=self.head_id))
        seq = int(seq_text)
        if seq > self._head:
            return Resume(self._head, GapData(reason="malformed", requested=last_event_id, resume_after=self.head_id))
        if seq < self._oldest() - 1:
            return Resume(self._head, GapData(reason="evicted", requested=last_event_id, resume_after=self.head_id))
        return Resume(seq)

    def _oldest(self) -> int:
        return self._buffer[0].seq if self._buffer else self._head + 1

    def after(self, seq: int) -> list[Stored] | None:
        """Events after `seq`, or None when some of them were evicted (the reader fell behind)."""
        if seq >= self._head:
            return []
        if seq < self._oldest() - 1:
            return None
        # Walk from the newest end: a tailing reader needs only the last few events.
        newer: list[Stored] = []
        for stored in reversed(self._buffer):
            if stored.seq <= seq:
                break
            newer.append(stored)
        newer.reverse()
        return newer

    async def wait_after(self, seq: int, within: float) -> None:
        """Return when an event after `seq` exists, or after `within` seconds."""
        if seq < self._head:
            return
        waiter = self._changed
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(within):
                await waiter.wait()
