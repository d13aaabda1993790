"""Client of the dcmi-exporter's local API, its event stream followed, and a follower that keeps its chips current.

`ExporterStream` is the one way the exporter's events are followed (the device-plugin's
`InventoryFollower` below, the fault-manager's ingestion). The inventory follower reads the
chip list, then the event stream from the list's `last_event_id`; a gap, a new exporter run
or a lost connection makes it re-read the whole list. Consumers get a callback with the chips
that changed and can ask how long the exporter has been unreachable.
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
from typing import Protocol

import httpx
from httpx_sse import ServerSentEvent, aconnect_sse

from ascend_common.adapters.clients.backoff import Backoff
from ascend_common.adapters.clients.stream import Resync, data_events, follow, retry_after_s
from ascend_common.adapters.lifecycle import TaskScope
from ascend_common.schemas.exporter import (
    Chip,
    ChipList,
    ContainerMapping,
    EventType,
    ExporterEvent,
    NodeInfo,
    ResetJob,
    StreamHello,
    Vnpu,
)

log = logging.getLogger(__name__)


class ExporterError(Exception):
    """The exporter answered with an error (the message carries its detail); `retry_after` is the
    wait it asked for (a 503 before its first read of every chip), in seconds, or None."""

    def __init__(self, status: int, detail: str, retry_after: float | None = None) -> None:
        super().__init__(f"exporter answered {status}: {detail}")
        self.status = status
        self.detail = detail
        self.retry_after = retry_after


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
            raise ExporterError(resp.status_code, detail, retry_after_s(resp.headers.get("retry-after")))
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

    async def put_containers(self, mapping: ContainerMapping) -> None:
        """Who holds which chip and vNPU (scope `containers`), for the exporter's metrics labels."""
        resp = await self._http.put(
            "/v1/containers",
            # No `vnpus` key when no vNPU is held: an exporter of the release before it refuses the
            # key (422), and would then lose the chips' holders too during a rolling upgrade.
            content=mapping.model_dump_json(exclude_defaults=True),
            headers={**self._auth(), "Content-Type": "application/json"},
        )
        self._check(resp)

    async def reset(self, logic_id: int, channel: str = "auto") -> ResetJob:
        """Start a reset of the chip's reset group (202 with a job); 409 while processes run."""
        resp = await self._http.post(f"/v1/chips/{logic_id}/reset", json={"channel": channel}, headers=self._auth())
        return ResetJob.model_validate_json(self._check(resp).content)

    async def job(self, job_id: str) -> ResetJob:
        return ResetJob.model_validate_json(self._check(await self._http.get(f"/v1/jobs/{job_id}")).content)

    async def events(self, last_event_id: str | None) -> AsyncIterator[ServerSentEvent]:
        headers = {"Last-Event-ID": last_event_id} if last_event_id else {}
        timeout = httpx.Timeout(5.0, read=60.0)  # the stream pings every 15 s
        async with aconnect_sse(self._http, "GET", "/v1/events", headers=headers, timeout=timeout) as source:
            if source.response.status_code >= 400:
                await source.response.aread()  # the error's detail is in the body
            self._check(source.response)
            async for msg in data_events(source):
                yield msg


NOT_READY = "the exporter has not read every chip yet"
# What makes a follower re-sync after a backoff: the exporter is away, refuses, or said nonsense.
TRANSIENT: tuple[type[Exception], ...] = (httpx.HTTPError, ExporterError, OSError, ValueError)


class ExporterFeed(Protocol):
    """What a consumer of the exporter's events does with them (see ExporterStream)."""

    async def sync(self, node: NodeInfo, resume: str | None) -> str | None:
        """The exporter is ready: read what the stream is relative to; returns the event id to
        stream after (`resume`: where a gap or the last event left the stream)."""

    async def gap(self, msg: ServerSentEvent) -> str | None:
        """The exporter cannot replay what was missed: re-read its state; returns the id to resume after."""

    async def event(self, msg: ServerSentEvent) -> str | None:
        """One event; returns the id to resume after (None: unchanged)."""

    async def lost(self, error: Exception) -> None:
        """The exporter is unreachable, not ready, or said something unreadable."""


class ExporterStream:
    """The exporter's event stream, followed (ascend_common.adapters.clients.stream) for one consumer.

    Nothing is followed before the exporter has read every chip once: its list is empty or
    partial until then, and events about chips a consumer does not know would be lost. A
    `hello` from another exporter run than the one synced with, or a `gap`, syncs again.
    """

    def __init__(self, client: ExporterClient, consumer: ExporterFeed, backoff: Backoff) -> None:
        self.client = client
        self.consumer = consumer
        self.backoff = backoff
        self._run_id: str | None = None

    async def run(self) -> None:
        await follow(self, self.backoff, TRANSIENT)

    async def sync(self, resume: str | None) -> str | None:
        node = await self.client.node()
        if not node.ready:
            raise ExporterError(503, NOT_READY)
        self._run_id = node.run_id
        return await self.consumer.sync(node, resume)

    def stream(self, position: str | None) -> AsyncIterator[ServerSentEvent]:
        return self.client.events(position)

    async def take(self, msg: ServerSentEvent) -> str | None:
        if msg.event == "hello":
            if StreamHello.model_validate_json(msg.data).run_id != self._run_id:
                raise Resync
            return None
        if msg.event == "gap":
            raise Resync(await self.consumer.gap(msg))
        return await self.consumer.event(msg)

    async def lost(self, error: Exception) -> None:
        await self.consumer.lost(error)


