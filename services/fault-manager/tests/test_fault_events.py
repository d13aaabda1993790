"""The fault-manager's Kubernetes Events: the Event fields, the offline file, per-chip rate limiting
with summaries, API failures (retried or not), stop() and the queue bound. The sinks alone are
tested with the adapter, in libs/common/tests/test_kube_events.py."""

from __future__ import annotations

import asyncio
import json
import logging
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from ascend_common.adapters.kube.client import ApiClient
from ascend_common.adapters.kube.events import ApiEventSink, OfflineEventSink
from fault_manager.events.fault_events import (
    REASON_ISOLATED,
    REASON_OCCURRED,
    REASON_RECOVERED,
    REASON_RELEASED,
    REASON_SUPPRESSED,
    FaultEvents,
)

from tests.support.fake_apiserver import FakeApiServer
from tests.support.waiting import WAIT_S, until

C3, C5 = "Ascend910-3", "Ascend910-5"
HBM = "80E01801"
T0 = 1_700_000_000.0  # 2023-11-14T22:13:20Z
EVENTS = "/api/v1/namespaces/kube-system/events"


class FakeClock:
    def __init__(self, t: float = T0) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t


class ListSink:
    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = []

    async def emit(self, event: dict[str, Any]) -> None:
        self.events.append(event)

    def of(self, chip: str) -> list[dict[str, Any]]:
        return [e for e in self.events if chip in e["message"]]


def api_sink(api: ApiClient, **kw: Any) -> ApiEventSink:
    return ApiEventSink(api, base_delay=0.01, max_delay=0.05, **kw)


def at(stamp: str) -> float:
    return datetime.fromisoformat(stamp).timestamp()


# -- the Event on the API server -----------------------------------------------------------------


async def test_events_are_created_about_the_node_with_the_right_fields(fake: FakeApiServer, api: ApiClient) -> None:
    clock = FakeClock()
    ev = FaultEvents(api_sink(api), "node-a", clock, node_uid="uid-node-a")
    ev.occurred(C3, HBM, "RestartNPU")
    clock.t += 1
    ev.recovered(C3, HBM)
    ev.isolated(C3, "FaultFrequency of 80E01801")
    ev.released(C3, "admin")
    await ev.flush()

    by_reason = {e["reason"]: e for e in fake.objects("events")}
    assert set(by_reason) == {REASON_OCCURRED, REASON_RECOVERED, REASON_ISOLATED, REASON_RELEASED}
    occ = by_reason[REASON_OCCURRED]
    assert occ["metadata"]["namespace"] == "kube-system"
    assert occ["metadata"]["name"].startswith("node-a.npu-")
    assert occ["involvedObject"] == {"apiVersion": "v1", "kind": "Node", "name": "node-a", "uid": "uid-node-a"}
    assert occ["type"] == "Warning"
    assert all(s in occ["message"] for s in (C3, HBM, "RestartNPU"))
    assert occ["source"] == {"component": "fault-manager", "host": "node-a"}
    assert (at(occ["firstTimestamp"]), at(occ["lastTimestamp"]), occ["count"]) == (T0, T0, 1)
    # What the apiserver demands of a Node event outside "default": eventTime and the reporting fields.
    # Sent as written, not through the client's models: a whole second keeps its ".000000" (the models'
    # isoformat() drops it, and the apiserver refuses such a MicroTime).
    assert occ["eventTime"] == datetime.fromtimestamp(T0, UTC).strftime("%Y-%m-%dT%H:%M:%S.000000Z")
    assert (occ["reportingComponent"], occ["reportingInstance"], occ["action"]) == (
        "fault-manager",
        "fault-manager-node-a",
        REASON_OCCURRED,
    )

    rec = by_reason[REASON_RECOVERED]
    assert rec["type"] == "Normal"
    assert C3 in rec["message"] and HBM in rec["message"]
    assert at(rec["firstTimestamp"]) == T0 + 1
    assert by_reason[REASON_ISOLATED]["type"] == "Warning"
    assert "FaultFrequency" in by_reason[REASON_ISOLATED]["message"]
    assert by_reason[REASON_RELEASED]["type"] == "Normal"
    assert "admin" in by_reason[REASON_RELEASED]["message"]
    assert (ev.sent, ev.failed) == (4, 0)
    assert fake.count("POST", EVENTS) == 4


