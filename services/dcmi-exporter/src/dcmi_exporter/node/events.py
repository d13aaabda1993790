"""The exporter's event log: a bounded ring buffer with resumable cursors.

Ids are `<run_id>-<seq>`; seq starts at 1 for each run. Everything here runs on the event
loop thread, so publishing and reading need no lock.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any

from ascend_common.adapters.seqlog import Entry, SeqLog
from ascend_common.schemas.exporter import EventType, ExporterEvent, GapData
from sse_starlette import ServerSentEvent

Stored = Entry[ExporterEvent]


@dataclass(frozen=True)
class Resume:
    """Where a reader starts: after `seq`, preceded by a gap event when `gap` is set."""

    seq: int
    gap: GapData | None = None


class EventLog:
    def __init__(self, capacity: int, run_id: str | None = None) -> None:
        self.run_id = run_id or f"{int(time.time()):x}{secrets.token_hex(3)}"
        self._log: SeqLog[ExporterEvent] = SeqLog(capacity)
        self.published = 0

    @property
    def head_seq(self) -> int:
        return self._log.head_seq

    @property
    def head_id(self) -> str | None:
        return self.make_id(self.head_seq) if self.head_seq else None

    def make_id(self, seq: int) -> str:
        return f"{self.run_id}-{seq}"

    def publish(self, type_: EventType, now: float, **fields: Any) -> ExporterEvent:
        event = ExporterEvent(id=self.make_id(self._log.next_seq), type=type_, time=now, **fields)
        # exclude_unset, not exclude_none: a nested null (a polled fault's severity, an unknown
        # chip's health) is a value the reader's schema requires; only unused top-level fields go.
        # Encoded once, here, for every reader (the ring buffer keeps the frame).
        wire = ServerSentEvent(
            event.model_dump_json(exclude_unset=True), event=type_.value, id=event.id, sep="\n"
        ).encode()
        self._log.append(event, wire)
        self.published += 1
        return event

    def resume(self, last_event_id: str | None) -> Resume:
        if not last_event_id:
            return Resume(self.head_seq)
        run, sep, seq_text = last_event_id.rpartition("-")
        if not sep or not seq_text.isdigit():
            return Resume(
                self.head_seq, GapData(reason="malformed", requested=last_event_id, resume_after=self.head_id)
            )
        if run != self.run_id:
            return Resume(
                self.head_seq, GapData(reason="other_run", requested=last_event_id, resume_after=self.head_id)
            )
        seq = int(seq_text)
        if seq > self.head_seq:
            return Resume(
                self.head_seq, GapData(reason="malformed", requested=last_event_id, resume_after=self.head_id)
            )
        if not self._log.holds_after(seq):
            return Resume(self.head_seq, GapData(reason="evicted", requested=last_event_id, resume_after=self.head_id))
        return Resume(seq)

    def after(self, seq: int) -> list[Stored] | None:
        """Events after `seq`, or None when some of them were evicted (the reader fell behind)."""
        return self._log.after(seq)

    def frames(self, cursor: int, evicted: Callable[[int], bytes]) -> AsyncIterator[bytes]:
        return self._log.frames(cursor, evicted)
