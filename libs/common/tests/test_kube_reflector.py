"""The one watch adapter (watch.Reflector, under PodCache and WatchedObject) against the fake
kube-apiserver: the timeout it asks for, bookmarks, resuming without a list, one list after a 410,
backoff after early ends and failures, Retry-After on 429."""

from __future__ import annotations

import asyncio
import itertools
import json
import logging
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
from ascend_common.adapters.kube.client import ApiClient, core_v1
from ascend_common.adapters.kube.config import build_api_client
from ascend_common.adapters.kube.pod_watch import PodCache
from ascend_common.adapters.kube.watch import WatchedObject
from ascend_common.adapters.logs import JsonFormatter
from ascend_common.watching import WatchPolicy

from tests.support.fake_apiserver import FakeApiServer, RecordedRequest
from tests.support.waiting import WAIT_S, until

NODE = "node-a"
NS, NAME = "kube-system", "mindx-dl-deviceinfo-node-a"
CM_PATH = f"/api/v1/namespaces/{NS}/configmaps"
FAST = {"backoff_base_s": 0.2, "backoff_max_s": 0.4}


def watches(fake: FakeApiServer, path: str) -> list[RecordedRequest]:
    return [r for r in list(fake.requests) if r.path == path and r.query.get("watch") == "true"]


def lists(fake: FakeApiServer, path: str) -> list[RecordedRequest]:
    return [r for r in list(fake.requests) if r.path == path and r.query.get("watch") != "true"]


def json_logs(caplog: pytest.LogCaptureFixture, event: str) -> list[dict[str, Any]]:
    fmt = JsonFormatter("test")
    return [e for e in (json.loads(fmt.format(r)) for r in caplog.records) if e["event"] == event]


@pytest.fixture
async def follow(api: ApiClient) -> AsyncIterator[Callable[..., WatchedObject]]:
    made: list[WatchedObject] = []

    def make(policy: WatchPolicy) -> WatchedObject:
        watched = WatchedObject("configmap", core_v1(api).list_namespaced_config_map, NS, name=NAME, policy=policy)
        watched.start()
        made.append(watched)
        return watched

    yield make
    for watched in made:
        await watched.stop()


async def test_watches_ask_for_five_to_ten_minutes_with_bookmarks(fake: FakeApiServer, api: ApiClient) -> None:
    cache = PodCache(api, NODE)
    await cache.start()
    try:
        assert await cache.wait_synced(WAIT_S)
        await until(lambda: len(watches(fake, "/api/v1/pods")) == 1, what="the watch")
    finally:
        await cache.stop()
    (watch,) = watches(fake, "/api/v1/pods")
    assert 300 <= int(watch.query["timeoutSeconds"]) <= 600
    assert watch.query["allowWatchBookmarks"] == "true"
    assert watch.query["fieldSelector"] == f"spec.nodeName={NODE}"
    assert watch.query["resourceVersion"] == cache.resource_version == str(fake.resource_version), "from the list's"


async def test_each_watch_draws_its_timeout_from_the_range(api: ApiClient, fake: FakeApiServer) -> None:
    """A fleet's watches must not end together: each watch draws its own (watching.watch_timeout_s)."""
    cache = PodCache(api, NODE, policy=WatchPolicy(min_timeout_s=1, max_timeout_s=2, **FAST))
    draws = iter([0.0, 0.5, 0.99, 0.5, 0.0])  # a timeout, then a backoff jitter after each watch
    cache._reflector._rand = lambda: next(draws, 0.5)
    await cache.start()
    try:
        await until(lambda: len(watches(fake, "/api/v1/pods")) >= 3, 15, "three watches")
    finally:
        await cache.stop()
    assert [w.query["timeoutSeconds"] for w in watches(fake, "/api/v1/pods")[:3]] == ["1", "2", "1"]


async def test_a_normal_end_resumes_from_the_last_version_without_a_list(
    fake: FakeApiServer, follow: Callable[..., WatchedObject]
) -> None:
    fake.add_configmap(NAME, NS, {"a": "1"})
    watched = follow(WatchPolicy.fixed(1, **FAST))
    assert await watched.wait_synced(WAIT_S)
    fake.modify("configmaps", NAME, NS, lambda o: o["data"].update(a="2"))
    await until(lambda: watched.object is not None and watched.object["data"] == {"a": "2"}, what="the change")
    seen = fake.resource_version
    await until(lambda: len(watches(fake, CM_PATH)) >= 3, WAIT_S, "three watches, each ended by its 1 s timeout")
    assert len(lists(fake, CM_PATH)) == 1 and watched.reflector.lists == 1, "resumed, never listed again"
    assert all(w.query["fieldSelector"] == f"metadata.name={NAME}" for w in watches(fake, CM_PATH))
    assert watches(fake, CM_PATH)[-1].query["resourceVersion"] == str(seen)
    assert watched.version == 2  # the list, then the change: nothing twice