async def test_namespace_is_configurable_and_uid_defaults_to_the_node_name(fake: FakeApiServer, api: ApiClient) -> None:
    ev = FaultEvents(api_sink(api, namespace="default"), "node-b", FakeClock())
    ev.occurred(C3, HBM, "SeparateNPU")
    await ev.flush()
    [obj] = fake.objects("events")
    assert obj["metadata"]["namespace"] == "default"
    # The kubelet's convention; `kubectl describe node` looks for both the uid and the name.
    assert obj["involvedObject"]["uid"] == "node-b"


# -- API failures ---------------------------------------------------------------------------------


async def test_a_server_error_is_retried_and_the_event_created(fake: FakeApiServer, api: ApiClient) -> None:
    fake.fail_next(1, 500, EVENTS, "POST")
    ev = FaultEvents(api_sink(api), "node-a", FakeClock())
    ev.occurred(C3, HBM, "RestartNPU")
    await ev.flush()
    assert fake.count("POST", EVENTS) == 2
    assert len(fake.objects("events")) == 1
    assert (ev.sent, ev.failed) == (1, 0)


async def test_a_refusal_is_not_retried_logged_with_the_chip_and_dropped(
    fake: FakeApiServer, api: ApiClient, caplog: pytest.LogCaptureFixture
) -> None:
    fake.fail_next(1, 403, EVENTS, "POST")
    ev = FaultEvents(api_sink(api), "node-a", FakeClock())
    ev.occurred(C3, HBM, "RestartNPU")
    ev.occurred(C5, HBM, "RestartNPU")
    with caplog.at_level(logging.WARNING, logger="fault_manager.events.fault_events"):
        await ev.flush()
    assert fake.count("POST", EVENTS) == 2  # one each: the 403 was not tried again
    [obj] = fake.objects("events")
    assert C5 in obj["message"]
    assert (ev.sent, ev.failed) == (1, 1)
    [record] = [r for r in caplog.records if r.name == "fault_manager.events.fault_events"]
    assert (getattr(record, "chip", None), getattr(record, "status", None)) == (C3, 403)


async def test_retries_are_bounded(fake: FakeApiServer, api: ApiClient) -> None:
    fake.fail_next(10, 503, EVENTS, "POST")
    ev = FaultEvents(ApiEventSink(api, retries=2, base_delay=0.01), "node-a", FakeClock())
    ev.occurred(C3, HBM, "RestartNPU")
    await ev.flush()
    assert fake.count("POST", EVENTS) == 3
    assert (ev.sent, ev.failed) == (0, 1)


async def test_the_caller_never_sees_an_error() -> None:
    class Broken:
        async def emit(self, event: dict[str, Any]) -> None:
            raise RuntimeError("sink broken")

    def bad_clock() -> float:
        raise OSError("no clock")

    ev = FaultEvents(Broken(), "node-a", FakeClock())
    ev.occurred(C3, HBM, "RestartNPU")
    await ev.flush()
    assert ev.failed == 1
    worse = FaultEvents(ListSink(), "node-a", bad_clock)
    worse.occurred(C3, HBM, "RestartNPU")
    worse.isolated(C3, "x")
    assert worse.pending == 0


# -- offline --------------------------------------------------------------------------------------


async def test_offline_sink_appends_json_lines_and_keeps_the_last_ones(tmp_path: Path) -> None:
    sink = OfflineEventSink(tmp_path / "state", keep=3)
    clock = FakeClock()
    ev = FaultEvents(sink, "node-a", clock)
    for i in range(5):
        ev.isolated(f"Ascend910-{i}", "test")
    await ev.flush()
    lines = [json.loads(line) for line in (tmp_path / "state" / "events.jsonl").read_text().splitlines()]
    assert [e["message"] for e in lines] == [f"Ascend910-{i} isolated: test" for i in range(5)]
    assert lines[0]["involvedObject"]["name"] == "node-a"
    assert [e["message"] for e in sink.recent()] == [f"Ascend910-{i} isolated: test" for i in (2, 3, 4)]


async def test_offline_file_is_rotated_at_its_size_bound(tmp_path: Path) -> None:
    sink = OfflineEventSink(tmp_path, max_bytes=2000)
    ev = FaultEvents(sink, "node-a", FakeClock())
    for i in range(20):
        ev.isolated(C3, f"round {i}")
    await ev.flush()
    current, older = tmp_path / "events.jsonl", tmp_path / "events.jsonl.1"
    assert current.stat().st_size <= 2000 and older.stat().st_size <= 2000
    last = json.loads(current.read_text().splitlines()[-1])
    assert last["message"].endswith("round 19")


