"""Run blocking library calls in a small thread pool, each with a timeout.

A call that does not return in time is abandoned in its thread (Python cannot interrupt a C
call) and its key (a chip) is marked hung: further calls for that key fail fast with
CallTimeout until the abandoned call returns, so a hung chip costs at most one thread and
never blocks the other chips. No lock is held while a call runs.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Callable, Hashable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TypeVar

from dcmi_exporter.backends.errors import CallTimeout

T = TypeVar("T")
log = logging.getLogger(__name__)


class CallGuard:
    def __init__(self, keys: int, spare_workers: int = 4, timeout_s: float = 2.0) -> None:
        # One abandoned call per key at most, so `keys + spare` workers always leave
        # `spare` threads for the chips that answer.
        self._pool = ThreadPoolExecutor(max_workers=keys + spare_workers, thread_name_prefix="dcmi-call")
        self._timeout = timeout_s
        self._hung: dict[Hashable, Future[object]] = {}
        self._mutex = threading.Lock()  # guards _hung only; never held across a call

    @property
    def timeout_s(self) -> float:
        return self._timeout

    def hung_keys(self) -> set[Hashable]:
        with self._mutex:
            return set(self._hung)

    def is_hung(self, key: Hashable) -> bool:
        with self._mutex:
            return key in self._hung

    async def call(self, key: Hashable, fn: Callable[[], T], timeout_s: float | None = None) -> T:
        """Run `fn` in the pool; raise CallTimeout if it takes longer than the timeout."""
        with self._mutex:
            if key in self._hung:
                raise CallTimeout(f"{key}", message=f"an earlier call for {key} has not returned")
        fut: Future[T] = self._pool.submit(fn)
        try:
            # asyncio.timeout, not wait_for: 3.11's wait_for can swallow a cancellation.
            async with asyncio.timeout(timeout_s or self._timeout):
                return await asyncio.wrap_future(fut)
        except TimeoutError:
            self._mark_hung(key, fut)
            raise CallTimeout(
                f"{key}", message=f"call for {key} timed out after {timeout_s or self._timeout}s"
            ) from None

    def _mark_hung(self, key: Hashable, fut: Future[T]) -> None:
        with self._mutex:
            self._hung[key] = fut  # type: ignore[assignment]
        log.warning("library call abandoned", extra={"key": str(key)})

        def _returned(_: Future[T]) -> None:
            with self._mutex:
                if self._hung.get(key) is fut:
                    del self._hung[key]
            log.info("abandoned library call returned", extra={"key": str(key)})

        fut.add_done_callback(_returned)

    def shutdown(self) -> None:
        # Do not wait: an abandoned call may never return.
        self._pool.shutdown(wait=False, cancel_futures=True)
