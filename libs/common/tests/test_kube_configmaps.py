"""ConfigMaps through the apiserver: read, create and replace with optimistic concurrency, delete, and
the wait for one ConfigMap's next change (watch.first_change)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

import pytest
from ascend_common.adapters.kube import watch as watch_module
from ascend_common.adapters.kube.client import KubeRetriesExhausted
from ascend_common.adapters.kube.config import build_api_client
from ascend_common.adapters.kube.configmaps import ApiConfigMaps, ConfigMapState, Conflict, WatchUnavailable
from kubernetes.aio.watch import Watch

from tests.support.fake_apiserver import FakeApiServer
from tests.support.waiting import until

NS, NAME = "kube-system", "mindx-dl-deviceinfo-node-a"
WAIT_S = 10.0  # generous: the machine may be shared


@pytest.fixture
async def configmaps(fake: FakeApiServer) -> AsyncIterator[ApiConfigMaps]:
    api = await build_api_client(url=fake.url)
    yield ApiConfigMaps(api)
    await api.close()  # type: ignore[no-untyped-call]


async def test_read_create_replace_and_delete(fake: FakeApiServer, configmaps: ApiConfigMaps) -> None:
    assert await configmaps.get(NS, NAME) is None
    created = await configmaps.put(NS, NAME, {"a": "1"}, {"app": "x"}, None)
    assert await configmaps.get(NS, NAME) == ConfigMapState({"a": "1"}, {"app": "x"}, created)
    replaced = await configmaps.put(NS, NAME, {"a": "2"}, {"app": "x"}, created)
    assert replaced != created and fake.get_object("configmaps", NAME, NS)["data"] == {"a": "2"}  # type: ignore[index]
    with pytest.raises(Conflict):
        await configmaps.put(NS, NAME, {"a": "3"}, {}, None)  # it exists already
    with pytest.raises(Conflict):
        await configmaps.put(NS, NAME, {"a": "3"}, {}, created)  # a stale resourceVersion: 409
    await configmaps.delete(NS, NAME)
    await configmaps.delete(NS, NAME)  # gone already: not an error
    assert await configmaps.get(NS, NAME) is None


async def test_wait_change_returns_at_the_change(fake: FakeApiServer, configmaps: ApiConfigMaps) -> None:
    rv = await configmaps.put(NS, NAME, {"a": "1"}, {}, None)
    waiting = asyncio.create_task(configmaps.wait_change(NS, NAME, 60, rv))
    await until(lambda: fake.live_watches == 1, WAIT_S, "the watch to open")
    assert not waiting.done()
    fake.modify("configmaps", NAME, NS, lambda o: o["data"].update(a="2"))
    await asyncio.wait_for(waiting, WAIT_S)


async def test_wait_change_returns_when_the_server_ends_the_watch(
    fake: FakeApiServer, configmaps: ApiConfigMaps
) -> None:
    rv = await configmaps.put(NS, NAME, {"a": "1"}, {}, None)
    await asyncio.wait_for(configmaps.wait_change(NS, NAME, 1, rv), WAIT_S)
    assert fake.count("GET", f"/api/v1/namespaces/{NS}/configmaps", watch=True) == 1


async def test_cancelling_the_wait_closes_the_watch(fake: FakeApiServer, configmaps: ApiConfigMaps) -> None:
    rv = await configmaps.put(NS, NAME, {"a": "1"}, {}, None)
    waiting = asyncio.create_task(configmaps.wait_change(NS, NAME, 60, rv))
    await until(lambda: fake.live_watches == 1, WAIT_S, "the watch to open")
    waiting.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await waiting

    # The watch would run 60 s: the fake's stream ends when a write fails, which it does only because
    # cancelling closed the connection (the first write after the close may still be accepted: each
    # poll writes again).
    def changed_and_closed() -> bool:
        fake.modify("configmaps", NAME, NS, lambda o: o["data"].update(a=str(fake.resource_version)))
        return fake.live_watches == 0

    await until(changed_and_closed, WAIT_S, "the watch's connection to close")


async def test_a_refused_watch_is_watch_unavailable(fake: FakeApiServer, configmaps: ApiConfigMaps) -> None:
    fake.fail_next(1, 403, f"/api/v1/namespaces/{NS}/configmaps", "GET")
    with pytest.raises(WatchUnavailable):
        await asyncio.wait_for(configmaps.wait_change(NS, NAME, 5, None), WAIT_S)


async def test_a_closed_watch_is_reused(
    fake: FakeApiServer, configmaps: ApiConfigMaps, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Building a kubernetes.aio Watch costs ~25 ms of CPU (its own ApiClient's SSL context): one that
    ended is taken again rather than built anew for every wait."""
    built: list[object] = []

    class Counted(Watch):
        def __init__(self) -> None:
            super().__init__()  # type: ignore[no-untyped-call]
            built.append(self)

    monkeypatch.setattr(watch_module, "Watch", Counted)
    monkeypatch.setattr(watch_module, "_IDLE", watch_module._IdleWatches())
    rv = await configmaps.put(NS, NAME, {"a": "1"}, {}, None)
    for _ in range(3):
        await asyncio.wait_for(configmaps.wait_change(NS, NAME, 1, rv), WAIT_S)
    assert fake.count("GET", f"/api/v1/namespaces/{NS}/configmaps", watch=True) == 3
    assert len(built) == 1


async def test_transient_failures_are_retried_and_a_conflict_is_not(fake: FakeApiServer) -> None:
    """A read or write meets 429 (after its Retry-After) and 5xx again, a few times; a 409 on a write is a
    Conflict at once, for the caller to re-read."""
    api = await build_api_client(url=fake.url)
    try:
        configmaps = ApiConfigMaps(api, base_delay=0.01, max_delay=0.05)
        rv = await configmaps.put(NS, NAME, {"a": "1"}, {}, None)
        path = f"/api/v1/namespaces/{NS}/configmaps/{NAME}"
        fake.fail_next(1, 429, path, "GET", retry_after=0)
        fake.fail_next(2, 500, path, "GET")
        state = await configmaps.get(NS, NAME)
        assert state is not None and state.resource_version == rv
        assert fake.count("GET", path) == 4
        fake.fail_next(1, 503, path, "PUT")
        rv = await configmaps.put(NS, NAME, {"a": "2"}, {}, rv)
        assert fake.count("PUT", path) == 2
        fake.fail_next(5, 409, path, "PUT")
        with pytest.raises(Conflict):
            await configmaps.put(NS, NAME, {"a": "3"}, {}, rv)
        assert fake.count("PUT", path) == 3  # the 409 was not tried again
        fake.fail_next(10, 500, path, "GET")
        with pytest.raises(KubeRetriesExhausted):
            await configmaps.get(NS, NAME)
        assert fake.count("GET", path) == 4 + 4  # bounded: the first try and three more
    finally:
        await api.close()  # type: ignore[no-untyped-call]
