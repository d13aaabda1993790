"""The node's PodCache (the pod informer), against the fake kube-apiserver."""

from __future__ import annotations

import asyncio
import json
import logging
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from typing import Any

import pytest
from ascend_common.adapters.kube.client import ApiClient
from ascend_common.adapters.kube.config import build_api_client
from ascend_common.adapters.kube.pod_watch import PodCache
from ascend_common.adapters.logs import JsonFormatter
from ascend_common.pods import SlimPod
from kubernetes import client as k8s

from tests.support.fake_apiserver import FakeApiServer

NODE = "node-a"
NPU = "huawei.com/Ascend910"


@pytest.fixture
def fake() -> Iterator[FakeApiServer]:
    with FakeApiServer() as server:
        yield server


@pytest.fixture
def api(fake: FakeApiServer) -> Iterator[ApiClient]:
    client = build_api_client(url=fake.url)
    yield client
    client.close()  # type: ignore[no-untyped-call]


@pytest.fixture
async def make_cache(api: ApiClient) -> AsyncIterator[Callable[..., Awaitable[PodCache]]]:
    caches: list[PodCache] = []

    async def make(**kwargs: Any) -> PodCache:
        options: dict[str, Any] = {"watch_timeout_s": 2, "backoff_base_s": 0.05, "backoff_max_s": 0.3}
        options.update(kwargs)
        cache = PodCache(api, NODE, **options)
        caches.append(cache)
        await cache.start()
        assert await cache.wait_synced(5), "the first list never landed"
        return cache

    yield make
    for cache in caches:
        await cache.stop()
    leftovers = [t.name for t in threading.enumerate() if t.name.startswith("pod-cache-")]
    assert not leftovers, f"pod cache threads still running: {leftovers}"


