"""Following a list-then-stream API without missing what happens in between.

Both event APIs of the project work this way (the exporter's `/v1/events`, the fault-manager's
`/v1/verdicts/events`): a consumer reads what the stream is relative to (a list, a snapshot, a
stored position), then tails the stream from there. When the stream cannot go on from where it
is (a gap, a new run, a cursor the other side no longer holds) the consumer raises `Resync` and
is synced again at once; when the other side cannot be reached, it is told (`lost`) and synced
again after a backoff.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Protocol

from httpx_sse import EventSource, ServerSentEvent

from ascend_common.adapters.clients.backoff import Backoff

# A Retry-After longer than this is taken as this: a confused or hostile server cannot park a consumer.
MAX_RETRY_AFTER_S = 30.0


async def data_events(source: EventSource) -> AsyncIterator[ServerSentEvent]:
    """The stream's events, without the empty one httpx-sse dispatches for a keep-alive comment once
    an id was seen (its issue #35: the SSE spec dispatches nothing for an empty data buffer; every
    event of our servers carries data)."""
    async for msg in source.aiter_sse():
        if msg.data:
            yield msg


class Resync(Exception):
    """The stream cannot continue where it is: sync again at once, then stream from `resume`."""

    def __init__(self, resume: str | None = None) -> None:
        super().__init__(resume)
        self.resume = resume


def retry_after_s(header: str | None) -> float | None:
    """The seconds of a Retry-After header (the delay form, the only one our servers send), bounded
    by `MAX_RETRY_AFTER_S`; None when absent or unreadable."""
    if header is None:
        return None
    try:
        seconds = float(header)
    except ValueError:
        return None
    return min(max(seconds, 0.0), MAX_RETRY_AFTER_S) if seconds == seconds else None  # NaN: unreadable


class Feed(Protocol):
    """One consumer of a list-then-stream API."""

    async def sync(self, resume: str | None) -> str | None:
        """Read what the stream is relative to; returns where to stream from (`resume`: where a
        `Resync` or the last message left it)."""

    def stream(self, position: str | None) -> AsyncIterator[ServerSentEvent]:
        """The messages after `position`."""

    async def take(self, msg: ServerSentEvent) -> str | None:
        """One message; returns the position after it (None: unchanged). May raise `Resync`."""

    async def lost(self, error: Exception) -> None:
        """The other side could not be reached or answered nonsense; a sync follows the backoff."""


async def follow(feed: Feed, backoff: Backoff, transient: tuple[type[Exception], ...]) -> None:
    """Keep `feed` in step with its stream, forever; errors of the `transient` kinds are retried."""
    position: str | None = None
    while True:
        try:
            position = await feed.sync(position)
            backoff.reset()
            async for msg in feed.stream(position):
                position = await feed.take(msg) or position
        except Resync as again:
            position = again.resume
        except transient as exc:
            await feed.lost(exc)
            # The other side's own estimate, when it gave one, beats ours (never shorter than our backoff).
            hint = getattr(exc, "retry_after", None)
            await asyncio.sleep(max(backoff.next(), hint if isinstance(hint, float) else 0.0))
