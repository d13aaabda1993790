"""Fault Events in the reference's format (ascendcommon.go `doWriteFaultToEvent`), through the fake API server.

Ported from ascendcommon_test.go `TestDoWriteFaultToEvent` (2 cases) and `TestWriteFaultToEvent`
(1 case); the exact name, fields and message bytes are checked here as the reference writes them.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from typing import Any

import pytest
from ascend_common.adapters.kube.client import ApiClient
from ascend_common.adapters.kube.events import ApiEventSink
from fault_manager.events.fault_events import REASON_OCCURRED, FaultEvents
from fault_manager.events.reference import FaultNotice, NoticeError, reference_fault_event

from tests.support.fake_apiserver import FakeApiServer

T0 = 1_700_000_000.0  # 2023-11-14 22:13:20 UTC, 2023-11-15 06:13:20 in Asia/Shanghai
EVENTS = "/api/v1/namespaces/kube-system/events"
CARD_DROP = "40F84E00"  # CardDropFaultCode
LINK_DOWN = "81078603"  # LinkDownFaultCode


@pytest.fixture
def shanghai(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Go formats alarmRaisedTime in the process's local zone: so do we (a zone that is not UTC shows it)."""
    monkeypatch.setenv("TZ", "Asia/Shanghai")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


def notice(code: str = LINK_DOWN, assertion: str = "recover", *, logic: int = 0, a5: bool = False,
           card: int | None = 0, device: int | None = 0, level: str = "PreSeparateNPU") -> FaultNotice:  # fmt: skip
    return FaultNotice(f"Ascend910-{logic}", logic, card, device, a5, code.lower(), assertion, level)


class FakeClock:
    def __init__(self, t: float = T0) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t


def test_do_write_fault_to_event_01_invalid_assertion() -> None:
    """01-assertion is invalid, should return error (no Event)."""
    with pytest.raises(NoticeError, match="assertion"):
        reference_fault_event("mock-pod", "mock-node", notice(CARD_DROP, "3"), 1)


@pytest.mark.usefixtures("shanghai")
def test_do_write_fault_to_event_02_success() -> None:
    """02-write fault to event success: a recovery of the link-down code, every field as the reference's."""
    body = reference_fault_event("mock-pod", "mock-node", notice(), int(T0 * 1000) + 7)
    assert body == {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": "mock-pod.17000000000070", "namespace": "kube-system"},
        "involvedObject": {"kind": "pod", "namespace": "kube-system", "name": "mock-pod"},
        "reason": "Recovery",
        "action": "PreSeparateNPU",
        "message": "device fault, nodeName:mock-node, assertion:Recovery, cardID:0, deviceID:0, "
        "faultCodes:81078603, faultLevelName:PreSeparateNPU, alarmRaisedTime:2023-11-15 06:13:20",
        "type": "Normal",
        "source": {"component": "device-plugin", "host": "mock-node"},  # the reference's common.Component
        "eventTime": "2023-11-14T22:13:20.007000Z",
        "reportingComponent": "device-plugin",
        "reportingInstance": "mock-pod",
    }


@pytest.mark.parametrize(
    ("assertion", "reason", "type_"),
    [("occur", "Occur", "Warning"), ("recover", "Recovery", "Normal"), ("once", "Notice", "Normal")],
)
def test_assertion_names_and_types(assertion: str, reason: str, type_: str) -> None:
    """`GetFaultAssertionName`; only an occurrence is a Warning."""
    body = reference_fault_event("p", "n", notice("80e01801", assertion, level="SeparateNPU"), 1)
    assert (body["reason"], body["type"], body["action"]) == (reason, type_, "SeparateNPU")
    assert f"assertion:{reason}, " in body["message"] and "faultCodes:80E01801, " in body["message"]


def test_a_950_names_the_logic_id_and_needs_no_card() -> None:
    body = reference_fault_event("p", "n", notice(logic=5, a5=True, card=None, device=None), 1)
    assert ", logicID:5, faultCodes:" in body["message"] and "cardID" not in body["message"]
    assert body["metadata"]["name"] == "p.15"  # `%s.%d%d`: the ms and the logic id run together


def test_without_card_and_device_ids_no_event_is_written() -> None:
    """`GetCardIDDeviceID` failed off the 950: the reference returns an error and writes nothing."""
    with pytest.raises(NoticeError, match="cardID and deviceID of Ascend910-2"):
        reference_fault_event("p", "n", notice(logic=2, card=None), 1)


# -- through FaultEvents and the fake API server ---------------------------------------------------


def sink(api: ApiClient) -> ApiEventSink:
    return ApiEventSink(api, base_delay=0.01, max_delay=0.05)


