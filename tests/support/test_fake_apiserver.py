"""The fake kube-apiserver, driven by the official client the services use."""

from __future__ import annotations

import asyncio
import contextlib
import json
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
import urllib3
from kubernetes import client as k8s
from kubernetes import watch as k8s_watch

from tests.support.fake_apiserver import FakeApiServer
from tests.support.waiting import WAIT_S, until_sync


@pytest.fixture
def fake() -> Iterator[FakeApiServer]:
    before = set(threading.enumerate())
    with FakeApiServer() as server:
        yield server
    leaked = [t for t in set(threading.enumerate()) - before if t.is_alive() and t.name != "asyncio_0"]
    assert not leaked, f"threads left behind: {leaked}"


@pytest.fixture
def v1(fake: FakeApiServer) -> Any:
    return k8s.CoreV1Api(fake.api_client())


def names(pods: Any) -> list[str]:
    return [p.metadata.name for p in pods.items]


def status_body(exc: k8s.ApiException) -> dict[str, Any]:
    body = json.loads(exc.body or "")
    assert isinstance(body, dict)
    return body


def watch_events(v1: Any, rv: str, *, timeout: int = 2, stop_after: int = 0, **kwargs: Any) -> list[tuple[str, str]]:
    """(type, name) of the events of one bounded watch of all pods from `rv`."""
    w = k8s_watch.Watch()  # type: ignore[no-untyped-call]
    out: list[tuple[str, str]] = []
    events = w.stream(v1.list_pod_for_all_namespaces, resource_version=rv, timeout_seconds=timeout, **kwargs)  # type: ignore[no-untyped-call]
    for event in events:
        out.append((event["type"], event["object"].metadata.name))
        if stop_after and len(out) >= stop_after:
            w.stop()  # type: ignore[no-untyped-call]
    return out


def test_list_with_field_and_label_selectors(fake: FakeApiServer, v1: Any) -> None:
    fake.add_pod("a", node="n1", labels={"app": "x"})
    fake.add_pod("b", node="n2", labels={"app": "x"})
    fake.add_pod("c", namespace="other", node="n1", labels={"app": "y"})

    assert names(v1.list_pod_for_all_namespaces(field_selector="spec.nodeName=n1")) == ["a", "c"]
    assert names(v1.list_namespaced_pod("default", field_selector="spec.nodeName=n1")) == ["a"]
    assert names(v1.list_pod_for_all_namespaces(field_selector="metadata.name=b")) == ["b"]
    assert names(v1.list_pod_for_all_namespaces(label_selector="app=x,app!=y")) == ["a", "b"]
    assert names(v1.list_pod_for_all_namespaces(field_selector="spec.nodeName!=n1")) == ["b"]
    listed = v1.list_pod_for_all_namespaces()
    assert int(listed.metadata.resource_version) == fake.resource_version

    with pytest.raises(k8s.ApiException) as err:
        v1.list_pod_for_all_namespaces(field_selector="spec.schedulerName=x")
    assert err.value.status == 400
    with pytest.raises(k8s.ApiException) as err:
        v1.list_pod_for_all_namespaces(label_selector="app in (x,y)")
    assert err.value.status == 400


def test_list_pages_with_limit_and_continue(fake: FakeApiServer, v1: Any) -> None:
    for i in range(5):
        fake.add_pod(f"p{i}")
    first = v1.list_namespaced_pod("default", limit=2)
    assert names(first) == ["p0", "p1"] and first.metadata.var_continue
    fake.add_pod("p9")  # not part of the snapshot the pages come from
    second = v1.list_namespaced_pod("default", limit=2, _continue=first.metadata.var_continue)
    third = v1.list_namespaced_pod("default", limit=2, _continue=second.metadata.var_continue)
    assert names(second) + names(third) == ["p2", "p3", "p4"]
    assert not third.metadata.var_continue
    assert third.metadata.resource_version == first.metadata.resource_version