# -- rate limiting --------------------------------------------------------------------------------


async def test_a_flood_on_one_chip_is_limited_and_summarised_and_other_chips_are_not_affected() -> None:
    clock, sink = FakeClock(), ListSink()
    ev = FaultEvents(sink, "node-a", clock, per_chip_per_minute=6)
    for i in range(100):
        clock.t = T0 + i / 100
        ev.occurred(C3, HBM, "RestartNPU")
    ev.occurred(C5, HBM, "RestartNPU")
    await ev.flush()
    assert [e["reason"] for e in sink.of(C3)] == [REASON_OCCURRED] * 6
    assert [e["reason"] for e in sink.of(C5)] == [REASON_OCCURRED]
    assert ev.suppressed == 94

    clock.t = T0 + 5  # not a whole token back yet: no summary
    await ev.flush()
    assert len(sink.of(C3)) == 6

    clock.t = T0 + 10.5  # one token back (6 a minute = one per 10 s): the summary
    await ev.flush()
    summary = sink.of(C3)[-1]
    assert len(sink.of(C3)) == 7
    assert summary["reason"] == REASON_SUPPRESSED
    assert summary["message"] == f"94 more fault events on {C3} suppressed"
    assert summary["count"] == 94
    assert (summary["firstTimestamp"], summary["lastTimestamp"]) == ("2023-11-14T22:13:20Z", "2023-11-14T22:13:20Z")

    await ev.flush()  # said once
    assert len(sink.of(C3)) == 7


async def test_recoveries_share_the_limit_and_the_summary_precedes_the_next_event() -> None:
    clock, sink = FakeClock(), ListSink()
    ev = FaultEvents(sink, "node-a", clock, per_chip_per_minute=2, burst=1)
    ev.occurred(C3, HBM, "RestartNPU")
    ev.recovered(C3, HBM)
    ev.occurred(C3, HBM, "RestartNPU")
    clock.t += 60  # the bucket is full again (1 token): it goes to the summary, before this recovery
    ev.recovered(C3, HBM)
    await ev.flush()
    reasons = [e["reason"] for e in sink.events]
    assert reasons[:2] == [REASON_OCCURRED, REASON_SUPPRESSED]
    assert sink.events[1]["message"] == f"2 more fault events on {C3} suppressed"


async def test_the_bucket_refills_to_a_full_burst() -> None:
    clock, sink = FakeClock(), ListSink()
    ev = FaultEvents(sink, "node-a", clock, per_chip_per_minute=6, burst=3)
    for _ in range(10):
        ev.occurred(C3, HBM, "RestartNPU")
    await ev.flush()
    assert len(sink.events) == 3
    clock.t += 600  # long quiet: the summary goes out (and spends a token)
    await ev.flush()
    clock.t += 600  # the bucket is full again: a whole burst passes
    for _ in range(10):
        ev.occurred(C3, HBM, "RestartNPU")
    await ev.flush()
    assert [e["reason"] for e in sink.events[3:]] == [REASON_SUPPRESSED] + [REASON_OCCURRED] * 3


async def test_isolation_and_release_skip_the_limit() -> None:
    sink = ListSink()
    ev = FaultEvents(sink, "node-a", FakeClock(), per_chip_per_minute=1)
    for _ in range(5):
        ev.occurred(C3, HBM, "RestartNPU")
    ev.isolated(C3, "ManuallySeparateNPU")
    ev.released(C3, "admin")
    await ev.flush()
    assert [e["reason"] for e in sink.events] == [REASON_OCCURRED, REASON_ISOLATED, REASON_RELEASED]


async def test_the_background_sender_sends_and_summarises_when_the_bucket_refills() -> None:
    clock, sink = FakeClock(), ListSink()
    ev = FaultEvents(sink, "node-a", clock, per_chip_per_minute=6, tick_s=0.01)
    ev.start()
    try:
        for _ in range(20):
            ev.occurred(C3, HBM, "RestartNPU")
        await until(lambda: len(sink.events) == 6, what="the bucket's six events")
        await asyncio.sleep(0.05)  # the behaviour under test: five ticks pass and the empty bucket sends nothing
        assert len(sink.events) == 6
        clock.t += 10
        await until(lambda: len(sink.events) == 7, what="the summary after the refill")
        assert sink.events[-1]["message"] == f"14 more fault events on {C3} suppressed"
    finally:
        await ev.stop()


