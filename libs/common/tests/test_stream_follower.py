"""The one stream follower: a Resync syncs again at once from where it says, a lost stream after a backoff."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

from ascend_common.adapters.clients.backoff import Backoff
from ascend_common.adapters.clients.exporter import NOT_READY, ExporterError, ExporterStream
from ascend_common.adapters.clients.stream import Resync
from ascend_common.schemas.exporter import NodeInfo, SubscriptionState
from ascend_common.schemas.reading import Reading
from httpx_sse import ServerSentEvent


def node(run_id: str, ready: bool = True) -> NodeInfo:
    return NodeInfo(
        backend="sim", profile="910b-8", run_id=run_id, dcmi_version=Reading[str].ok("x"), card_count=0,
        chip_count=0, chips_by_state={}, subscription=SubscriptionState.LIVE, poll_period_s=1.0, started_at=0.0,
        updated_at=0.0, last_event_id=None, ready=ready,
    )  # fmt: skip


def hello(run_id: str) -> ServerSentEvent:
    return ServerSentEvent("hello", f'{{"run_id":"{run_id}","subscription":"live","last_event_id":null}}')


class Exporter:
    """Not ready once, then a stream that says hello from the wrong run, then a gap, then an event."""

    def __init__(self) -> None:
        self.nodes = [node("r1", ready=False), node("r1"), node("r1"), node("r1")]
        self.streams = [
            [hello("r0")],
            [hello("r1"), ServerSentEvent("gap", "{}", None)],
            [ServerSentEvent("fault", "{}", "r1-5")],
        ]
        self.opened_at: list[str | None] = []

    async def node(self) -> NodeInfo:
        return self.nodes.pop(0)

    async def events(self, last_event_id: str | None) -> AsyncIterator[ServerSentEvent]:
        self.opened_at.append(last_event_id)
        for msg in self.streams.pop(0) if self.streams else []:
            yield msg
        await asyncio.Event().wait()


class Consumer:
    def __init__(self) -> None:
        self.seen: list[str] = []
        self.resumes: list[str | None] = []

    async def sync(self, node: NodeInfo, resume: str | None) -> str | None:
        self.resumes.append(resume)
        return resume or "r1-0"

    async def gap(self, msg: ServerSentEvent) -> str | None:
        self.seen.append("gap")
        return "r1-4"

    async def event(self, msg: ServerSentEvent) -> str | None:
        self.seen.append(f"event {msg.id}")
        return msg.id

    async def lost(self, error: Exception) -> None:
        assert isinstance(error, ExporterError) and error.detail == NOT_READY
        self.seen.append("lost")


async def test_not_ready_is_lost_a_foreign_hello_resyncs_and_a_gap_resumes_where_the_consumer_says() -> None:
    exporter, consumer = Exporter(), Consumer()
    stream = ExporterStream(exporter, consumer, Backoff(base=0.001, cap=0.001))  # type: ignore[arg-type]
    task = asyncio.create_task(stream.run())
    try:
        async with asyncio.timeout(5):
            while "event r1-5" not in consumer.seen:
                await asyncio.sleep(0.01)
    finally:
        task.cancel()
        await asyncio.wait([task])
    assert consumer.seen == ["lost", "gap", "event r1-5"]
    assert consumer.resumes == [None, None, "r1-4"], (
        "a foreign hello resyncs from nothing, a gap from the consumer's id"
    )
    assert exporter.opened_at == ["r1-0", "r1-0", "r1-4"]


def test_resync_carries_where_to_resume() -> None:
    assert Resync("r1-4").resume == "r1-4" and Resync().resume is None
