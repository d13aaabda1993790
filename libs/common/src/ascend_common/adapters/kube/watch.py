"""Watches through the asyncio client's own Watch (kubernetes.aio.watch), with raw JSON events.

`Reflector` is the one list+watch loop, run as client-go's reflector runs one (the rules are
`ascend_common.watching`): the pod informer (pod_watch) and `WatchedObject` (one object by name:
the device-info and policy ConfigMaps, the plugin's Node) follow with it. `first_change` waits
for the next change of one object. A watch is ended by cancelling the task that reads it: the
Watch then releases its response, and aiohttp drops a connection whose body was not read to its
end, so nothing is left streaming.
"""

# No `from __future__ import annotations`: Watch reads _RawList's return annotation at run time,
# and it must be typing.Any itself (see there).
import asyncio
import logging
import random
import time
from collections.abc import Awaitable, Callable, Mapping
from types import TracebackType
from typing import Any, Self

import aiohttp
from kubernetes.aio.client.exceptions import ApiException
from kubernetes.aio.watch import Watch

from ascend_common.adapters.kube.client import json_of, retry_after_s, status_of
from ascend_common.watching import Ending, WatchEnd, WatchPolicy, next_step, watch_timeout_s

log = logging.getLogger(__name__)

# BOOKMARK is the only other type: progress, not a change.
CHANGE_TYPES = frozenset({"ADDED", "MODIFIED", "DELETED"})
CONNECT_TIMEOUT_S = 5.0
ListCall = Callable[..., Awaitable[aiohttp.ClientResponse]]


class _RawList:
    """A CoreV1 list method as Watch.stream calls one: `watch` and `_preload_content` among its
    arguments, the (unread) response as its result.

    Its return annotation is Any and no docstring names a model, so Watch finds no type to turn
    the events' objects into (it skips Any): each event's "object" stays the dict parsed from its line.
    """

    def __init__(self, list_fn: ListCall) -> None:
        self._list = list_fn
        self.opened = False

    async def __call__(
        self, *args: Any, watch: bool, timeout_seconds: int, _preload_content: bool = False, **query: Any
    ) -> Any:
        # The read timeout outlasts the server-side one, so a server that silently stops
        # talking cannot hold the watch forever.
        bound = aiohttp.ClientTimeout(total=None, connect=CONNECT_TIMEOUT_S, sock_read=timeout_seconds + 5.0)
        query.update(watch="true" if watch else "false", timeoutSeconds=timeout_seconds)
        resp = await self._list(*args, query=query, timeout=bound)
        self.opened = True
        return resp


class _IdleWatches:
    """Closed Watch objects, for the next watch to reuse (Watch.stream starts one afresh).

    A Watch builds an ApiClient of its own, for the models it could turn events into (ours are
    left as dicts), and that ApiClient builds an SSL context: about 25 ms of CPU for each Watch,
    which the pod informer's re-watch every few seconds would spend on the event loop. A closed
    Watch holds no connection and no session, so any watch of any loop can take it.
    """

    def __init__(self) -> None:
        self._idle: list[Watch] = []

    def take(self) -> Watch:
        return self._idle.pop() if self._idle else Watch()  # type: ignore[no-untyped-call]

    def give(self, watch: Watch) -> None:
        self._idle.append(watch)


_IDLE = _IdleWatches()


class RawWatch:
    """The events of one watch request, made with a CoreV1 list method (`query`: its query
    parameters, fieldSelector, resourceVersion, allowWatchBookmarks ...), until the server ends
    it after `timeout_seconds`; use it as `async with RawWatch(...) as events: async for ...`.

    An ERROR event raises the client's ApiException with its status code (410: re-list; `opened`
    tells it from a refused request); a line that is not an event raises ValueError.
    """

    def __init__(self, list_fn: ListCall, *args: Any, timeout_seconds: int, **query: Any) -> None:
        self._raw = _RawList(list_fn)
        self._watch = _IDLE.take()
        # With `timeout_seconds` given, the Watch ends where the server ends the watch, and leaves a
        # 410 to us (without it, it would reconnect on its own and retry a 410 once).
        self._events = self._watch.stream(  # type: ignore[no-untyped-call]
            self._raw, *args, timeout_seconds=max(1, int(timeout_seconds)), **query
        )

    @property
    def opened(self) -> bool:
        """The request was answered 200: what fails from now on is the stream, not the request."""
        return self._raw.opened

    def __aiter__(self) -> Self:
        return self

    async def __anext__(self) -> dict[str, Any]:
        event = await self._events.__anext__()
        if not isinstance(event, dict) or not isinstance(event.get("type"), str):
            raise ValueError(f"not a watch event: {str(event)[:200]!r}")
        return event

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self._watch.close()  # type: ignore[no-untyped-call]
        _IDLE.give(self._watch)


