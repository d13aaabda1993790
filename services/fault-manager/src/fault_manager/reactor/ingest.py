"""Ingestion: the exporter's event stream, followed without missing or doubling an event, into the inbox.

Resume after the last event stored for the exporter's run. For a run we have stored nothing
of yet, replay it from its start (the exporter keeps the run's first 16,384 events), with a
snapshot taken before the replay to reconcile with, which drops codes left over from an earlier
run; that snapshot goes to the inbox once the replay has passed the event it stands at (sooner,
it would synthesise an occurrence of a code that the replay then brings again). When the
exporter cannot replay (a gap), reconcile against a fresh snapshot and resume exactly where that
snapshot stands. Reconciling is by synthetic events whose ids are
deterministic (`reconcile_rows`), so that a crash and a second reconcile double nothing.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Mapping, Set
from typing import Protocol

import httpx
from ascend_common.adapters.clients.backoff import Backoff
from ascend_common.adapters.clients.exporter import ExporterClient, ExporterError, ExporterStream
from ascend_common.clock import Clock
from ascend_common.schemas.exporter import ChipList, ChipState, EventType, ExporterEvent, NodeInfo
from httpx_sse import ServerSentEvent
from pydantic import ValidationError

from fault_manager.reactor.inputs import ChipReachability, Inbox, Inventory, Snapshot, SwitchFaultSeen
from fault_manager.store import FaultEventRow, in_store_thread

log = logging.getLogger(__name__)


class EventPositions(Protocol):
    def last_event_id(self, run_id: str) -> str | None:
        """The id of the last event stored of the exporter's run `run_id`."""


class Ingest:
    """Follows the exporter's events (ascend_common.adapters.clients.exporter.ExporterStream) into the inbox."""

    def __init__(
        self,
        exporter: ExporterClient,
        positions: EventPositions,
        inbox: Inbox,
        clock: Clock,
        inventory: asyncio.Event,
    ) -> None:
        self.exporter = exporter
        self.positions = positions
        self.inbox = inbox
        self.clock = clock
        self.inventory = inventory  # set once the reactor knows which chips the node has
        self.synced = asyncio.Event()  # following the stream (readiness)
        self._held: Snapshot | None = None  # taken before a replay, queued once the replay passed it
        self._stream = ExporterStream(exporter, self, Backoff(base=0.1, cap=5.0))

    async def run(self) -> None:
        await self._stream.run()

    async def sync(self, node: NodeInfo, resume: str | None) -> str | None:
        if resume is None or not resume.startswith(node.run_id + "-"):
            self._held = None  # another run: a snapshot of the old one means nothing
            resume = await in_store_thread(self.positions.last_event_id, node.run_id)
        if resume is None:
            snapshot = await self._snapshot()
            if snapshot.listing.last_event_id is None:
                self.inbox.put(snapshot)
            else:
                self._held = snapshot
                resume = f"{node.run_id}-0"
        elif not self.inventory.is_set() and self._held is None:
            self.inbox.put(Inventory(await self.exporter.chips()))
        self.synced.set()
        return resume

    async def gap(self, msg: ServerSentEvent) -> str | None:
        self._held = None  # the fresh snapshot supersedes it
        snapshot = await self._snapshot()
        self.inbox.put(snapshot)
        return snapshot.listing.last_event_id

    async def event(self, msg: ServerSentEvent) -> str | None:
        try:
            event = ExporterEvent.model_validate_json(msg.data)
        except ValidationError as exc:
            # Resuming at the same id would meet the same event forever and stop all ingestion:
            # skip it and let a fresh snapshot carry whatever state it held.
            log.error("unreadable exporter event skipped; reconciling with the snapshot",
                      extra={"event_id": msg.id, "event": msg.event, "error": str(exc)[:500]})  # fmt: skip
            self.inbox.put(await self._snapshot())
            return msg.id or None
        if event.type is EventType.FAULT and event.fault is not None and event.chip is not None:
            self.inbox.put(fault_row(event, event.chip, recorded_at_ms=int(self.clock.now() * 1000)))
        elif event.type is EventType.SWITCH_FAULT and event.switch_fault is not None:
            self.inbox.put(SwitchFaultSeen(event.switch_fault, int(event.time * 1000)))
        elif event.type is EventType.CHIP and event.change is not None and event.chip is not None:
            self.inbox.put(ChipReachability(event.chip, event.change.state is not ChipState.UNKNOWN))
        if self._held is not None and _passed(event.id, self._held.listing.last_event_id):
            self.inbox.put(self._held)
            self._held = None
        return event.id

    async def lost(self, error: Exception) -> None:
        log.warning("exporter stream lost; resuming", extra={"error": repr(error)})

    async def _snapshot(self) -> Snapshot:
        listing = await self.exporter.chips()
        switch_faults = None
        with contextlib.suppress(httpx.HTTPError, ExporterError):
            switch_faults = (await self.exporter.node()).switch_faults
        return Snapshot(listing, switch_faults)


def _passed(event_id: str, anchor: str | None) -> bool:
    """Whether the stream has reached `anchor`, an event id of the same run (`<run>-<seq>`)."""
    return anchor is None or int(event_id.rsplit("-", 1)[1]) >= int(anchor.rsplit("-", 1)[1])


def fault_row(event: ExporterEvent, chip: str, *, recorded_at_ms: int) -> FaultEventRow:
    assert event.fault is not None
    f = event.fault
    return FaultEventRow(
        event_id=event.id,
        chip=chip,
        logic_id=event.logic_id or 0,
        phy_id=event.phy_id or 0,
        code=f.code,
        assertion=f.assertion.value,
        severity=f.severity,
        source=f.source.value,
        raised_at_ms=int(event.time * 1000),
        recorded_at_ms=recorded_at_ms,
    )


def reconcile_rows(listing: ChipList, present: Mapping[str, Set[str]], now_ms: int) -> list[FaultEventRow]:
    """The synthetic events that make codes `present` (per chip) agree with the snapshot `listing`.

    Their ids are deterministic (the snapshot's last event id, the chip, the code, occur/recover):
    the store ignores an id it holds, so reconciling twice against one snapshot doubles nothing.
    """
    anchor = listing.last_event_id or "none-0"
    rows: list[FaultEventRow] = []
    for chip in listing.chips:
        codes = set(chip.dynamic.error_codes.value or []) if chip.dynamic and chip.dynamic.error_codes.is_ok else set()
        held = present.get(chip.name, frozenset())
        for code, kind in [(c, "occur") for c in sorted(codes - held)] + [(c, "recover") for c in sorted(held - codes)]:
            rows.append(
                FaultEventRow(
                    event_id=f"{anchor}-r-{chip.name}-{code}-{kind}",
                    chip=chip.name,
                    logic_id=chip.logic_id,
                    phy_id=chip.phy_id,
                    code=code,
                    assertion=kind,
                    severity=None,
                    source="reconcile",
                    raised_at_ms=now_ms,
                    recorded_at_ms=now_ms,
                )
            )
    return rows
