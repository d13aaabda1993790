"""Client of the dcmi-exporter's local API, and a follower that keeps its chips current.

The follower reads the chip list, then the event stream from the list's `last_event_id`;
every event that concerns a chip makes it re-read that chip (coalesced, so a storm costs
one read per chip per round, not one per event). A gap, a new exporter run or a lost
connection makes it re-read the whole list. Consumers get a callback with the chips that
changed and can ask how long the exporter has been unreachable.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

import httpx

from ascend_common import sse
from ascend_common.clients.backoff import Backoff
from ascend_common.essential import essential
from ascend_common.schemas.exporter import Chip, ChipList, ExporterEvent, NodeInfo, ResetJob, StreamHello, Vnpu

log = logging.getLogger(__name__)


class ExporterError(Exception):
    """The exporter answered with an error (the message carries its detail)."""

    def __init__(self, status: int, detail: str) -> None:
        super().__init__(f"exporter answered {status}: {detail}")
        self.status = status
        self.detail = detail


class ExporterClient:
    def __init__(self, socket: Path, token: str | None = None, timeout: float = 5.0) -> None:
        self._http = httpx.AsyncClient(
            transport=httpx.AsyncHTTPTransport(uds=str(socket)), base_url="http://exporter", timeout=timeout
        )
        self._token = token

    async def close(self) -> None:
        await self._http.aclose()

    def _auth(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self._token}"} if self._token else {}

    @staticmethod
    def _check(resp: httpx.Response) -> httpx.Response:
        if resp.status_code >= 400:
            try:
                detail = str(resp.json().get("detail", resp.text))
            except ValueError:
                detail = resp.text
            raise ExporterError(resp.status_code, detail)
        return resp

    async def node(self) -> NodeInfo:
        return NodeInfo.model_validate_json(self._check(await self._http.get("/v1/node")).content)

    async def chips(self) -> ChipList:
        return ChipList.model_validate_json(self._check(await self._http.get("/v1/chips")).content)

    async def chip(self, logic_id: int) -> Chip:
        return Chip.model_validate_json(self._check(await self._http.get(f"/v1/chips/{logic_id}")).content)

    async def create_vnpu(self, logic_id: int, template: str, vdev_id: int | None = None) -> Vnpu:
        body: dict[str, object] = {"template": template}
        if vdev_id is not None:
            body["vdev_id"] = vdev_id
        resp = await self._http.post(f"/v1/chips/{logic_id}/vnpus", json=body, headers=self._auth())
        return Vnpu.model_validate_json(self._check(resp).content)

    async def destroy_vnpu(self, logic_id: int, vdev_id: int) -> None:
        resp = await self._http.delete(f"/v1/chips/{logic_id}/vnpus", params={"vdev_id": vdev_id}, headers=self._auth())
        self._check(resp)

    async def reset(self, logic_id: int, channel: str = "auto") -> ResetJob:
        """Start a reset of the chip's reset group (202 with a job); 409 while processes run."""
        resp = await self._http.post(f"/v1/chips/{logic_id}/reset", json={"channel": channel}, headers=self._auth())
        return ResetJob.model_validate_json(self._check(resp).content)

    async def job(self, job_id: str) -> ResetJob:
        return ResetJob.model_validate_json(self._check(await self._http.get(f"/v1/jobs/{job_id}")).content)

    async def events(self, last_event_id: str | None) -> AsyncIterator[sse.SseMessage]:
        headers = {"Last-Event-ID": last_event_id} if last_event_id else {}
        timeout = httpx.Timeout(5.0, read=60.0)  # the stream sends a keepalive every 15 s
        async with self._http.stream("GET", "/v1/events", headers=headers, timeout=timeout) as resp:
            self._check(resp)
            async for msg in sse.parse(resp.aiter_lines()):
                yield msg


ChipsChanged = Callable[[Mapping[int, Chip]], Awaitable[None] | None]


