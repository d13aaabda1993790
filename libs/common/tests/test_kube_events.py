"""The Events adapter alone: the body of an Event about a Node, the API sink (retried or not, in
its namespace) and the offline file. Which Events the fault-manager sends, and how often, is tested
with it: services/fault-manager/tests/test_fault_events.py."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from ascend_common.adapters.kube.client import ApiClient, KubeRejected, KubeRetriesExhausted
from ascend_common.adapters.kube.events import MAX_MESSAGE, ApiEventSink, OfflineEventSink, event_body, micro_time

from tests.support.fake_apiserver import FakeApiServer

T0 = 1_700_000_000.0  # 2023-11-14T22:13:20Z
EVENTS = "/api/v1/namespaces/kube-system/events"


def api_sink(api: ApiClient, **kw: Any) -> ApiEventSink:
    return ApiEventSink(api, base_delay=0.01, max_delay=0.05, **kw)


def body(message: str = "Ascend910-3 isolated: test", **kw: Any) -> dict[str, Any]:
    return event_body("node-a", "SomeReason", message, "Warning", component="some-component", first=T0, **kw)


# -- the body -------------------------------------------------------------------------------------


def test_the_body_is_about_the_node_and_names_the_component_it_is_given() -> None:
    ev = body(last=T0 + 5, count=3, node_uid="uid-node-a")
    assert ev["metadata"] == {"generateName": "node-a.npu-"}
    assert ev["involvedObject"] == {"apiVersion": "v1", "kind": "Node", "name": "node-a", "uid": "uid-node-a"}
    assert ev["source"] == {"component": "some-component", "host": "node-a"}
    # What the apiserver demands of a Node event outside "default": eventTime and the reporting fields.
    assert (ev["reportingComponent"], ev["reportingInstance"], ev["action"]) == (
        "some-component",
        "some-component-node-a",
        "SomeReason",
    )
    assert (ev["firstTimestamp"], ev["lastTimestamp"], ev["count"]) == (
        "2023-11-14T22:13:20Z",
        "2023-11-14T22:13:25Z",
        3,
    )
    assert ev["eventTime"] == "2023-11-14T22:13:25.000000Z"  # the last occurrence, a whole second kept


def test_the_uid_defaults_to_the_node_name_and_a_long_message_is_cut_to_the_apiservers_bound() -> None:
    ev = body("x" * (MAX_MESSAGE + 10))
    assert ev["involvedObject"]["uid"] == "node-a"
    assert ev["message"] == "x" * MAX_MESSAGE
    assert (ev["firstTimestamp"], ev["lastTimestamp"], ev["count"]) == ("2023-11-14T22:13:20Z",) * 2 + (1,)


def test_micro_time_always_has_six_digits_of_fraction() -> None:
    assert micro_time(T0) == datetime.fromtimestamp(T0, UTC).strftime("%Y-%m-%dT%H:%M:%S.000000Z")
    assert micro_time(T0 + 0.25) == "2023-11-14T22:13:20.250000Z"


# -- the API sink ---------------------------------------------------------------------------------


async def test_the_api_sink_creates_the_event_as_written_in_its_namespace(fake: FakeApiServer, api: ApiClient) -> None:
    await api_sink(api).emit(body())
    await api_sink(api, namespace="default").emit(body())
    [in_kube_system] = [e for e in fake.objects("events") if e["metadata"]["namespace"] == "kube-system"]
    [in_default] = [e for e in fake.objects("events") if e["metadata"]["namespace"] == "default"]
    assert in_kube_system["metadata"]["name"].startswith("node-a.npu-")
    # Sent as written, not through the client's models, whose isoformat() would drop the ".000000".
    assert in_kube_system["eventTime"] == in_default["eventTime"] == "2023-11-14T22:13:20.000000Z"
    assert fake.count("POST", EVENTS) == 1


async def test_the_api_sink_retries_a_server_error(fake: FakeApiServer, api: ApiClient) -> None:
    fake.fail_next(1, 500, EVENTS, "POST")
    await api_sink(api).emit(body())
    assert fake.count("POST", EVENTS) == 2
    assert len(fake.objects("events")) == 1


async def test_the_api_sink_raises_a_refusal_at_once(fake: FakeApiServer, api: ApiClient) -> None:
    fake.fail_next(1, 403, EVENTS, "POST")
    with pytest.raises(KubeRejected) as refused:
        await api_sink(api).emit(body())
    assert refused.value.status == 403
    assert fake.count("POST", EVENTS) == 1
    assert fake.objects("events") == []


async def test_the_api_sink_retries_a_bounded_number_of_times(fake: FakeApiServer, api: ApiClient) -> None:
    fake.fail_next(10, 503, EVENTS, "POST")
    with pytest.raises(KubeRetriesExhausted):
        await api_sink(api, retries=2).emit(body())
    assert fake.count("POST", EVENTS) == 3


# -- the offline sink -----------------------------------------------------------------------------


async def test_the_offline_sink_appends_json_lines_and_keeps_the_last_ones(tmp_path: Path) -> None:
    sink = OfflineEventSink(tmp_path / "state", keep=3)
    for i in range(5):
        await sink.emit(body(f"event {i}"))
    lines = [json.loads(line) for line in (tmp_path / "state" / "events.jsonl").read_text().splitlines()]
    assert [e["message"] for e in lines] == [f"event {i}" for i in range(5)]
    assert lines[0] == body("event 0")
    assert [e["message"] for e in sink.recent()] == [f"event {i}" for i in (2, 3, 4)]


async def test_the_offline_file_is_rotated_at_its_size_bound(tmp_path: Path) -> None:
    sink = OfflineEventSink(tmp_path, max_bytes=2000)
    for i in range(20):
        await sink.emit(body(f"round {i}"))
    current, older = tmp_path / "events.jsonl", tmp_path / "events.jsonl.1"
    assert current.stat().st_size <= 2000 and older.stat().st_size <= 2000
    assert json.loads(current.read_text().splitlines()[-1])["message"] == "round 19"
