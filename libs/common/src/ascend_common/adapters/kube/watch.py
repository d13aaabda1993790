"""Watches through the asyncio client's own Watch (kubernetes.aio.watch), with raw JSON events.

The pod informer (pod_watch) follows a node's pods with them; `first_change` waits for the next
change of one object (the ConfigMaps). A watch is ended by cancelling the task that reads it:
the Watch then releases its response, and aiohttp drops a connection whose body was not read
to its end, so nothing is left streaming.
"""

# No `from __future__ import annotations`: Watch reads _RawList's return annotation at run time,
# and it must be typing.Any itself (see there).
from collections.abc import Awaitable, Callable
from types import TracebackType
from typing import Any, Self

import aiohttp
from kubernetes.aio.client.exceptions import ApiException
from kubernetes.aio.watch import Watch

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