async def test_bookmarks_keep_the_resource_version_fresh() -> None:
    """Another object's writes move the server's resourceVersion on; a bookmark hands it to the watcher,
    so that it resumes from there (and a 410 after a compaction does not find it behind)."""
    with FakeApiServer(bookmark_interval_s=0.3) as fake:
        api = await build_api_client(url=fake.url)
        try:
            fake.add_configmap(NAME, NS, {"a": "1"})
            watched = WatchedObject("configmap", core_v1(api).list_namespaced_config_map, NS, name=NAME,
                                    policy=WatchPolicy.fixed(3, **FAST))  # fmt: skip
            watched.start()
            try:
                assert await watched.wait_synced(WAIT_S)
                first = watched.reflector.resource_version
                fake.add_configmap("someone-else", NS, {})
                fake.add_node("n1")
                await until(lambda: watched.reflector.resource_version == str(fake.resource_version), what="bookmark")
                assert watched.reflector.resource_version != first and watched.version == 1
                fake.compact(expire_live_watches=False)
                await until(lambda: len(watches(fake, CM_PATH)) >= 2, 10, "a second watch")
                assert watched.reflector.lists == 1, "resumed from the bookmark's version: no 410, no list"
            finally:
                await watched.stop()
        finally:
            await api.close()  # type: ignore[no-untyped-call]


async def test_one_paged_list_after_a_410(
    fake: FakeApiServer, api: ApiClient, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="ascend_common.adapters.kube")
    for i in range(5):
        fake.add_pod(f"p{i}")
    cache = PodCache(api, NODE, page_size=2, policy=WatchPolicy.fixed(30, **FAST))
    await cache.start()
    try:
        assert await cache.wait_synced(WAIT_S)
        await until(lambda: fake.live_watches == 1, what="the watch")
        assert len(lists(fake, "/api/v1/pods")) == 3  # 5 pods in pages of 2
        fake.compact()
        await until(lambda: cache.lists == 2 and fake.live_watches == 1, what="one list and a new watch")
        await asyncio.sleep(0.5)
        assert cache.lists == 2 and len(lists(fake, "/api/v1/pods")) == 6, "one list, in its 3 pages"
        assert [e["status"] for e in json_logs(caplog, "pod watch failed, re-listing")] == [410]
    finally:
        await cache.stop()


async def test_the_list_after_an_outage_waits_a_draw_from_the_spread(
    fake: FakeApiServer, follow: Callable[..., WatchedObject]
) -> None:
    """A server back from an outage answers every resume with a 410 (a restarted kube-apiserver's
    watch cache starts at etcd's revision): that list waits a draw from the relist spread, so a
    fleet does not list together; one list still."""
    fake.add_configmap(NAME, NS, {"a": "1"})
    watched = follow(WatchPolicy(30, 30, backoff_base_s=0.05, backoff_max_s=3.0, relist_spread_s=2.0))
    watched.reflector._rand = lambda: 0.9  # the draw: 1.8 s of the 2 s spread
    assert await watched.wait_synced(WAIT_S)
    await until(lambda: fake.live_watches == 1, what="the watch")
    fake.set_down(True, "503")
    await until(lambda: any(w.status == 503 for w in watches(fake, CM_PATH)), what="a watch refused while down")
    fake.modify("configmaps", NAME, NS, lambda o: o["data"].update(a="2"))  # written while the watch was away ...
    fake.compact()  # ... and the new server's window starts after it
    fake.set_down(False)
    await until(lambda: watched.reflector.lists == 2 and fake.live_watches == 1, 10, "the list and a new watch")
    assert watched.object is not None and watched.object["data"] == {"a": "2"}
    relisted = lists(fake, CM_PATH)[-1]
    gone = [w for w in watches(fake, CM_PATH) if w.at < relisted.at][-1]  # its 410 is an ERROR event
    assert gone.status == 200 and relisted.at - gone.at >= 1.8, "the list waited its draw from the spread"
    assert len(lists(fake, CM_PATH)) == 2, "one list after the outage"


