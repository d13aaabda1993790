"""The one async door to the store: every call from the event loop into SQLite crosses here.

The repositories are synchronous: SQLite blocks (a write waits up to the busy timeout for another
process's lock, a history page reads the disk). `in_store_thread(fn, *args)` runs `fn`, a
repository method or a function made of several of their calls, on a worker thread and awaits it.
Each repository call keeps its own transaction (`Database.read` / `Database.write`: BEGIN IMMEDIATE,
the write lock, errors as `StoreError`), exactly as when called directly; the caller's context
variables go along (asyncio.to_thread), so logs keep their fields. No other module of the
fault-manager hops into a thread for the store (services/fault-manager/tests/test_store_door.py).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import ParamSpec, TypeVar

_P = ParamSpec("_P")
_T = TypeVar("_T")


async def in_store_thread(fn: Callable[_P, _T], /, *args: _P.args, **kwargs: _P.kwargs) -> _T:
    """`fn(*args, **kwargs)` on a worker thread; its result, or its exception, here."""
    return await asyncio.to_thread(fn, *args, **kwargs)