async def first_change(list_fn: ListCall, *args: Any, timeout_seconds: int, **query: Any) -> None:
    """Open a watch with a CoreV1 list method and return at its first change (ADDED, MODIFIED,
    DELETED, or an ERROR event: the history it watched from is gone), or when the server ends it
    after `timeout_seconds`.

    Cancelling the caller ends the watch at once. Failing to open or read the watch raises.
    """
    async with RawWatch(list_fn, *args, timeout_seconds=timeout_seconds, **query) as events:
        try:
            async for event in events:
                if event["type"] in CHANGE_TYPES:
                    return
        except ApiException:
            if events.opened:
                return  # an ERROR event: the caller re-reads, as after any change
            raise


DEFAULT_POLICY = WatchPolicy()
OnEvent = Callable[[str, Mapping[str, Any]], None]


def _ending(exc: BaseException) -> Ending:
    status = status_of(exc)
    return Ending.GONE if status == 410 else Ending.THROTTLED if status == 429 else Ending.FAILED


class Reflector:
    """One list+watch, kept going for as long as its task runs (`run`), as client-go's reflector
    keeps one: `relist` lists (paged as the caller likes) and returns the list's resourceVersion;
    the watch follows from it with a server-side timeout of 5-10 minutes and bookmarks, and is
    resumed from the last resourceVersion it saw; what follows each end is `watching.next_step`.
    `on_event` hears each ADDED, MODIFIED and DELETED object (a raw dict) in order.

    `what` and `name` name its log lines ("<what> watch failed, re-listing", ...) and its watch
    task ("<what>-watch-<name>"); `query` is the watch's (fieldSelector, ...).
    """

    def __init__(
        self,
        what: str,
        list_fn: ListCall,
        *args: Any,
        name: str,
        relist: Callable[[], Awaitable[str]],
        on_event: OnEvent,
        policy: WatchPolicy = DEFAULT_POLICY,
        **query: Any,
    ) -> None:
        self.what = what
        self.name = name
        self.policy = policy
        self.resource_version = ""
        self.lists = 0  # lists that landed
        self.watches = 0  # watch requests made
        self._list_fn = list_fn
        self._args = args
        self._query = query
        self._relist = relist
        self._on_event = on_event
        self._list_wanted = False
        self._watching: asyncio.Task[tuple[WatchEnd, BaseException | None]] | None = None
        self._rand: Callable[[], float] = random.random
        self._messages = {key: f"{what} {text}" for key, text in _MESSAGES.items()}

    def list_again(self) -> None:
        """End the watch now and list: for a caller that needs a view newer than this call."""
        self._list_wanted = True
        if self._watching is not None:
            self._watching.cancel()

    async def run(self) -> None:
        failures = 0
        need_list = True
        while True:
            if need_list or self._list_wanted:  # a list_again() during a list asks for another
                self._list_wanted = False
                try:
                    self.resource_version = await self._relist()
                except asyncio.CancelledError:
                    raise
                except Exception as exc:
                    end = WatchEnd(_ending(exc), retry_after_s=retry_after_s(exc), listing=True)
                    step = next_step(end, failures, self.policy, self._rand())
                    failures = step.failures
                    self._log(logging.WARNING, "list_failed", exc, failures, step.delay_s)
                    await asyncio.sleep(step.delay_s)
                    continue
                self.lists += 1
                need_list = False
                continue
            timeout = watch_timeout_s(self.policy, self._rand())
            self._watching = asyncio.create_task(self._watch(timeout), name=f"{self.what}-watch-{self.name}")
            try:
                end, error = await self._watching
            except asyncio.CancelledError:
                current = asyncio.current_task()
                if current is not None and current.cancelling():
                    raise  # this task itself is cancelled: stop
                need_list = True  # list_again() ended the watch
                continue
            finally:
                self._watching = None
            step = next_step(end, failures, self.policy, self._rand())
            self._after_watch(end, error, failures, step.relist, step.delay_s)
            failures, need_list = step.failures, step.relist
            if step.delay_s:
                await asyncio.sleep(step.delay_s)

    def _after_watch(
        self, end: WatchEnd, error: BaseException | None, failures: int, relist: bool, delay: float
    ) -> None:
        if end.ending is Ending.CLOSED:
            if delay:  # ended early with nothing said: a proxy or a sick server
                self._log(logging.INFO, "ended_early", None, failures + 1, delay)
            return
        routine = (end.ending is Ending.GONE and failures == 0) or end.ending is Ending.THROTTLED
        level = logging.INFO if routine else logging.WARNING
        self._log(level, "relisting" if relist else "resuming", error, failures + 1, delay, end)

    def _log(
        self, level: int, key: str, exc: BaseException | None, failures: int, delay: float, end: WatchEnd | None = None
    ) -> None:
        extra: dict[str, Any] = {"watch": self.name, "failures": failures, "delay_s": round(delay, 3)}
        if exc is not None:
            extra.update(status=status_of(exc), error=f"{type(exc).__name__}: {exc}"[:300])
        if end is not None:
            extra.update(lasted_s=round(end.lasted_s, 3), said=end.said)
        log.log(level, self._messages[key], extra=extra)

    async def _watch(self, timeout_s: int) -> tuple[WatchEnd, BaseException | None]:
        said = 0
        started = time.monotonic()
        self.watches += 1
        watch = RawWatch(
            self._list_fn, *self._args, timeout_seconds=timeout_s,
            resourceVersion=self.resource_version or None, allowWatchBookmarks="true", **self._query,
        )  # fmt: skip
        try:
            async with watch as events:
                async for event in events:
                    said += 1
                    self._take(event)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            return WatchEnd(_ending(exc), said, time.monotonic() - started, timeout_s, retry_after_s(exc)), exc
        return WatchEnd(Ending.CLOSED, said, time.monotonic() - started, timeout_s), None

    def _take(self, event: Mapping[str, Any]) -> None:
        kind = event["type"]
        obj = event.get("object")
        meta = obj.get("metadata") if isinstance(obj, Mapping) else None
        if isinstance(meta, Mapping) and isinstance(meta.get("resourceVersion"), str):
            self.resource_version = meta["resourceVersion"]  # a bookmark's too: resume from there
        if kind == "BOOKMARK" or not isinstance(obj, Mapping):
            return
        if kind not in CHANGE_TYPES:
            log.warning("unknown watch event type", extra={"watch": self.name, "type": str(kind)[:40]})
            return
        try:
            self._on_event(kind, obj)
        except Exception:  # one bad event must not end the watch (and be met again on resuming)
            log.exception("watch event not applied", extra={"watch": self.name, "type": kind})