def test_objects_carry_server_metadata_and_every_write_bumps_the_version(fake: FakeApiServer, v1: Any) -> None:
    created = v1.create_namespaced_pod(
        "default", {"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "image": "i"}]}}
    )
    assert created.metadata.uid and created.metadata.creation_timestamp and created.status.phase == "Pending"
    rv1 = int(created.metadata.resource_version)
    patched = v1.patch_namespaced_pod("p", "default", {"metadata": {"labels": {"a": "b"}}})
    assert int(patched.metadata.resource_version) == rv1 + 1 == fake.resource_version
    same = v1.patch_namespaced_pod("p", "default", {"metadata": {"labels": {"a": "b"}}})
    assert int(same.metadata.resource_version) == rv1 + 1, "a no-op patch is not a write"
    assert patched.metadata.uid == created.metadata.uid


def test_watch_reports_added_modified_deleted_from_a_resource_version(fake: FakeApiServer, v1: Any) -> None:
    rv = v1.list_pod_for_all_namespaces().metadata.resource_version
    fake.add_pod("p", node="n1")
    v1.patch_namespaced_pod("p", "default", {"metadata": {"annotations": {"k": "v"}}})
    v1.delete_namespaced_pod("p", "default", grace_period_seconds=0)
    assert watch_events(v1, rv, timeout=1) == [("ADDED", "p"), ("MODIFIED", "p"), ("DELETED", "p")]


def test_live_watch_follows_writes_and_selection_changes(fake: FakeApiServer, v1: Any) -> None:
    fake.add_pod("mover", node="n2")
    rv = v1.list_pod_for_all_namespaces().metadata.resource_version

    def writer() -> None:
        until_sync(lambda: fake.live_watches > 0, what="the watch to be live")
        fake.add_pod("other", node="n2")  # never seen: not on n1
        fake.modify("pods", "mover", "default", lambda o: o["spec"].update(nodeName="n1"))
        fake.modify("pods", "mover", "default", lambda o: o["metadata"].update(labels={"x": "y"}))
        fake.modify("pods", "mover", "default", lambda o: o["spec"].update(nodeName="n3"))

    thread = threading.Thread(target=writer)
    thread.start()
    events = watch_events(v1, rv, timeout=5, stop_after=3, field_selector="spec.nodeName=n1")
    thread.join(5)
    # Entering the selection is ADDED and leaving it DELETED, as on a real apiserver.
    assert events == [("ADDED", "mover"), ("MODIFIED", "mover"), ("DELETED", "mover")]


def test_watch_without_resource_version_starts_with_the_current_state(fake: FakeApiServer, v1: Any) -> None:
    fake.add_pod("a")
    fake.add_pod("b")
    w = k8s_watch.Watch()  # type: ignore[no-untyped-call]
    events = w.stream(v1.list_namespaced_pod, "default", timeout_seconds=1)  # type: ignore[no-untyped-call]
    seen = [e["object"].metadata.name for e in events]
    assert seen == ["a", "b"]


async def test_watch_timeout_ends_the_stream(fake: FakeApiServer, v1: Any) -> None:
    # Nothing else ends this watch: without its 1 s timeout it would outlast the bound.
    watch = asyncio.to_thread(watch_events, v1, str(fake.resource_version), timeout=1)
    assert await asyncio.wait_for(watch, WAIT_S) == []


def test_watch_from_a_compacted_resource_version_is_410(fake: FakeApiServer, v1: Any) -> None:
    old = str(fake.resource_version)
    fake.add_pod("p")
    fake.compact()
    with pytest.raises(k8s.ApiException) as err:
        watch_events(v1, old, timeout=2)
    assert err.value.status == 410
    # A current resourceVersion still works after compaction.
    assert watch_events(v1, str(fake.resource_version), timeout=1) == []


def test_history_is_bounded() -> None:
    with FakeApiServer(history=3) as small:
        v1 = k8s.CoreV1Api(small.api_client())
        rv = str(small.resource_version)
        for i in range(5):
            small.add_pod(f"p{i}")
        with pytest.raises(k8s.ApiException) as err:
            watch_events(v1, rv, timeout=1)
        assert err.value.status == 410
        recent = str(small.resource_version - 2)
        assert [name for _, name in watch_events(v1, recent, timeout=1)] == ["p3", "p4"]


def test_live_watch_expired_by_compaction(fake: FakeApiServer, v1: Any) -> None:
    timer = threading.Timer(0.3, fake.compact)
    timer.start()
    try:
        with pytest.raises(k8s.ApiException) as err:
            watch_events(v1, str(fake.resource_version), timeout=5)
    finally:
        timer.cancel()
    assert err.value.status == 410


def test_stale_replace_conflicts_and_create_of_existing_is_already_exists(fake: FakeApiServer, v1: Any) -> None:
    fake.add_configmap("cm", "kube-system", {"a": "1"})
    stale = v1.read_namespaced_config_map("cm", "kube-system")
    fresh = v1.read_namespaced_config_map("cm", "kube-system")
    fresh.data["a"] = "2"
    v1.replace_namespaced_config_map("cm", "kube-system", fresh)
    stale.data["a"] = "3"
    with pytest.raises(k8s.ApiException) as err:
        v1.replace_namespaced_config_map("cm", "kube-system", stale)
    assert err.value.status == 409 and status_body(err.value)["reason"] == "Conflict"
    assert fake.get_object("configmaps", "cm", "kube-system")["data"] == {"a": "2"}  # type: ignore[index]

    with pytest.raises(k8s.ApiException) as err:
        v1.create_namespaced_config_map("kube-system", {"metadata": {"name": "cm"}, "data": {}})
    assert err.value.status == 409 and status_body(err.value)["reason"] == "AlreadyExists"


def test_a_configmap_over_1_mib_is_refused_as_the_real_apiserver_refuses_it(fake: FakeApiServer, v1: Any) -> None:
    big = {"metadata": {"name": "big"}, "data": {"a": "x" * (1024 * 1024 - 1), "b": "yy"}}
    with pytest.raises(k8s.ApiException) as err:
        v1.create_namespaced_config_map("kube-system", big)
    assert (
        err.value.status == 422 and "Too long: may not be more than 1048576 bytes" in status_body(err.value)["message"]
    )
    assert fake.get_object("configmaps", "big", "kube-system") is None
    big["data"]["b"] = "y"
    v1.create_namespaced_config_map("kube-system", big)  # exactly 1 MiB is allowed
    with pytest.raises(k8s.ApiException) as err:
        v1.patch_namespaced_config_map("big", "kube-system", {"data": {"c": "z"}})
    assert err.value.status == 422


def test_pod_and_node_patches_are_refused_where_their_labels_or_annotations_are(fake: FakeApiServer, v1: Any) -> None:
    """ValidateObjectMeta on every kind (issue 33): a label value the API refuses, an annotation
    key that is no qualified name, annotations over 256 KiB; the object is unchanged."""
    fake.add_pod("p", "default", node="node-a")
    fake.add_node("node-a")
    bad = [
        {"metadata": {"labels": {"accelerator": "a,b"}}},
        {"metadata": {"annotations": {"bad key": "x"}}},
        {"metadata": {"annotations": {"huawei.com/AscendReal": "x" * (256 * 1024)}}},
    ]
    for patch in bad:
        with pytest.raises(k8s.ApiException) as err:
            v1.patch_namespaced_pod("p", "default", patch)
        assert err.value.status == 422 and "metadata." in status_body(err.value)["message"], patch
        with pytest.raises(k8s.ApiException) as err:
            v1.patch_node("node-a", patch)
        assert err.value.status == 422 and "metadata." in status_body(err.value)["message"], patch
    assert not (fake.get_object("pods", "p", "default") or {})["metadata"].get("annotations")
    v1.patch_namespaced_pod("p", "default", {"metadata": {"annotations": {"huawei.com/AscendReal": "Ascend910-0"}}})
    v1.patch_node("node-a", {"metadata": {"labels": {"huawei.com/Ascend910": "card"}}})


def test_missing_object_is_404_with_a_status_body(v1: Any) -> None:
    with pytest.raises(k8s.ApiException) as err:
        v1.read_namespaced_pod("nope", "default")
    assert err.value.status == 404
    assert status_body(err.value)["details"] == {"name": "nope", "kind": "pods"}
    with pytest.raises(k8s.ApiException) as err:
        v1.patch_node("nope", {"metadata": {"labels": {"a": "b"}}})
    assert err.value.status == 404


def test_patch_types(fake: FakeApiServer, v1: Any) -> None:
    fake.add_pod("p", annotations={"keep": "1", "drop": "2"})
    v1.patch_namespaced_pod(
        "p",
        "default",
        {"metadata": {"annotations": {"new": "3", "drop": None}}},
        _content_type="application/strategic-merge-patch+json",
    )
    assert fake.requests[-1].content_type == "application/strategic-merge-patch+json"
    annotations = fake.get_object("pods", "p", "default")["metadata"]["annotations"]  # type: ignore[index]
    assert annotations == {"keep": "1", "new": "3"}

    v1.patch_namespaced_pod(
        "p", "default", {"metadata": {"labels": {"l": "1"}}}, _content_type="application/merge-patch+json"
    )
    v1.patch_namespaced_pod(
        "p",
        "default",
        [
            {"op": "replace", "path": "/metadata/annotations/keep", "value": "9"},
            {"op": "add", "path": "/metadata/annotations/a~1b", "value": "slash"},
            {"op": "remove", "path": "/metadata/labels/l"},
        ],
        _content_type="application/json-patch+json",
    )
    meta = fake.get_object("pods", "p", "default")["metadata"]  # type: ignore[index]
    assert meta["annotations"] == {"keep": "9", "new": "3", "a/b": "slash"}
    assert meta["labels"] == {}

    with pytest.raises(k8s.ApiException) as err:
        v1.patch_namespaced_pod(
            "p",
            "default",
            [{"op": "remove", "path": "/metadata/labels/none"}],
            _content_type="application/json-patch+json",
        )
    assert err.value.status == 422
    # A merge patch that names a stale resourceVersion is an optimistic-concurrency conflict.
    with pytest.raises(k8s.ApiException) as err:
        v1.patch_namespaced_pod("p", "default", {"metadata": {"resourceVersion": "1", "labels": {"x": "y"}}})
    assert err.value.status == 409


def test_pod_delete_is_graceful_unless_grace_is_zero(fake: FakeApiServer, v1: Any) -> None:
    fake.add_pod("p")
    rv = str(fake.resource_version)
    deleted = v1.delete_namespaced_pod("p", "default")
    assert deleted.metadata.deletion_timestamp is not None
    assert v1.read_namespaced_pod("p", "default").metadata.deletion_timestamp is not None
    v1.delete_namespaced_pod("p", "default", grace_period_seconds=0)
    assert fake.objects("pods") == []
    assert watch_events(v1, rv, timeout=1) == [("MODIFIED", "p"), ("DELETED", "p")]

    fake.add_configmap("cm", "ns", {})
    v1.delete_namespaced_config_map("cm", "ns")
    assert fake.objects("configmaps") == []


def test_nodes_configmaps_and_events(fake: FakeApiServer, v1: Any) -> None:
    fake.add_node("n1", labels={"a": "1"}, internal_ip="10.0.0.7")
    node = v1.patch_node("n1", {"metadata": {"labels": {"b": "2"}, "annotations": {"superPodID": "3"}}})
    assert node.metadata.labels == {"a": "1", "b": "2"}
    assert node.status.addresses[0].address == "10.0.0.7"
    assert names(v1.list_node(label_selector="b=2")) == ["n1"]

    v1.create_namespaced_config_map("kube-system", {"metadata": {"name": "cm", "labels": {"reset": "true"}}})
    assert names(v1.list_config_map_for_all_namespaces(label_selector="reset=true")) == ["cm"]

    v1.create_namespaced_event(
        "default",
        {"metadata": {"name": "e1"}, "involvedObject": {"kind": "Pod", "name": "p"}, "reason": "R", "message": "m"},
    )
    assert [e["reason"] for e in fake.objects("events")] == ["R"]
    with pytest.raises(k8s.ApiException) as err:
        v1.list_namespaced_event("default")
    assert err.value.status == 405
    with pytest.raises(k8s.ApiException) as err:
        v1.create_namespaced_pod("default", {"metadata": {"name": "Bad_Name"}, "spec": {"containers": []}})
    assert err.value.status == 422


def test_a_nodes_status_is_written_through_its_status_subresource_only(fake: FakeApiServer, v1: Any) -> None:
    fake.add_node("n1")
    fake.modify("nodes", "n1", mutate=lambda n: n.update(
        spec={"podCIDR": "10.1.0.0/24"},
        status={**n["status"], "capacity": {"cpu": "8", "huawei.com/Ascend910": "8"},
                "allocatable": {"cpu": "8", "huawei.com/Ascend910": "8"}},
    ))  # fmt: skip
    rv = fake.get_object("nodes", "n1")["metadata"]["resourceVersion"]  # type: ignore[index]
    gone = {"status": {"capacity": {"huawei.com/Ascend910": None}, "allocatable": {"huawei.com/Ascend910": None}}}
    # Through the node itself: the status half is kept, silently (200, nothing written).
    v1.patch_node("n1", {**gone, "spec": {"podCIDR": "10.2.0.0/24"}})
    node = fake.get_object("nodes", "n1")
    assert node is not None and node["status"]["capacity"]["huawei.com/Ascend910"] == "8"
    assert node["spec"] == {"podCIDR": "10.2.0.0/24"}
    # Through the status subresource: the keys go, the spec is kept.
    answer = v1.patch_node_status("n1", {**gone, "spec": {"podCIDR": "10.3.0.0/24"}})
    assert answer.status.capacity == {"cpu": "8"} and answer.status.allocatable == {"cpu": "8"}
    node = fake.get_object("nodes", "n1")
    assert node is not None and node["spec"] == {"podCIDR": "10.2.0.0/24"}
    assert int(node["metadata"]["resourceVersion"]) > int(rv)
    assert node["status"]["addresses"] == [{"type": "InternalIP", "address": "192.0.2.10"}]
    # A replace through the status subresource writes the status alone too.
    assert v1.read_node_status("n1").status.capacity == {"cpu": "8"}
    body = fake.get_object("nodes", "n1")
    assert body is not None
    body["status"]["capacity"] = {"cpu": "4"}
    body["spec"] = {"podCIDR": "10.9.0.0/24"}
    v1.replace_node_status("n1", body)
    node = fake.get_object("nodes", "n1")
    assert node is not None and node["status"]["capacity"] == {"cpu": "4"} and node["spec"]["podCIDR"] == "10.2.0.0/24"


def test_fail_next_matches_method_and_path_then_clears(fake: FakeApiServer, v1: Any) -> None:
    fake.add_pod("p")
    fake.fail_next(2, 500, path_prefix="/api/v1/namespaces/default/pods/p", method="PATCH")
    v1.read_namespaced_pod("p", "default")  # not a PATCH: unaffected
    for _ in range(2):
        with pytest.raises(k8s.ApiException) as err:
            v1.patch_namespaced_pod("p", "default", {"metadata": {"labels": {"a": "b"}}})
        assert err.value.status == 500
    v1.patch_namespaced_pod("p", "default", {"metadata": {"labels": {"a": "b"}}})
    assert fake.count("PATCH", "/api/v1/namespaces/default/pods/p") == 3
    assert [r.status for r in fake.requests if r.method == "PATCH"] == [500, 500, 200]
    assert fake.requests[-1].body == {"metadata": {"labels": {"a": "b"}}}


def test_429_carries_retry_after(fake: FakeApiServer, v1: Any) -> None:
    fake.add_pod("p")
    fake.fail_next(1, 429, method="PATCH", retry_after=2)
    with pytest.raises(k8s.ApiException) as err:
        v1.patch_namespaced_pod("p", "default", {"metadata": {"labels": {"a": "b"}}})
    assert err.value.status == 429 and (err.value.headers or {}).get("Retry-After") == "2"
    fake.fail_next(1, 409, method="PUT")
    with pytest.raises(k8s.ApiException) as err:
        v1.replace_namespaced_pod("p", "default", v1.read_namespaced_pod("p", "default"))
    assert err.value.status == 409


def test_delay_holds_requests(fake: FakeApiServer, v1: Any) -> None:
    fake.delay(0.4)
    start = time.monotonic()
    v1.list_node()
    assert time.monotonic() - start >= 0.35
    fake.delay(0)
    fake.delay(2)
    # urllib3 retries a GET's read timeout on its own (3 times) before giving up.
    with pytest.raises(urllib3.exceptions.MaxRetryError):
        v1.list_node(_request_timeout=0.3)
    fake.delay(0)


@pytest.mark.parametrize("mode", ["refuse", "503"])
def test_set_down_and_back(fake: FakeApiServer, v1: Any, mode: Any) -> None:
    fake.add_node("n1")
    fake.set_down(True, mode)
    expected: Any = urllib3.exceptions.MaxRetryError if mode == "refuse" else k8s.ApiException
    with pytest.raises(expected):
        v1.list_node()
    fake.set_down(False)
    assert names(v1.list_node()) == ["n1"]


def test_set_down_ends_live_watches(fake: FakeApiServer, v1: Any) -> None:
    def watcher() -> None:
        with contextlib.suppress(urllib3.exceptions.HTTPError, k8s.ApiException):
            watch_events(v1, str(fake.resource_version), timeout=60)  # far beyond the bound below

    thread = threading.Thread(target=watcher)
    thread.start()
    until_sync(lambda: fake.live_watches > 0, what="the watch to be live")
    fake.set_down(True)
    thread.join(WAIT_S)
    assert not thread.is_alive(), "set_down ended the live watch"
    fake.set_down(False)


def test_stop_ends_a_live_watch_promptly() -> None:
    server = FakeApiServer()
    server.start()
    v1 = k8s.CoreV1Api(server.api_client())
    errors: list[BaseException] = []

    def watcher() -> None:
        try:
            watch_events(v1, str(server.resource_version), timeout=30)
        except BaseException as exc:  # the stream may be cut: that is the point
            errors.append(exc)

    thread = threading.Thread(target=watcher)
    thread.start()
    until_sync(lambda: server.live_watches > 0, what="the watch to be live")
    server.stop()
    thread.join(WAIT_S)  # far less than the watch's 30 s: stop() cut it
    assert not thread.is_alive()


def test_request_log_and_count(fake: FakeApiServer, v1: Any) -> None:
    v1.list_pod_for_all_namespaces(field_selector="spec.nodeName=n1")
    watch_events(v1, str(fake.resource_version), timeout=1)
    assert fake.count("GET", "/api/v1/pods") == 2
    assert fake.count("GET", "/api/v1/pods", watch=True) == 1
    assert fake.requests[0].query == {"fieldSelector": "spec.nodeName=n1"}


def raw_watch(fake: FakeApiServer, path: str, **query: str) -> list[tuple[float, dict[str, Any]]]:
    """(seconds since the request, event) of one watch, read line by line until the server ends it."""
    started = time.monotonic()
    http = urllib3.PoolManager()
    resp = http.request("GET", fake.url + path, fields={"watch": "true", **query}, preload_content=False)
    try:
        assert resp.status == 200
        return [(time.monotonic() - started, json.loads(line)) for line in resp.stream() if line.strip()]
    finally:
        resp.release_conn()


def test_bookmarks_only_when_asked_for() -> None:
    with FakeApiServer(bookmark_interval_s=0.3) as fake:
        fake.add_pod("a")
        rv = str(fake.resource_version)
        assert raw_watch(fake, "/api/v1/pods", resourceVersion=rv, timeoutSeconds="3") == []
        # A watch of 2 s or less has its last bookmark time behind it from the start: none.
        assert raw_watch(fake, "/api/v1/pods", resourceVersion=rv, timeoutSeconds="2", allowWatchBookmarks="1") == []
        events = raw_watch(fake, "/api/v1/pods", resourceVersion=rv, timeoutSeconds="3", allowWatchBookmarks="true")
        assert events, "bookmarks were asked for"
        assert {e["type"] for _, e in events} == {"BOOKMARK"}
        for _, event in events:
            obj = event["object"]
            assert obj["kind"] == "Pod" and obj["apiVersion"] == "v1"
            assert obj["metadata"] == {"resourceVersion": rv}, "a plain watch's bookmark carries no annotation"


def test_bookmarks_every_interval_and_before_the_timeout() -> None:
    with FakeApiServer(bookmark_interval_s=1.0) as fake:
        rv = str(fake.resource_version)
        times = [t for t, e in raw_watch(fake, "/api/v1/nodes", resourceVersion=rv, timeoutSeconds="4",
                                         allowWatchBookmarks="true")]  # fmt: skip
        # One a second from the start, then one 2 s before the 4 s timeout (none left after it).
        assert len(times) == 2, times
        assert 0.9 <= times[0] <= 1.6 and 1.9 <= times[1] <= 2.6, times


def test_a_bookmark_moves_to_the_latest_version_past_other_objects_changes() -> None:
    with FakeApiServer(bookmark_interval_s=0.5) as fake:
        rv = str(fake.resource_version)
        timer = threading.Timer(0.2, lambda: fake.add_configmap("other", "kube-system", {}))
        timer.start()
        events = raw_watch(fake, "/api/v1/nodes", resourceVersion=rv, timeoutSeconds="3", allowWatchBookmarks="true")
        timer.join()
        assert [e["type"] for _, e in events] == ["BOOKMARK"] * len(events) and events
        assert events[-1][1]["object"]["metadata"]["resourceVersion"] == str(fake.resource_version)


def test_verb_counts_name_requests_as_the_apiservers_metrics_do(fake: FakeApiServer, v1: Any) -> None:
    fake.add_node("n1")
    fake.add_configmap("c", "kube-system", {})
    v1.read_node("n1")
    v1.list_node()
    v1.list_namespaced_config_map("kube-system", field_selector="metadata.name=c")
    v1.read_namespaced_config_map("c", "kube-system")
    v1.patch_node("n1", {"metadata": {"labels": {"x": "1"}}})
    mark = len(fake.requests)
    watch_events(v1, str(fake.resource_version), timeout=1)
    assert fake.verb_counts() == {"GET": 2, "LIST": 2, "PATCH": 1, "WATCH": 1}
    assert fake.verb_counts(since=mark) == {"WATCH": 1}