ChipsChanged = Callable[[Mapping[int, Chip]], Awaitable[None] | None]
NodeChanged = Callable[[NodeInfo], Awaitable[None] | None]


@dataclass
class FollowerState:
    run_id: str | None = None
    last_event_id: str | None = None
    connected: bool = False
    last_contact: float = 0.0  # monotonic time the exporter was last known reachable


class InventoryFollower:
    """The exporter's chips, kept current: every event that concerns a chip makes it re-read that
    chip (coalesced, so a storm costs one read per chip per round, not one per event)."""

    def __init__(
        self, client: ExporterClient, on_change: ChipsChanged, tasks: TaskScope, *, on_node: NodeChanged | None = None
    ) -> None:
        self.client = client
        self.on_change = on_change
        # Told the NodeInfo after each sync and each re-read that a `node` event asked for.
        self.on_node = on_node
        self._node_dirty = False
        self.chips: dict[int, Chip] = {}
        self.node: NodeInfo | None = None
        self.state = FollowerState()
        self._dirty: set[int] = set()
        self._dirty_event = asyncio.Event()
        self._tasks = tasks
        self._stream = ExporterStream(client, self, Backoff())
        self.synced = asyncio.Event()

    def unreachable_for(self) -> float:
        """Seconds since the exporter last answered (0 while connected)."""
        if self.state.connected:
            return 0.0
        if self.state.last_contact == 0.0:
            return float("inf")
        return time.monotonic() - self.state.last_contact

    async def start(self) -> None:
        self._tasks.essential(self._stream.run(), "exporter-follow")
        self._tasks.essential(self._refresher(), "exporter-refresh")

    async def stop(self) -> None:
        await self._tasks.stop()

    # ---- ExporterFeed ------------------------------------------------------------------------

    async def sync(self, node: NodeInfo, resume: str | None) -> str | None:
        self.node = node
        listing = await self.client.chips()
        now = time.monotonic()
        self.state = FollowerState(
            run_id=node.run_id, last_event_id=listing.last_event_id, connected=True, last_contact=now
        )
        new = {c.logic_id: c for c in listing.chips}
        changed = {k: c for k, c in new.items() if self.chips.get(k) != c}
        self.chips = new
        self.synced.set()
        if changed:
            await self._notify(changed)
        await self._notify_node(node)
        return listing.last_event_id

    async def gap(self, msg: ServerSentEvent) -> str | None:
        log.info("exporter event gap; re-reading the chip list", extra={"gap": json.loads(msg.data)})
        return None  # the next sync re-reads the list and streams after it

    async def event(self, msg: ServerSentEvent) -> str | None:
        self.state.last_contact = time.monotonic()
        event = ExporterEvent.model_validate_json(msg.data)
        self.state.last_event_id = event.id
        if event.type is EventType.NODE:
            self._node_dirty = True
            self._dirty_event.set()
        elif event.logic_id is not None:
            if event.logic_id not in self.chips:
                raise ValueError(f"event about chip {event.logic_id}, which the list did not have: re-read it")
            self._dirty.add(event.logic_id)
            self._dirty_event.set()
        return event.id

    async def lost(self, error: Exception) -> None:
        if self.state.connected:
            # An open stream is contact: the grace period starts when it breaks.
            self.state.last_contact = time.monotonic()
            log.warning("lost the exporter; reconnecting", extra={"error": repr(error)})
        self.state.connected = False

    # ------------------------------------------------------------------------------------------

    async def _refresher(self) -> None:
        while True:
            await self._dirty_event.wait()
            self._dirty_event.clear()
            if self._node_dirty:
                self._node_dirty = False
                # A failed read leaves the old node: the broken connection behind it re-syncs, and
                # every sync tells on_node.
                with contextlib.suppress(httpx.HTTPError, ExporterError, ValueError):
                    self.node = await self.client.node()
                    await self._notify_node(self.node)
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

    async def _notify_node(self, node: NodeInfo) -> None:
        if self.on_node is not None and (result := self.on_node(node)) is not None:
            await result

    async def _notify(self, changed: Mapping[int, Chip]) -> None:
        result = self.on_change(changed)
        if result is not None:
            await result
