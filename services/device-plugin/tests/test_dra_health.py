"""The DRA health stream: the pure mapping (dra.health_reports) and the hub that fans it out (dra.health_service)."""

from __future__ import annotations

import asyncio
from types import MappingProxyType

import pytest
from ascend_common.adapters.kubelet import dra_health_pb2 as pb
from ascend_device_plugin.dra.health_reports import (
    EXPORTER_LOST,
    MAX_MESSAGE,
    NOT_REPORTED,
    DeviceHealth,
    DeviceReport,
    PreparedChip,
    device_health,
    device_reports,
)
from ascend_device_plugin.dra.health_service import TIMEOUT_S, HealthStreams, Reports, response
from ascend_device_plugin.inventory.snapshot import Inventory
from ascend_device_plugin.model.chip_pod import ChipHealth

OK = ChipHealth(True, "verdict NotHandleFault")
BAD = ChipHealth(False, "verdict SeparateNPU, fault codes 80E01801")


@pytest.mark.parametrize(
    ("chip", "exporter_lost", "expected"),
    [
        (OK, False, (DeviceHealth.HEALTHY, "verdict NotHandleFault")),
        (BAD, False, (DeviceHealth.UNHEALTHY, "verdict SeparateNPU, fault codes 80E01801")),
        (ChipHealth(False, "exporter reports the chip card_drop"), False,
         (DeviceHealth.UNHEALTHY, "exporter reports the chip card_drop")),
        (OK, True, (DeviceHealth.UNKNOWN, EXPORTER_LOST)),
        (BAD, True, (DeviceHealth.UNKNOWN, EXPORTER_LOST)),
        (None, False, (DeviceHealth.UNKNOWN, NOT_REPORTED)),
        (None, True, (DeviceHealth.UNKNOWN, EXPORTER_LOST)),
        (ChipHealth(False, "x" * 2000), False, (DeviceHealth.UNHEALTHY, "x" * MAX_MESSAGE)),
    ],
)  # fmt: skip
def test_device_health(chip: ChipHealth | None, exporter_lost: bool, expected: tuple[DeviceHealth, str]) -> None:
    assert device_health(chip, exporter_lost=exporter_lost) == expected


def test_reports_hold_each_prepared_device_once_in_order() -> None:
    devices = [PreparedChip("n", "ascend910-3", 3), PreparedChip("n", "ascend910-1", 1),
               PreparedChip("n", "ascend910-3", 3), PreparedChip("n", "ascend910-9", None)]  # fmt: skip
    reports = device_reports(devices, {1: OK, 3: BAD}, exporter_lost=False)
    assert reports == (
        DeviceReport("n", "ascend910-1", DeviceHealth.HEALTHY, OK.reason),
        DeviceReport("n", "ascend910-3", DeviceHealth.UNHEALTHY, BAD.reason),
        DeviceReport("n", "ascend910-9", DeviceHealth.UNKNOWN, NOT_REPORTED),
    )


def test_the_wire_message() -> None:
    reports = (DeviceReport("node-a", "ascend910-3", DeviceHealth.UNHEALTHY, "why"),
               DeviceReport("node-a", "ascend910-4", DeviceHealth.UNKNOWN, ""))  # fmt: skip
    (bad, unknown) = response(reports, 1700000000.7).devices
    assert (bad.device.pool_name, bad.device.device_name) == ("node-a", "ascend910-3")
    assert (bad.health, bad.message, bad.last_updated_time) == (pb.UNHEALTHY, "why", 1700000000)
    assert bad.health_check_timeout_seconds == TIMEOUT_S == 30
    assert unknown.health == pb.UNKNOWN


class Source:
    """An InventorySource whose chip health a test sets."""

    def __init__(self) -> None:
        self.inventory = Inventory.empty()

    def set(self, health: dict[int, ChipHealth], *, exporter_lost: bool = False) -> None:
        empty = Inventory.empty()
        self.inventory = Inventory(
            None, empty.chips, empty.reported, empty.volcano_map, health=MappingProxyType(health),
            exporter_lost=exporter_lost,
        )  # fmt: skip


@pytest.fixture
def hub() -> tuple[Source, HealthStreams]:
    source = Source()
    source.set({3: OK})
    return source, HealthStreams(source, lambda: [PreparedChip("n", "ascend910-3", 3)])


def health_of(reports: Reports) -> list[DeviceHealth]:
    return [r.health for r in reports]


async def test_a_stream_gets_the_current_list_first_then_each_change(hub: tuple[Source, HealthStreams]) -> None:
    source, streams = hub
    follow = streams.follow()
    assert health_of(await anext(follow)) == [DeviceHealth.HEALTHY]
    source.set({3: BAD})
    streams.refresh()
    assert health_of(await anext(follow)) == [DeviceHealth.UNHEALTHY]
    # A later stream starts from the current list.
    late = streams.follow()
    assert health_of(await anext(late)) == [DeviceHealth.UNHEALTHY]
    assert streams.streams == 2
    await follow.aclose()
    await late.aclose()
    assert streams.streams == 0


async def test_nothing_is_sent_for_a_refresh_that_changes_nothing(hub: tuple[Source, HealthStreams]) -> None:
    source, streams = hub
    follow = streams.follow()
    await anext(follow)
    streams.refresh()
    nxt = asyncio.ensure_future(anext(follow))
    await asyncio.sleep(0.05)
    assert not nxt.done()
    source.set({3: OK}, exporter_lost=True)
    streams.refresh()
    assert health_of(await nxt) == [DeviceHealth.UNKNOWN]
    await follow.aclose()


async def test_every_stream_gets_every_change_and_a_slow_one_gets_the_latest(
    hub: tuple[Source, HealthStreams],
) -> None:
    source, streams = hub
    fast, slow = streams.follow(), streams.follow()
    await anext(fast)
    await anext(slow)
    seen: list[DeviceHealth] = []
    for health in (BAD, OK, BAD):
        source.set({3: health})
        streams.refresh()  # never waits on a reader
        seen += health_of(await anext(fast))
    assert seen == [DeviceHealth.UNHEALTHY, DeviceHealth.HEALTHY, DeviceHealth.UNHEALTHY]
    # The slow reader missed two lists; it gets the latest, once.
    assert health_of(await anext(slow)) == [DeviceHealth.UNHEALTHY]
    nxt = asyncio.ensure_future(anext(slow))
    await asyncio.sleep(0.05)
    assert not nxt.done()
    nxt.cancel()
    await fast.aclose()


async def test_close_ends_every_stream(hub: tuple[Source, HealthStreams]) -> None:
    _, streams = hub
    follow = streams.follow()
    await anext(follow)
    streams.close()
    with pytest.raises(StopAsyncIteration):
        await anext(follow)


async def test_a_quiet_stream_is_sent_the_list_again(
    hub: tuple[Source, HealthStreams], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("ascend_device_plugin.dra.health_service.RESEND_S", 0.05)
    _, streams = hub
    follow = streams.follow()
    first = await anext(follow)
    async with asyncio.timeout(2):
        assert await anext(follow) == first  # the kubelet's 30 s timeout never passes on a quiet node
    await follow.aclose()