@dataclass
class FollowerState:
    run_id: str | None = None
    last_event_id: str | None = None
    connected: bool = False
    last_contact: float = 0.0  # monotonic time the exporter was last known reachable


class InventoryFollower:
    def __init__(self, client: ExporterClient, on_change: ChipsChanged) -> None:
        self.client = client
        self.on_change = on_change
        self.chips: dict[int, Chip] = {}
        self.node: NodeInfo | None = None
        self.state = FollowerState()
        self._dirty: set[int] = set()
        self._dirty_event = asyncio.Event()
        self._tasks: list[asyncio.Task[None]] = []
        self.synced = asyncio.Event()

    def unreachable_for(self) -> float:
        """Seconds since the exporter last answered (0 while connected)."""
        if self.state.connected:
            return 0.0
        if self.state.last_contact == 0.0:
            return float("inf")
        return time.monotonic() - self.state.last_contact

    async def start(self) -> None:
        self._tasks = [
            essential(self._follow(), "exporter-follow"),
            essential(self._refresher(), "exporter-refresh"),
        ]

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    async def _follow(self) -> None:
        backoff = Backoff()
        while True:
            try:
                await self._resync()
                backoff.reset()
                async for msg in self.client.events(self.state.last_event_id):
                    self.state.last_contact = time.monotonic()
                    await self._on_message(msg)
            except (httpx.HTTPError, ExporterError, OSError, ValueError) as exc:
                if self.state.connected:
                    # An open stream is contact: the grace period starts when it breaks.
                    self.state.last_contact = time.monotonic()
                    log.warning("lost the exporter; reconnecting", extra={"error": repr(exc)})
                self.state.connected = False
                await asyncio.sleep(backoff.next())

    async def _resync(self) -> None:
        self.node = await self.client.node()
        if not self.node.ready:
            # Before its first read of every chip the exporter's list is empty or partial, and
            # events about chips we do not know would be dropped: wait for it.
            self.state.connected = False
            raise ExporterError(503, "the exporter has not read every chip yet")
        listing = await self.client.chips()
        now = time.monotonic()
        self.state = FollowerState(
            run_id=self.node.run_id, last_event_id=listing.last_event_id, connected=True, last_contact=now
        )
        new = {c.logic_id: c for c in listing.chips}
        changed = {k: c for k, c in new.items() if self.chips.get(k) != c}
        self.chips = new
        self.synced.set()
        if changed:
            await self._notify(changed)

    async def _on_message(self, msg: sse.SseMessage) -> None:
        if msg.event == "hello":
            hello = StreamHello.model_validate_json(msg.data)
            if self.state.run_id is not None and hello.run_id != self.state.run_id:
                raise ValueError("the exporter restarted")  # resync from a fresh list
            return
        if msg.event == "gap":
            log.info("exporter event gap; re-reading the chip list", extra={"gap": json.loads(msg.data)})
            self.state.last_event_id = msg.id
            await self._resync()
            return
        event = ExporterEvent.model_validate_json(msg.data)
        self.state.last_event_id = event.id
        if event.logic_id is not None:
            if event.logic_id not in self.chips:
                raise ValueError(f"event about chip {event.logic_id}, which the list did not have: re-read it")
            self._dirty.add(event.logic_id)
            self._dirty_event.set()

    async def _refresher(self) -> None:
        while True:
            await self._dirty_event.wait()
            self._dirty_event.clear()
            dirty, self._dirty = self._dirty, set()
            changed: dict[int, Chip] = {}
            for logic in sorted(dirty):
                with contextlib.suppress(httpx.HTTPError, ExporterError):
                    chip = await self.client.chip(logic)
                    if self.chips.get(logic) != chip:
                        self.chips[logic] = chip
                        changed[logic] = chip
            if changed:
                await self._notify(changed)

    async def _notify(self, changed: Mapping[int, Chip]) -> None:
        result = self.on_change(changed)
        if result is not None:
            await result