async def test_reference_events_are_created_in_kube_system_with_unique_names(
    fake: FakeApiServer, api: ApiClient
) -> None:
    clock = FakeClock()
    ev = FaultEvents(sink(api), "node-a", clock, pod="fm-abcde", fault_format="reference")
    ev.arrived(notice("80E01801", "occur", logic=3, card=3, device=0, level="SeparateNPU"))
    ev.arrived(notice("80CB8009", "occur", logic=3, card=3, device=0, level="RestartNPU"))  # the same ms
    ev.occurred("Ascend910-3", "80E01801", "SeparateNPU")  # ours: not in this format
    ev.recovered("Ascend910-3", "80E01801")
    await ev.flush()
    objs = fake.objects("events")
    assert [o["metadata"]["name"] for o in objs] == ["fm-abcde.17000000000003", "fm-abcde.17000000000013"]
    assert {o["metadata"]["namespace"] for o in objs} == {"kube-system"}
    # The reference's component (its device plugin writes these), so filters on it find them.
    assert {(o["source"]["component"], o["reportingComponent"]) for o in objs} == {("device-plugin", "device-plugin")}
    assert [(o["reason"], o["action"], o["type"]) for o in objs] == [
        ("Occur", "SeparateNPU", "Warning"),
        ("Occur", "RestartNPU", "Warning"),
    ]
    assert objs[1]["message"].startswith(
        "device fault, nodeName:node-a, assertion:Occur, cardID:3, deviceID:0, faultCodes:80CB8009, "
        "faultLevelName:RestartNPU, alarmRaisedTime:"
    )
    assert (ev.sent, ev.failed) == (2, 0)


async def test_ours_writes_no_reference_event(fake: FakeApiServer, api: ApiClient) -> None:
    ev = FaultEvents(sink(api), "node-a", FakeClock(), pod="fm-abcde")
    ev.arrived(notice("80E01801", "occur"))
    ev.occurred("Ascend910-0", "80E01801", "SeparateNPU")
    await ev.flush()
    assert [o["reason"] for o in fake.objects("events")] == [REASON_OCCURRED]


async def test_write_fault_to_event_a_failed_write_is_logged_and_the_next_goes_out(
    fake: FakeApiServer, api: ApiClient, caplog: pytest.LogCaptureFixture
) -> None:
    """TestWriteFaultToEvent: a write that fails (here refused, 403) is logged; the writer goes on."""
    fake.fail_next(1, 403, EVENTS, "POST")
    clock = FakeClock()
    ev = FaultEvents(sink(api), "node-a", clock, pod="fm", fault_format="reference")
    ev.arrived(notice(CARD_DROP, "once", logic=1, card=1, level="SeparateNPU"))
    ev.arrived(notice(CARD_DROP, "once", logic=2, card=2, level="SeparateNPU"))
    with caplog.at_level(logging.WARNING, logger="fault_manager.events.fault_events"):
        await ev.flush()
    [obj] = fake.objects("events")
    assert obj["metadata"]["name"] == "fm.17000000000012"
    assert (ev.sent, ev.failed) == (1, 1)
    assert any(getattr(r, "chip", None) == "Ascend910-1" and getattr(r, "status", None) == 403 for r in caplog.records)


async def test_a_flapping_chip_is_limited_and_the_rest_logged_not_summarised(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Per-chip buckets in this format too, so one flapping chip cannot silence the others; what they
    refuse is logged with its count, never as an Event of a shape the reference has not."""
    sent: list[dict[str, Any]] = []

    class ListSink:
        async def emit(self, event: dict[str, Any]) -> None:
            sent.append(event)

    clock = FakeClock()
    ev = FaultEvents(ListSink(), "node-a", clock, pod="fm", fault_format="reference", per_chip_per_minute=2)
    for _ in range(5):
        ev.arrived(notice("80CB8009", "occur", logic=1, card=1, level="RestartNPU"))
    ev.arrived(notice("80CB8009", "occur", logic=2, card=2, level="RestartNPU"))
    await ev.flush()
    assert [e["metadata"]["name"][-1] for e in sent] == ["1", "1", "2"]
    assert ev.suppressed == 3
    clock.t += 60
    with caplog.at_level(logging.WARNING, logger="fault_manager.events.fault_events"):
        await ev.flush()
    assert len(sent) == 3, "no summary Event"
    assert any(r.getMessage() == "fault events suppressed" and getattr(r, "count", None) == 3 for r in caplog.records)


async def test_the_fake_api_server_refuses_what_the_apiserver_refuses(fake: FakeApiServer, api: ApiClient) -> None:
    """legacyValidateEvent: an Event with eventTime and no action is invalid (so these tests can fail)."""
    body = reference_fault_event("fm", "node-a", notice(), int(T0 * 1000))
    bad = {**body, "action": ""}

    class Once:
        async def emit(self, event: dict[str, Any]) -> None:
            await sink(api).emit(bad)

    ev = FaultEvents(Once(), "node-a", FakeClock(), pod="fm", fault_format="reference")
    ev.arrived(notice())
    await ev.flush()
    assert (ev.sent, ev.failed) == (0, 1) and fake.objects("events") == []
    await sink(api).emit(body)
    assert [o["metadata"]["name"] for o in fake.objects("events")] == ["fm.17000000000000"]
