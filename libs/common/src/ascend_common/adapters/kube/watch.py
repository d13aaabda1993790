"""Watches: one watch request read as raw JSON events in a blocking thread, closable from any thread.

The pod informer (pod_watch) follows a node's pods with them; `first_change` waits for the next
change of one object (the ConfigMaps).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import threading
from collections.abc import Callable, Iterator
from typing import Any

from kubernetes import client as k8s

MAX_EVENT_BYTES = 16 * 1024 * 1024  # etcd caps an object at 1.5 MiB; anything far larger is garbage
# BOOKMARK is the only other type: progress, not a change.
CHANGE_TYPES = frozenset({"ADDED", "MODIFIED", "DELETED", "ERROR"})


class WatchStream:
    """The events of one watch request, read as raw JSON lines from a blocking thread.

    close() may be called from any thread: it shuts the socket down so that a read blocked in
    the watching thread returns at once (the client's own Watch.stop only sets a flag checked
    between events, and it turns ERROR events into exceptions while dropping the status).
    """

    def __init__(self, resp: Any) -> None:
        self._resp = resp
        self._lock = threading.Lock()
        self._closed = False

    def __iter__(self) -> Iterator[dict[str, Any]]:
        buffer = b""
        try:
            for chunk in self._resp.stream(amt=None, decode_content=True):
                buffer += chunk
                if len(buffer) > MAX_EVENT_BYTES:
                    raise ValueError(f"watch event larger than {MAX_EVENT_BYTES} bytes")
                *lines, buffer = buffer.split(b"\n")
                for line in lines:
                    if line.strip():
                        event = json.loads(line)
                        if not isinstance(event, dict):
                            raise ValueError("watch event is not a JSON object")
                        yield event
        finally:
            self.close()

    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
        # Already released or never connected: then nothing blocks on it.
        with contextlib.suppress(OSError, ValueError, RuntimeError, AttributeError):
            self._resp.shutdown()
        # Closed before release: the pool then drops the connection instead of reusing a half-read one.
        with contextlib.suppress(Exception):
            self._resp.close()
        with contextlib.suppress(Exception):
            self._resp.release_conn()


def open_watch(
    fn: Callable[..., Any], *args: Any, timeout_seconds: int, connect_timeout: float = 5.0, **kwargs: Any
) -> WatchStream:
    """Start a watch with a client list method (`watch=True`); the server ends it after `timeout_seconds`.

    The read timeout is a little longer than the server-side timeout, so a server that
    silently stops talking cannot hang the watching thread forever.
    """
    resp = fn(
        *args,
        watch=True,
        timeout_seconds=int(timeout_seconds),
        _preload_content=False,
        _request_timeout=(connect_timeout, float(timeout_seconds) + 5.0),
        **kwargs,
    )
    return WatchStream(resp)


def watch_error(obj: Any) -> Exception:
    """An ERROR watch event as a client ApiException carrying its status code (410: re-list)."""
    code = obj.get("code") if isinstance(obj, dict) else None
    message = obj.get("message") if isinstance(obj, dict) else None
    return k8s.ApiException(status=code if isinstance(code, int) else 500, reason=str(message or "watch error")[:300])


async def first_change(fn: Callable[..., Any], *args: Any, timeout_seconds: int, **kwargs: Any) -> None:
    """Open a watch with a client list method and return at its first change (ADDED, MODIFIED,
    DELETED or ERROR), or when the server ends it after `timeout_seconds`.

    The watch runs in a thread; cancelling the caller closes the stream, so the thread ends at once.
    Failing to open or read the watch raises.
    """
    holder: list[WatchStream] = []
    cancelled = threading.Event()

    def follow() -> None:
        stream = open_watch(fn, *args, timeout_seconds=timeout_seconds, **kwargs)
        holder.append(stream)
        if cancelled.is_set():  # cancelled while the watch was being opened
            stream.close()
            return
        for event in stream:
            if event.get("type") in CHANGE_TYPES:
                break
        stream.close()

    task = asyncio.ensure_future(asyncio.to_thread(follow))
    try:
        await task
    except asyncio.CancelledError:
        cancelled.set()
        for stream in holder:
            stream.close()
        raise