_MESSAGES = {
    "relisting": "watch failed, re-listing",
    "resuming": "watch failed, resuming",
    "ended_early": "watch ended early",
    "list_failed": "list failed",
}


class WatchedObject:
    """One object by name, kept current by a Reflector: list+watch with fieldSelector
    metadata.name=<name>, as client-go follows a single object (RBAC authorizes such a list or
    watch as a request for that name). Nothing is read on a timer: the watch says when it changes.

    `object` is its last state (None: it does not exist), `version` counts the changes seen (a
    re-list that finds the same resourceVersion is none), `on_change` callbacks hear each one.
    """

    def __init__(
        self,
        what: str,
        list_fn: ListCall,
        *args: Any,
        name: str,
        policy: WatchPolicy = DEFAULT_POLICY,
        request_timeout_s: float = 30.0,
    ) -> None:
        self.name = name
        self.object: dict[str, Any] | None = None
        self.version = 0
        self.on_change: list[Callable[[], None]] = []
        self._list_fn = list_fn
        self._args = args
        self._selector = f"metadata.name={name}"
        self._request_timeout_s = request_timeout_s
        self._synced = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self.reflector = Reflector(
            what, list_fn, *args, name=name, relist=self._list, on_event=self._event, policy=policy,
            fieldSelector=self._selector,
        )  # fmt: skip

    @property
    def synced(self) -> bool:
        """The first list has landed: `object` says what the server holds (as of the watch)."""
        return self._synced.is_set()

    async def wait_synced(self, timeout: float) -> bool:  # noqa: ASYNC109 - a bounded wait is the API
        try:
            await asyncio.wait_for(self._synced.wait(), timeout)
        except TimeoutError:
            return False
        return True

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.create_task(self.reflector.run(), name=f"{self.reflector.what}-follow-{self.name}")

    async def stop(self) -> None:
        task, self._task = self._task, None
        if task is None:
            return
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)

    async def _list(self) -> str:
        query = {"fieldSelector": self._selector}
        page = await json_of(await self._list_fn(*self._args, query=query, timeout=self._request_timeout_s))
        items = page.get("items") or [] if isinstance(page, dict) else []
        self._set(items[0] if items and isinstance(items[0], dict) else None)
        self._synced.set()
        return str(((page or {}).get("metadata") or {}).get("resourceVersion") or "")

    def _event(self, kind: str, obj: Mapping[str, Any]) -> None:
        self._set(None if kind == "DELETED" else dict(obj))

    def _set(self, obj: dict[str, Any] | None) -> None:
        if _rv(obj) == _rv(self.object) and (obj is None) == (self.object is None):
            return
        self.object = obj
        self.version += 1
        for callback in list(self.on_change):
            try:
                callback()
            except Exception:
                log.exception("watched object callback failed", extra={"watch": self.name})


def _rv(obj: Mapping[str, Any] | None) -> str:
    meta = obj.get("metadata") if obj is not None else None
    return str(meta.get("resourceVersion") or "") if isinstance(meta, Mapping) else ""
