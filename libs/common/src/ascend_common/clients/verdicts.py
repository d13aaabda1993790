"""Follow the fault-manager's verdicts: the list, then its event stream, by the cursor rules.

While the fault-manager is unreachable the follower keeps the last verdicts and says it is
disconnected; the consumer decides what that means (the device-plugin may only make them
worse, never release a chip the fault-manager isolated).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path

import httpx

from ascend_common import sse
from ascend_common.clients.backoff import Backoff
from ascend_common.essential import essential
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


class _Resync(Exception):
    pass


class VerdictFollower:
    def __init__(self, socket: Path, on_change: VerdictsChanged, timeout: float = 5.0) -> None:
        self._http = httpx.AsyncClient(
            transport=httpx.AsyncHTTPTransport(uds=str(socket)), base_url="http://fault-manager", timeout=timeout
        )
        self.on_change = on_change
        self.verdicts: dict[str, ChipVerdict] = {}
        self.cursor = VerdictCursor()
        self.connected = False
        self.ever_connected = False
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        self._task = essential(self._follow(), "verdict-follow")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
        await self._http.aclose()

    async def _follow(self) -> None:
        backoff = Backoff()
        while True:
            try:
                await self._list()
                backoff.reset()
                await self._stream()
            except _Resync:
                continue
            except (httpx.HTTPError, OSError, ValueError) as exc:
                if self.connected:
                    log.warning("lost the fault-manager; keeping its last verdicts", extra={"error": repr(exc)})
                    self.connected = False
                    await self._notify({})
                await asyncio.sleep(backoff.next())

    async def _list(self) -> None:
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

    async def _stream(self) -> None:
        headers = {}
        if (last := self.cursor.last_event_id()) is not None:
            headers["Last-Event-ID"] = last
        timeout = httpx.Timeout(5.0, read=60.0)
        async with self._http.stream("GET", VERDICT_EVENTS_PATH, headers=headers, timeout=timeout) as resp:
            resp.raise_for_status()
            async for msg in sse.parse(resp.aiter_lines()):
                if msg.event == "reset":
                    raise _Resync
                if msg.event != "verdict":
                    continue
                event = VerdictEvent.model_validate_json(msg.data)
                action = self.cursor.decide(event.epoch, event.revision)
                if action is CursorAction.RESYNC:
                    raise _Resync
                if action is CursorAction.APPLY:
                    self.cursor = self.cursor.applied(event.revision)
                    if self.verdicts.get(event.verdict.chip) != event.verdict:
                        self.verdicts[event.verdict.chip] = event.verdict
                        await self._notify({event.verdict.chip: event.verdict})

    async def _notify(self, changed: Mapping[str, ChipVerdict]) -> None:
        result = self.on_change(changed)
        if result is not None:
            await result
