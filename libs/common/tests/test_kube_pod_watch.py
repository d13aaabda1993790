"""The node's PodCache (the pod informer), against the fake kube-apiserver."""

from __future__ import annotations

import asyncio
import json
import logging
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest
from ascend_common.adapters.kube.client import ApiClient, core_v1, json_of
from ascend_common.adapters.kube.pod_watch import PodCache
from ascend_common.adapters.logs import JsonFormatter
from ascend_common.pods import SlimPod

from tests.support.fake_apiserver import FakeApiServer
from tests.support.waiting import WAIT_S, until

NODE = "node-a"
NPU = "huawei.com/Ascend910"


def pod_cache_tasks() -> list[str]:
    return [t.get_name() for t in asyncio.all_tasks() if t.get_name().startswith(("pod-cache-", "pod-watch-"))]


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
    leftovers = pod_cache_tasks()
    assert not leftovers, f"pod cache tasks still running: {leftovers}"


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
    await until(lambda: len(changes) == 3, what="three watch events")
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
    await until(lambda: names(cache) == {"mine", "mine-too"}, what="the new pod of this node")
    assert {r.query.get("fieldSelector") for r in fake.requests if r.path == "/api/v1/pods"} == {
        f"spec.nodeName={NODE}"
    }
    # A pod rescheduled away from the node leaves the cache.
    fake.modify("pods", "mine", "default", lambda o: o["spec"].update(nodeName="node-b"))
    await until(lambda: names(cache) == {"mine-too"}, what="the pod that left")


async def test_deleting_flag_then_removal(
    fake: FakeApiServer, api: ApiClient, make_cache: Callable[..., Awaitable[PodCache]]
) -> None:
    fake.add_pod("p")
    cache = await make_cache()
    await json_of(await core_v1(api).request("DELETE", "/api/v1/namespaces/default/pods/p"))
    await until(lambda: (p := cache.get("default", "p")) is not None and p.deleting, what="deletionTimestamp")
    fake.remove("pods", "p", "default")
    await until(lambda: cache.get("default", "p") is None, what="removal")


async def test_relists_after_410(
    fake: FakeApiServer, make_cache: Callable[..., Awaitable[PodCache]], caplog: pytest.LogCaptureFixture
) -> None:
    fake.add_pod("a")
    cache = await make_cache(watch_timeout_s=30)
    caplog.set_level(logging.INFO, logger="ascend_common.adapters.kube")
    changes: list[tuple[str, str]] = []
    cache.on_change.append(lambda kind, pod: changes.append((kind, pod.name)))
    await until(lambda: fake.live_watches == 1, what="the watch is open")
    fake.compact()  # the live watch gets an ERROR 410
    await until(lambda: cache.lists == 2, what="a re-list after the 410")
    assert any(entry["status"] == 410 for entry in json_logs(caplog, "pod watch failed, re-listing"))
    assert changes == [], "a re-list that finds nothing new reports nothing"
    fake.add_pod("b")
    await until(lambda: names(cache) == {"a", "b"}, what="the watch resumed after the re-list")


async def test_relists_when_rewatching_from_a_version_the_history_lost(
    fake: FakeApiServer, make_cache: Callable[..., Awaitable[PodCache]], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="ascend_common.adapters.kube")
    fake.add_pod("a")
    cache = await make_cache(watch_timeout_s=1)
    await until(lambda: fake.live_watches == 1, what="the watch is open")
    fake.delay(0.5)  # holds the reconnect after the watch's timeout
    await until(lambda: fake.live_watches == 0, what="the watch ran its course")
    fake.add_pod("b")
    fake.compact(expire_live_watches=False)  # the cache's resourceVersion is now too old
    fake.delay(0)
    await until(lambda: names(cache) == {"a", "b"}, what="pod b through a re-list")
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
    await asyncio.sleep(0.5)  # the behaviour under test: a few failed attempts change nothing while it is down
    assert cache.synced and names(cache) == {"stays", "goes"}, "the last state is kept while the apiserver is away"
    fake.set_down(False)
    await until(lambda: names(cache) == {"stays", "new"}, what="the state after the outage")
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
    await until(lambda: names(cache) == set(), what="the pod that turned invalid")
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
    await until(lambda: cache.skipped_over_cap == 3, what="the watched pod beyond the cap")
    assert len(cache) == 3
    assert json_logs(caplog, "pod cache full, pod skipped")[0]["pod"] == "p9"
    # Updates of pods already cached still land.
    kept = sorted(names(cache))[0]
    fake.modify("pods", kept, "default", lambda o: o["metadata"]["annotations"].update(x="1"))
    await until(
        lambda: (pod := cache.get("default", kept)) is not None and "x" in pod.annotations,
        what="update of a cached pod",
    )


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


async def test_relist_serves_a_pod_created_just_before_it(fake: FakeApiServer, api: ApiClient) -> None:
    """Only a list that started after relist() was called answers it, so it brings every pod made before."""
    for i in range(3):
        fake.add_pod(f"p{i}")
    cache = PodCache(api, NODE, watch_timeout_s=30)
    await cache.start()
    try:
        assert await cache.wait_synced(5)
        assert len(cache) == 3
        fake.add_pod("p3")
        assert await cache.relist(timeout=5)
        assert names(cache) == {"p0", "p1", "p2", "p3"} and cache.lists == 2
    finally:
        await cache.stop()


async def test_stop_ends_the_watch_promptly(fake: FakeApiServer, api: ApiClient) -> None:
    cache = PodCache(api, NODE, watch_timeout_s=30)
    await cache.start()
    assert await cache.wait_synced(5)
    await until(lambda: fake.live_watches == 1, what="the watch is open")
    await asyncio.wait_for(cache.stop(), WAIT_S)  # far less than the watch's 30 s: its task is cancelled
    assert not pod_cache_tasks()
    # The fake's stream ends when a write fails, which it does once the client has closed the connection
    # (the first write after the close may still be accepted: each poll writes again).
    await until(
        lambda: fake.add_pod(f"p{uuid.uuid4().hex[:8]}") and fake.live_watches == 0,
        what="the watch's connection to close",
    )


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
    await until(lambda: len(seen) == 2, what="both events despite the broken callback")
