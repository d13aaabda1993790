"""The exporter follower waits for a complete chip list and re-reads it for an unknown chip."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Mapping
from pathlib import Path
from typing import cast

import httpx
import pytest
from ascend_common.adapters.clients.exporter import ExporterClient, ExporterError, InventoryFollower
from ascend_common.adapters.clients.stream import MAX_RETRY_AFTER_S, retry_after_s
from ascend_common.adapters.lifecycle import Lifecycle
from ascend_common.schemas.exporter import Chip, ChipList, NodeInfo, SubscriptionState
from ascend_common.schemas.reading import Reading
from httpx_sse import ServerSentEvent

from tests.support.chips import exporter_chip
from tests.support.waiting import until


class FakeExporter:
    def __init__(self) -> None:
        self.ready = False
        self.chip_list: list[Chip] = []
        self.lists = 0
        self.nodes = 0
        self.stream: asyncio.Queue[ServerSentEvent] = asyncio.Queue()
        self.nic_addresses: dict[str, list[str]] | None = None

    async def node(self) -> NodeInfo:
        self.nodes += 1
        return NodeInfo(
            backend="sim", profile="910b-8", run_id="r1", dcmi_version=Reading[str].ok("x"), card_count=0,
            chip_count=len(self.chip_list), chips_by_state={}, subscription=SubscriptionState.LIVE,
            poll_period_s=1.0, started_at=0.0, updated_at=0.0, last_event_id=None, ready=self.ready,
            nic_addresses=self.nic_addresses,
        )  # fmt: skip

    async def chips(self) -> ChipList:
        self.lists += 1
        return ChipList(last_event_id=None, chips=list(self.chip_list))

    async def chip(self, logic_id: int) -> Chip:
        return next(c for c in self.chip_list if c.logic_id == logic_id)

    async def events(self, last_event_id: str | None) -> AsyncIterator[ServerSentEvent]:
        while True:
            yield await self.stream.get()


async def test_waits_for_a_ready_exporter_and_rereads_for_unknown_chips() -> None:
    fake = FakeExporter()
    seen: list[Mapping[int, Chip]] = []
    follower = InventoryFollower(fake, seen.append, Lifecycle().scope("follower"))  # type: ignore[arg-type]
    await follower.start()
    try:
        fake.chip_list = [exporter_chip(0, 4)]  # discovery under way: partial list, not ready
        await until(lambda: fake.nodes >= 3, what="the follower asking the exporter again")
        assert not follower.synced.is_set() and follower.chips == {}
        fake.ready = True
        async with asyncio.timeout(5):
            await follower.synced.wait()
        assert set(follower.chips) == {0}
        # An event about a chip the list did not have: the follower re-reads the list.
        fake.chip_list = [exporter_chip(0, 4), exporter_chip(1, 5)]
        lists = fake.lists
        await fake.stream.put(ServerSentEvent("chip", '{"id":"r1-1","type":"chip","time":1.0,"logic_id":1}', "r1-1"))
        await until(lambda: set(follower.chips) == {0, 1}, what="the list re-read with chip 1")
        assert fake.lists > lists
    finally:
        await follower.stop()


async def test_a_node_event_rereads_the_node_and_tells_on_node_without_touching_the_chips() -> None:
    """The exporter's `node` event (its mapped NICs' addresses changed): the follower re-reads
    GET /v1/node at once, keeps it as `node` and tells on_node, as it does after every sync; the
    chips are neither re-read nor reported changed."""
    fake = FakeExporter()
    fake.ready = True
    fake.chip_list = [exporter_chip(0, 4)]
    fake.nic_addresses = {"ens1f2": ["10.0.0.7"]}
    seen: list[Mapping[int, Chip]] = []
    nodes: list[NodeInfo] = []
    client = cast("ExporterClient", fake)
    follower = InventoryFollower(client, seen.append, Lifecycle().scope("follower"), on_node=nodes.append)
    await follower.start()
    try:
        async with asyncio.timeout(5):
            await follower.synced.wait()
        assert [n.nic_addresses for n in nodes] == [{"ens1f2": ["10.0.0.7"]}], "the sync tells on_node"
        assert len(seen) == 1
        lists = fake.lists
        fake.nic_addresses = {"ens1f2": ["10.0.0.8"]}
        await fake.stream.put(ServerSentEvent("node", '{"id":"r1-1","type":"node","time":1.0}', "r1-1"))
        await until(lambda: len(nodes) == 2, what="on_node told of the re-read node")
        assert nodes[-1].nic_addresses == {"ens1f2": ["10.0.0.8"]}
        assert follower.node is not None and follower.node.nic_addresses == {"ens1f2": ["10.0.0.8"]}
        assert follower.state.last_event_id == "r1-1"
        assert fake.lists == lists and len(seen) == 1, "no chip re-read or reported"
    finally:
        await follower.stop()


async def test_a_503_with_retry_after_from_the_real_client_is_waited_out_and_nothing_is_published_before() -> None:
    """The exporter says its chips are not all read yet (503, Retry-After) although its node said
    ready (a restart between the two reads): the client raises it with the wait, the follower waits
    at least that long (its own backoff is 50 ms), tells nobody of an empty node, then syncs."""
    fake = FakeExporter()
    fake.ready = True
    fake.chip_list = [exporter_chip(i, i) for i in range(8)]
    refusals = 2
    asked: list[float] = []

    async def answer(request: httpx.Request) -> httpx.Response:
        nonlocal refusals
        if request.url.path == "/v1/node":
            return httpx.Response(200, content=(await fake.node()).model_dump_json())
        if request.url.path == "/v1/chips":
            asked.append(time.monotonic())
            if refusals:
                refusals -= 1
                return httpx.Response(503, headers={"Retry-After": "0.4"}, json={"detail": "not all read yet"})
            return httpx.Response(200, content=ChipList(last_event_id=None, chips=fake.chip_list).model_dump_json())
        return httpx.Response(200, headers={"content-type": "text/event-stream"}, content=quiet_stream())

    async def quiet_stream() -> AsyncIterator[bytes]:
        yield b": keepalive\n\n"
        await asyncio.Event().wait()

    client = ExporterClient(Path("/nonexistent.sock"))
    client._http = httpx.AsyncClient(transport=httpx.MockTransport(answer), base_url="http://exporter")
    seen: list[Mapping[int, Chip]] = []
    follower = InventoryFollower(client, seen.append, Lifecycle().scope("follower"))
    await follower.start()
    try:
        async with asyncio.timeout(10):
            await follower.synced.wait()
        assert len(asked) >= 3
        assert asked[1] - asked[0] >= 0.4 and asked[2] - asked[1] >= 0.4, "the Retry-After was not waited out"
        assert seen and all(len(changed) == 8 for changed in seen), "an empty or partial node was published"
        assert set(follower.chips) == set(range(8))
    finally:
        await follower.stop()
        await client.close()


async def test_the_client_reads_the_wait_of_a_refusal() -> None:
    resp = httpx.Response(503, headers={"Retry-After": "1"}, json={"detail": "not yet"})
    with pytest.raises(ExporterError) as refused:
        ExporterClient._check(resp)
    assert (refused.value.status, refused.value.detail, refused.value.retry_after) == (503, "not yet", 1.0)
    for header, wait in ((None, None), ("soon", None), ("nan", None), ("-3", 0.0), ("86400", MAX_RETRY_AFTER_S)):
        assert retry_after_s(header) == wait, header