# -- stop and bounds ------------------------------------------------------------------------------


async def test_stop_flushes_the_queue_and_the_pending_summaries(fake: FakeApiServer, api: ApiClient) -> None:
    clock = FakeClock()
    ev = FaultEvents(api_sink(api), "node-a", clock, per_chip_per_minute=2, tick_s=60)
    ev.start()
    await asyncio.sleep(0)  # one loop turn, not a time: the sender is now waiting, with an hour-long tick
    for _ in range(5):
        ev.occurred(C3, HBM, "RestartNPU")
    ev.isolated(C5, "test")
    await ev.stop()
    reasons = sorted(e["reason"] for e in fake.objects("events"))
    assert reasons == sorted([REASON_OCCURRED, REASON_OCCURRED, REASON_ISOLATED, REASON_SUPPRESSED])
    [summary] = [e for e in fake.objects("events") if e["reason"] == REASON_SUPPRESSED]
    assert summary["message"] == f"3 more fault events on {C3} suppressed"
    assert (ev.pending, ev.dropped) == (0, 0)


async def test_stop_without_start_still_flushes() -> None:
    sink = ListSink()
    ev = FaultEvents(sink, "node-a", FakeClock())
    ev.occurred(C3, HBM, "RestartNPU")
    await ev.stop()
    assert len(sink.events) == 1


async def test_stop_is_bounded_when_the_sink_hangs() -> None:
    class Hanging:
        async def emit(self, event: dict[str, Any]) -> None:
            await asyncio.Event().wait()

    ev = FaultEvents(Hanging(), "node-a", FakeClock())
    ev.start()
    for i in range(3):
        ev.isolated(f"Ascend910-{i}", "test")
    await asyncio.wait_for(ev.stop(grace=0.2), WAIT_S)  # the sink hangs forever: only the grace ends it
    assert (ev.sent, ev.dropped, ev.pending) == (0, 3, 0)


async def test_the_queue_is_bounded_and_drops_the_oldest() -> None:
    sink = ListSink()
    ev = FaultEvents(sink, "node-a", FakeClock(), max_pending=3)
    for i in range(5):
        ev.isolated(f"Ascend910-{i}", "test")
    assert (ev.pending, ev.dropped) == (3, 2)
    await ev.flush()
    assert [e["message"] for e in sink.events] == [f"Ascend910-{i} isolated: test" for i in (2, 3, 4)]


async def test_quiet_chips_are_forgotten() -> None:
    clock = FakeClock()
    ev = FaultEvents(ListSink(), "node-a", clock)
    for i in range(50):
        ev.occurred(f"chip-{i}", HBM, "RestartNPU")
    clock.t += 60
    await ev.flush()
    assert ev._buckets == {}


def test_bad_limits_are_refused() -> None:
    with pytest.raises(ValueError, match="positive"):
        FaultEvents(ListSink(), "node-a", FakeClock(), per_chip_per_minute=0)


async def test_the_release_event_is_shaped_as_the_references(fake: FakeApiServer, api: ApiClient) -> None:
    """WriteUpgradeReasonRemoveEvent: `<pod>.EventReleaseUpgradeFault.<ms>` about the writer's pod."""
    clock = FakeClock()
    ev = FaultEvents(api_sink(api), "node-a", clock, pod="fault-manager-x1")
    message = (
        '{"Ascend910-3":[{"upgrade_time":1,"fault_code":"80e01801","fault_level":"ManuallySeparateNPU",'
        '"upgrade_type":"FaultFrequency"}]}'
    )
    ev.reasons_released(message)
    await ev.flush()
    [event] = fake.objects("events")
    assert event["metadata"]["name"] == f"fault-manager-x1.EventReleaseUpgradeFault.{int(T0 * 1000)}"
    assert (event["type"], event["reason"], event["action"], event["message"]) == (
        "Normal",
        "EventReleaseUpgradeFault",
        "EventReleaseUpgradeFault",
        message,
    )
    assert event["involvedObject"] == {"kind": "pod", "namespace": "kube-system", "name": "fault-manager-x1"}
    assert event["eventTime"].endswith(".000000Z") and "firstTimestamp" not in event