async def test_an_early_end_with_nothing_said_is_backed_off(
    fake: FakeApiServer, follow: Callable[..., WatchedObject], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="ascend_common.adapters.kube")
    fake.add_configmap(NAME, NS, {"a": "1"})
    fake.cut_watches_after_s = 0.02  # a proxy cuts every watch at once, with nothing said
    watched = follow(WatchPolicy(min_timeout_s=300, max_timeout_s=600, backoff_base_s=0.2, backoff_max_s=0.8))
    assert await watched.wait_synced(WAIT_S)
    await asyncio.sleep(2.0)
    cut = watches(fake, CM_PATH)
    # Retried at once, it would have opened a hundred; backed off (0.1-0.2, 0.2-0.4, 0.4-0.8, then
    # 0.4-0.8 s each), a handful.
    assert 3 <= len(cut) <= 8, len(cut)
    gaps = [b.at - a.at for a, b in itertools.pairwise(cut)]
    assert all(gap >= 0.1 for gap in gaps), gaps
    assert len(lists(fake, CM_PATH)) == 1, "an early end resumes from the same version: no list"
    ended = json_logs(caplog, "configmap watch ended early")
    assert [e["failures"] for e in ended[:3]] == [1, 2, 3]
    # A watch that runs its course again resets the backoff.
    fake.cut_watches_after_s = None
    await until(lambda: fake.live_watches == 1, 5, "a watch that stays open")


async def test_a_failed_watch_is_backed_off_and_resumed(
    fake: FakeApiServer, follow: Callable[..., WatchedObject], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="ascend_common.adapters.kube")
    fake.add_configmap(NAME, NS, {"a": "1"})
    watched = follow(WatchPolicy.fixed(1, **FAST))
    assert await watched.wait_synced(WAIT_S)
    await until(lambda: fake.live_watches == 1, what="the first watch")
    fake.fail_next(3, 500, CM_PATH, "GET")  # the watches after the first one's 1 s
    await until(lambda: any(w.status == 500 for w in watches(fake, CM_PATH)), what="a failed watch")
    fake.modify("configmaps", NAME, NS, lambda o: o["data"].update(a="2"))
    await until(lambda: watched.object is not None and watched.object["data"] == {"a": "2"}, what="the change")
    cm_watches = watches(fake, CM_PATH)
    assert [w.status for w in cm_watches[1:5]] == [500, 500, 500, 200]
    gaps = [b.at - a.at for a, b in itertools.pairwise(cm_watches[1:5])]
    assert all(gap >= 0.1 for gap in gaps), gaps  # backoff 0.1-0.2, 0.2-0.4, 0.2-0.4 s
    assert len(lists(fake, CM_PATH)) == 1, "the version was still good: resumed, not listed"
    assert [e["failures"] for e in json_logs(caplog, "configmap watch failed, resuming")] == [1, 2, 3]
    assert not json_logs(caplog, "configmap watch ended early"), "a watch that ran its course is a healthy one"


async def test_retry_after_is_honoured_on_429(fake: FakeApiServer, follow: Callable[..., WatchedObject]) -> None:
    fake.add_configmap(NAME, NS, {"a": "1"})
    fake.fail_next(1, 429, CM_PATH, "GET", retry_after=1)  # the list is throttled
    watched = follow(WatchPolicy.fixed(30, backoff_base_s=0.02, backoff_max_s=0.04))
    await until(lambda: fake.live_watches == 1, WAIT_S, "the watch, after the throttled list")
    first, second = lists(fake, CM_PATH)
    assert first.status == 429 and second.at - first.at >= 1.0, "the list waited out its Retry-After"
    assert watched.synced
    # The watch is throttled now: it waits its Retry-After (not its 20-40 ms backoff) and resumes.
    fake.fail_next(1, 429, CM_PATH, "GET", retry_after=2)
    fake.set_down(True, "503")  # ends the live watch ...
    fake.set_down(False)  # ... and the next one meets the 429
    await until(lambda: len(watches(fake, CM_PATH)) == 3, 10, "the watch after the Retry-After")
    throttled, resumed = watches(fake, CM_PATH)[1:]
    assert throttled.status == 429 and resumed.at - throttled.at >= 2.0
    assert len(lists(fake, CM_PATH)) == 2, "a throttled watch resumes: no list"


async def test_a_watched_object_follows_changes_and_deletion(
    fake: FakeApiServer, follow: Callable[..., WatchedObject]
) -> None:
    watched = follow(WatchPolicy.fixed(30, **FAST))
    assert await watched.wait_synced(WAIT_S)
    assert watched.object is None and watched.version == 0
    heard: list[int] = []
    watched.on_change.append(lambda: heard.append(watched.version))
    fake.add_configmap("other", NS, {})  # another name: not seen
    fake.add_configmap(NAME, NS, {"a": "1"})
    await until(lambda: watched.object is not None, what="the object created")
    fake.remove("configmaps", NAME, NS)
    await until(lambda: watched.object is None, what="the object deleted")
    assert heard == [1, 2]
    # A list that finds the same state (after a 410) is no change.
    fake.add_configmap(NAME, NS, {"a": "1"})
    await until(lambda: watched.version == 3, what="created again")
    fake.compact()
    await until(lambda: watched.reflector.lists == 2, what="the list after the 410")
    assert watched.version == 3 and heard == [1, 2, 3]