async def eventually(check: Callable[[], bool], what: str, timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for: {what}")
        await asyncio.sleep(0.02)


def names(cache: PodCache) -> set[str]:
    return {p.name for p in cache.pods()}


def json_logs(caplog: pytest.LogCaptureFixture, event: str) -> list[dict[str, Any]]:
    fmt = JsonFormatter("test")
    out = [json.loads(fmt.format(r)) for r in caplog.records]
    return [entry for entry in out if entry["event"] == event]


# -- PodCache ----------------------------------------------------------------------------------


async def test_cache_lists_then_follows_watch_events(
    fake: FakeApiServer, make_cache: Callable[..., Awaitable[PodCache]]
) -> None:
    fake.add_pod("a", requests={NPU: 2})
    cache = await make_cache()
    changes: list[tuple[str, str]] = []
    cache.on_change.append(lambda kind, pod: changes.append((kind, pod.name)))
    assert cache.synced and names(cache) == {"a"}
    first = cache.get("default", "a")
    assert first is not None and first.requests == {NPU: 2} and cache.by_uid(first.uid) is first

    fake.add_pod("b")
    fake.modify("pods", "a", "default", lambda o: o["metadata"]["annotations"].update({"huawei.com/kltDev": "0"}))
    fake.remove("pods", "b", "default")
    await eventually(lambda: len(changes) == 3, "three watch events")
    assert changes == [("ADDED", "b"), ("MODIFIED", "a"), ("DELETED", "b")]
    updated = cache.get("default", "a")
    assert updated is not None and updated.annotations["huawei.com/kltDev"] == "0"
    assert cache.get("default", "b") is None
    assert cache.resource_version == str(fake.resource_version)
    assert fake.count("GET", "/api/v1/pods", watch=False) == 1, "one list, then only watches"


async def test_field_selector_keeps_other_nodes_pods_out(
    fake: FakeApiServer, make_cache: Callable[..., Awaitable[PodCache]]
) -> None:
    fake.add_pod("mine")
    fake.add_pod("theirs", node="node-b")
    cache = await make_cache()
    fake.add_pod("theirs-too", node="node-b")
    fake.add_pod("mine-too")
    await eventually(lambda: names(cache) == {"mine", "mine-too"}, "the new pod of this node")
    assert {r.query.get("fieldSelector") for r in fake.requests if r.path == "/api/v1/pods"} == {
        f"spec.nodeName={NODE}"
    }
    # A pod rescheduled away from the node leaves the cache.
    fake.modify("pods", "mine", "default", lambda o: o["spec"].update(nodeName="node-b"))
    await eventually(lambda: names(cache) == {"mine-too"}, "the pod that left")


async def test_deleting_flag_then_removal(
    fake: FakeApiServer, api: ApiClient, make_cache: Callable[..., Awaitable[PodCache]]
) -> None:
    fake.add_pod("p")
    cache = await make_cache()
    await asyncio.to_thread(k8s.CoreV1Api(api).delete_namespaced_pod, "p", "default")
    await eventually(lambda: (p := cache.get("default", "p")) is not None and p.deleting, "deletionTimestamp")
    fake.remove("pods", "p", "default")
    await eventually(lambda: cache.get("default", "p") is None, "removal")


async def test_relists_after_410(
    fake: FakeApiServer, make_cache: Callable[..., Awaitable[PodCache]], caplog: pytest.LogCaptureFixture
) -> None:
    fake.add_pod("a")
    cache = await make_cache(watch_timeout_s=30)
    caplog.set_level(logging.INFO, logger="ascend_common.adapters.kube")
    changes: list[tuple[str, str]] = []
    cache.on_change.append(lambda kind, pod: changes.append((kind, pod.name)))
    await eventually(lambda: fake.live_watches == 1, "the watch is open")
    fake.compact()  # the live watch gets an ERROR 410
    await eventually(lambda: cache.lists == 2, "a re-list after the 410")
    assert any(entry["status"] == 410 for entry in json_logs(caplog, "pod watch failed, re-listing"))
    assert changes == [], "a re-list that finds nothing new reports nothing"
    fake.add_pod("b")
    await eventually(lambda: names(cache) == {"a", "b"}, "the watch resumed after the re-list")


async def test_relists_when_rewatching_from_a_version_the_history_lost(
    fake: FakeApiServer, make_cache: Callable[..., Awaitable[PodCache]], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="ascend_common.adapters.kube")
    fake.add_pod("a")
    cache = await make_cache(watch_timeout_s=1)
    await eventually(lambda: fake.live_watches == 1, "the watch is open")
    fake.delay(0.5)  # holds the reconnect after the watch's timeout
    await eventually(lambda: fake.live_watches == 0, "the watch ran its course")
    fake.add_pod("b")
    fake.compact(expire_live_watches=False)  # the cache's resourceVersion is now too old
    fake.delay(0)
    await eventually(lambda: names(cache) == {"a", "b"}, "pod b through a re-list")
    assert cache.lists == 2
    assert [e["status"] for e in json_logs(caplog, "pod watch failed, re-listing")] == [410]


@pytest.mark.parametrize("mode", ["refuse", "503"])
async def test_recovers_after_apiserver_outage(
    fake: FakeApiServer, make_cache: Callable[..., Awaitable[PodCache]], mode: Any
) -> None:
    fake.add_pod("stays")
    fake.add_pod("goes")
    cache = await make_cache()
    changes: list[tuple[str, str]] = []
    cache.on_change.append(lambda kind, pod: changes.append((kind, pod.name)))
    fake.set_down(True, mode)
    fake.add_pod("new")
    fake.remove("pods", "goes", "default")
    await asyncio.sleep(0.5)  # a few failed attempts while it is down
    assert cache.synced and names(cache) == {"stays", "goes"}, "the last state is kept while the apiserver is away"
    fake.set_down(False)
    await eventually(lambda: names(cache) == {"stays", "new"}, "the state after the outage", timeout=10)
    assert sorted(changes) == [("ADDED", "new"), ("DELETED", "goes")]


async def test_invalid_pods_are_skipped_with_a_log_line(
    fake: FakeApiServer, make_cache: Callable[..., Awaitable[PodCache]], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="ascend_common.adapters.kube")
    fake.add_pod("good")
    fake.add_pod("Bad_Name")
    fake.add_pod("noisy", annotations={f"k{i}": "v" for i in range(300)})
    cache = await make_cache()
    assert names(cache) == {"good"}
    logged = {(e["namespace"], e["pod"]): e["reason"] for e in json_logs(caplog, "invalid pod skipped")}
    assert "DNS-1123" in logged[("default", "Bad_Name")]
    assert "more than 256" in logged[("default", "noisy")]
    assert cache.skipped_invalid == 2

    # A cached pod that turns invalid leaves the cache rather than staying stale.
    fake.modify("pods", "good", "default", lambda o: o["metadata"].update(annotations={"k": 5}))
    await eventually(lambda: names(cache) == set(), "the pod that turned invalid")
    assert ("default", "good") in {(e["namespace"], e["pod"]) for e in json_logs(caplog, "invalid pod skipped")}


async def test_size_cap_skips_new_pods_with_a_log_line(
    fake: FakeApiServer, make_cache: Callable[..., Awaitable[PodCache]], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="ascend_common.adapters.kube")
    for i in range(5):
        fake.add_pod(f"p{i}")
    cache = await make_cache(max_pods=3)
    assert len(cache) == 3 and cache.skipped_over_cap == 2
    assert json_logs(caplog, "pod cache full, pods skipped")[0]["skipped"] == 2
    fake.add_pod("p9")
    await eventually(lambda: cache.skipped_over_cap == 3, "the watched pod beyond the cap")
    assert len(cache) == 3
    assert json_logs(caplog, "pod cache full, pod skipped")[0]["pod"] == "p9"
    # Updates of pods already cached still land.
    kept = sorted(names(cache))[0]
    fake.modify("pods", kept, "default", lambda o: o["metadata"]["annotations"].update(x="1"))
    await eventually(lambda: "x" in cache.get("default", kept).annotations, "update of a cached pod")  # type: ignore[union-attr]


async def test_lists_in_pages(fake: FakeApiServer, make_cache: Callable[..., Awaitable[PodCache]]) -> None:
    for i in range(7):
        fake.add_pod(f"p{i}")
    cache = await make_cache(page_size=3)
    assert len(cache) == 7
    pages = [r for r in fake.requests if r.path == "/api/v1/pods" and "watch" not in r.query]
    assert len(pages) == 3 and all(r.query["limit"] == "3" for r in pages)


async def test_relist_on_demand(fake: FakeApiServer, make_cache: Callable[..., Awaitable[PodCache]]) -> None:
    cache = await make_cache(watch_timeout_s=30)
    assert await cache.relist(timeout=5)
    assert cache.lists == 2


async def test_stop_ends_the_watch_promptly(fake: FakeApiServer, api: ApiClient) -> None:
    cache = PodCache(api, NODE, watch_timeout_s=30)
    await cache.start()
    assert await cache.wait_synced(5)
    await eventually(lambda: fake.live_watches == 1, "the watch is open")
    start = time.monotonic()
    await cache.stop()
    assert time.monotonic() - start < 3
    assert not [t for t in threading.enumerate() if t.name.startswith("pod-cache-")]


async def test_wait_synced_times_out_while_the_apiserver_is_down(fake: FakeApiServer, api: ApiClient) -> None:
    fake.set_down(True, "503")
    cache = PodCache(api, NODE, backoff_base_s=0.05, backoff_max_s=0.2)
    await cache.start()
    try:
        assert not await cache.wait_synced(0.3)
        assert not cache.synced and cache.pods() == []
        fake.set_down(False)
        assert await cache.wait_synced(5)
    finally:
        await cache.stop()


async def test_a_failing_callback_does_not_stop_the_cache(
    fake: FakeApiServer, make_cache: Callable[..., Awaitable[PodCache]]
) -> None:
    cache = await make_cache()
    seen: list[SlimPod] = []

    def broken(kind: str, pod: SlimPod) -> None:
        raise RuntimeError("boom")

    cache.on_change.extend([broken, lambda kind, pod: seen.append(pod)])
    fake.add_pod("a")
    fake.add_pod("b")
    await eventually(lambda: len(seen) == 2, "both events despite the broken callback")
