"""Ingestion meets an event it cannot read: skip it, re-read the snapshot, go on."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from ascend_common.adapters.clients.exporter import ExporterError
from ascend_common.clock import SystemClock
from ascend_common.schemas.exporter import ChipList, NodeInfo
from fault_manager.reactor.ingest import Ingest
from fault_manager.reactor.inputs import Inbox, Snapshot
from fault_manager.store import Store
from httpx_sse import ServerSentEvent


class SnapshotOnly:
    """The exporter calls a skipped event leads to: the chip list, and the node for its switch faults."""

    def __init__(self) -> None:
        self.reads = 0

    async def chips(self) -> ChipList:
        self.reads += 1
        return ChipList(last_event_id="run-7", chips=[])

    async def node(self) -> NodeInfo:
        raise ExporterError(503, "switch faults are not what this test is about")


UNREADABLE = [
    '{"id":"run-7","type":"fault","time":1.0,"chip":"Ascend910-0","fault":{"code":"80E01801"}}',  # fields missing
    '{"id":"run-7","type":"warp-core-breach","time":1.0}',  # a type this version does not know
    "not json at all",
]


@pytest.mark.parametrize("data", UNREADABLE)
async def test_an_unreadable_event_is_skipped_and_the_snapshot_re_read(
    tmp_path: Path, data: str, caplog: pytest.LogCaptureFixture
) -> None:
    exporter = SnapshotOnly()
    store = Store(tmp_path / "fm.db")
    inbox = Inbox()
    ingest = Ingest(exporter, store, inbox, SystemClock(), asyncio.Event())  # type: ignore[arg-type]
    try:
        # Resuming at the same id would meet the same event forever: it must be passed.
        assert await ingest.event(ServerSentEvent(event="fault", data=data, id="run-7")) == "run-7"
        assert exporter.reads == 1
        queued = inbox.next_nowait()
        assert queued is not None and isinstance(queued.input, Snapshot)
        assert isinstance(queued.input.listing, ChipList), "the snapshot reconciles what the event carried"
        [record] = [r for r in caplog.records if "unreadable exporter event skipped" in r.getMessage()]
        assert record.event_id == "run-7"  # type: ignore[attr-defined]
    finally:
        store.close()


class NotReadYet:
    """An exporter whose node says ready but whose chip list is refused (it restarted between the
    two reads): 503 with Retry-After, as it answers before its first read of every chip."""

    def __init__(self) -> None:
        self.reads = 0

    async def chips(self) -> ChipList:
        self.reads += 1
        raise ExporterError(503, "the node's chips have not all been read yet", retry_after=1.0)


class NothingStored:
    def last_event_id(self, run_id: str) -> str | None:
        return None


async def test_a_refused_chip_list_queues_no_inventory_and_goes_back_to_the_stream_follower() -> None:
    exporter = NotReadYet()
    inbox = Inbox()
    ingest = Ingest(exporter, NothingStored(), inbox, SystemClock(), asyncio.Event())  # type: ignore[arg-type]
    node = NodeInfo.model_validate(
        {"backend": "sim", "profile": "910b-8", "run_id": "run", "dcmi_version": {"status": "ok", "value": "x"},
         "card_count": 1, "chip_count": 8, "chips_by_state": {}, "subscription": "live", "poll_period_s": 1.0,
         "started_at": 0.0, "updated_at": 0.0, "last_event_id": None, "ready": True}
    )  # fmt: skip
    # The stream follower (ascend_common.adapters.clients.stream.follow) waits out the
    # Retry-After it carries, then syncs again: an empty node is never queued meanwhile.
    with pytest.raises(ExporterError) as refused:
        await ingest.sync(node, None)
    assert refused.value.retry_after == 1.0 and exporter.reads == 1
    assert inbox.next_nowait() is None
    assert not ingest.synced.is_set()
