"""The published verdicts: the current one per chip, a revision counter and its stream.

`GET /v1/verdicts` reads `listing()`; `/v1/verdicts/events` tails the SeqLog, whose
sequence numbers are the revisions. The epoch changes with every start of the
fault-manager, so a consumer holding revisions of an earlier run re-reads the list.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import AsyncIterator

from ascend_common.adapters.seqlog import SeqLog
from ascend_common.schemas.verdict import ChipVerdict, VerdictEvent, VerdictList
from sse_starlette import ServerSentEvent

KEEPALIVE_S = 15.0  # the stream response pings an idle stream this often


class VerdictBoard:
    def __init__(self, capacity: int = 16_384) -> None:
        self.epoch = f"{int(time.time()):x}{secrets.token_hex(3)}"
        self._log: SeqLog[VerdictEvent] = SeqLog(capacity)
        self._current: dict[str, ChipVerdict] = {}

    @property
    def revision(self) -> int:
        return self._log.head_seq

    def get(self, chip: str) -> ChipVerdict | None:
        return self._current.get(chip)

    def current(self) -> dict[str, ChipVerdict]:
        return dict(self._current)

    def publish(self, verdict: ChipVerdict) -> bool:
        """A new revision when the chip's verdict changed; False (and nothing sent) otherwise."""
        if self._current.get(verdict.chip) == verdict:
            return False
        self._current[verdict.chip] = verdict
        event = VerdictEvent(epoch=self.epoch, revision=self._log.next_seq, verdict=verdict)
        # Encoded once, here, for every reader (the ring buffer keeps the frame).
        frame = ServerSentEvent(event.model_dump_json(), event="verdict", id=str(event.revision), sep="\n").encode()
        self._log.append(event, frame)
        return True

    def listing(self) -> VerdictList:
        return VerdictList(
            epoch=self.epoch,
            revision=self.revision,
            verdicts=sorted(self._current.values(), key=lambda v: v.phy_id),
        )

    async def stream(self, last_event_id: str | None) -> AsyncIterator[ServerSentEvent | bytes]:
        """SSE frames after `last_event_id`; a `reset` event when it cannot resume from there."""
        cursor = self.revision
        if last_event_id is not None:
            if (
                last_event_id.isdigit()
                and int(last_event_id) <= self.revision
                and self._log.holds_after(int(last_event_id))
            ):
                cursor = int(last_event_id)
            else:
                yield ServerSentEvent('{"reason":"cannot resume; re-read /v1/verdicts"}', event="reset", sep="\n")
        reset = ServerSentEvent('{"reason":"fell behind; re-read /v1/verdicts"}', event="reset", sep="\n").encode()
        async for frame in self._log.frames(cursor, lambda _behind: reset):
            yield frame
