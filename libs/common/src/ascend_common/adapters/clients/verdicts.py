"""Follow the fault-manager's verdicts: the list, then its event stream, by the cursor rules.

While the fault-manager is unreachable the follower keeps the last verdicts and says it is
disconnected; the consumer decides what that means (the device-plugin may only make them
worse, never release a chip the fault-manager isolated).
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from pathlib import Path

import httpx
from httpx_sse import ServerSentEvent, aconnect_sse

from ascend_common.adapters.clients.backoff import Backoff
from ascend_common.adapters.clients.stream import Resync, data_events, follow
from ascend_common.adapters.lifecycle import TaskScope
from ascend_common.schemas.verdict import (
    VERDICT_EVENTS_PATH,
    VERDICTS_PATH,
    ChipVerdict,
    CursorAction,
    VerdictCursor,
    VerdictEvent,
    VerdictList,
)

log = logging.getLogger(__name__)
VerdictsChanged = Callable[[Mapping[str, ChipVerdict]], Awaitable[None] | None]


class VerdictFollower:
    def __init__(self, socket: Path, on_change: VerdictsChanged, tasks: TaskScope, timeout: float = 5.0) -> None:
        self._http = httpx.AsyncClient(
            transport=httpx.AsyncHTTPTransport(uds=str(socket)), base_url="http://fault-manager", timeout=timeout
        )
        self.on_change = on_change
        self.verdicts: dict[str, ChipVerdict] = {}
        self.cursor = VerdictCursor()
        self.connected = False
        self.ever_connected = False
        self._tasks = tasks

    async def start(self) -> None:
        self._tasks.essential(follow(self, Backoff(), (httpx.HTTPError, OSError, ValueError)), "verdict-follow")

    async def stop(self) -> None:
        await self._tasks.stop()
        await self._http.aclose()

    # ---- Feed (ascend_common.adapters.clients.stream) ---------------------------------------------------

    async def sync(self, resume: str | None) -> str | None:
        resp = await self._http.get(VERDICTS_PATH)
        resp.raise_for_status()
        listing = VerdictList.model_validate_json(resp.content)
        new = {v.chip: v for v in listing.verdicts}
        changed = {k: v for k, v in new.items() if self.verdicts.get(k) != v}
        self.verdicts = new
        self.cursor = VerdictCursor.from_list(listing)
        was_connected, self.connected, self.ever_connected = self.connected, True, True
        if changed or not was_connected:
            await self._notify(changed)
        return self.cursor.last_event_id()

    async def stream(self, position: str | None) -> AsyncIterator[ServerSentEvent]:
        headers = {"Last-Event-ID": position} if position is not None else {}
        timeout = httpx.Timeout(5.0, read=60.0)
        async with aconnect_sse(self._http, "GET", VERDICT_EVENTS_PATH, headers=headers, timeout=timeout) as source:
            source.response.raise_for_status()
            async for msg in data_events(source):
                yield msg

    async def take(self, msg: ServerSentEvent) -> str | None:
        if msg.event == "reset":
            raise Resync
        if msg.event != "verdict":
            return None
        event = VerdictEvent.model_validate_json(msg.data)
        action = self.cursor.decide(event.epoch, event.revision)
        if action is CursorAction.RESYNC:
            raise Resync
        if action is CursorAction.APPLY:
            self.cursor = self.cursor.applied(event.revision)
            if self.verdicts.get(event.verdict.chip) != event.verdict:
                self.verdicts[event.verdict.chip] = event.verdict
                await self._notify({event.verdict.chip: event.verdict})
        return None

    async def lost(self, error: Exception) -> None:
        if self.connected:
            log.warning("lost the fault-manager; keeping its last verdicts", extra={"error": repr(error)})
            self.connected = False
            await self._notify({})

    async def _notify(self, changed: Mapping[str, ChipVerdict]) -> None:
        result = self.on_change(changed)
        if result is not None:
            await result
