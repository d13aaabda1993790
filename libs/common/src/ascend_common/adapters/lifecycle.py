"""A service's life: the tasks it runs, when it is ready, how it stops and with what status.

One `Lifecycle` per service process. Its parts get a `TaskScope` of it (`lifecycle.scope(name)`)
through their constructors and start their tasks there:

- essential loops (`essential`): one that ends on its own (an exception nobody caught, or a
  return) would leave the service up but deaf - ingestion stopped, health frozen, no error
  anywhere - so its end is logged with the traceback and, while the service runs (`run`), the
  service stops with exit status 1, so that Kubernetes restarts it and the restart rebuilds a
  clean state. Outside a running service (a library user, a test) the end is only logged (and
  `exit_status` says 1).
- fire-and-forget work (`spawn`): kept referenced until it is done (the event loop itself keeps
  only a weak reference), its failure logged, cancelled and awaited when its scope stops.

`run` handles SIGINT/SIGTERM, runs the stop hooks in the reverse order of their registration
(what started last stops first), stops whatever tasks are left and returns the exit status.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import signal
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any

log = logging.getLogger(__name__)
STOP_TIMEOUT_S = 5.0
StopHook = Callable[[], Awaitable[None] | None]


class TaskScope:
    """The tasks of one part of a service, stopped together by `stop`."""

    def __init__(self, name: str, on_ended: Callable[[asyncio.Task[Any]], None]) -> None:
        self.name = name
        self._on_ended = on_ended
        self._tasks: set[asyncio.Task[Any]] = set()
        self._stopping = False

    def essential(self, coro: Coroutine[Any, Any, Any], name: str) -> asyncio.Task[Any]:
        """A loop the service cannot run without (see the module's docstring)."""
        task = self._start(coro, name)
        task.add_done_callback(self._essential_done)
        return task

    def spawn(self, coro: Coroutine[Any, Any, Any], name: str) -> asyncio.Task[Any]:
        """Work nobody waits for: kept until done, its failure logged, cancelled at stop."""
        task = self._start(coro, name)
        task.add_done_callback(_log_failure)
        return task

    def _start(self, coro: Coroutine[Any, Any, Any], name: str) -> asyncio.Task[Any]:
        task = asyncio.create_task(coro, name=name)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    def _essential_done(self, task: asyncio.Task[Any]) -> None:
        if task.cancelled():  # stopped on purpose
            return
        task.exception()  # retrieved, even when it is not reported: asyncio would warn of it
        if not self._stopping:
            self._on_ended(task)

    async def stop(self, timeout: float = STOP_TIMEOUT_S) -> None:  # noqa: ASYNC109 - bounds the wait for stragglers
        """Cancel every task of the scope and wait (at most `timeout`) for them to end."""
        self._stopping = True
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.wait(tasks, timeout=timeout)


class Lifecycle:
    def __init__(self) -> None:
        self._scopes: list[TaskScope] = []
        self._ended: list[str] = []
        self._hooks: list[StopHook] = []
        self._checks: list[Callable[[], str | None]] = []
        self._stop = asyncio.Event()
        self._running = False
        self._stopping = False

    # ---- tasks -------------------------------------------------------------------------------

    def scope(self, name: str) -> TaskScope:
        scope = TaskScope(name, self._essential_ended)
        self._scopes.append(scope)
        return scope

    def _essential_ended(self, task: asyncio.Task[Any]) -> None:
        if self._stopping:  # it ended because the service stops
            return
        exc = task.exception()
        log.error(
            "essential loop ended; stopping so that the service is restarted",
            extra={"task": task.get_name()},
            exc_info=(type(exc), exc, exc.__traceback__) if exc is not None else None,
        )
        self._ended.append(task.get_name())
        if self._running:
            self.stop()

    @property
    def exit_status(self) -> int:
        """1 when an essential loop ended (the service stopped because of it), else 0."""
        return 1 if self._ended else 0

    # ---- readiness -----------------------------------------------------------------------------

    def ready_when(self, check: Callable[[], str | None]) -> None:
        """A condition of readiness: `check` returns why the service is not ready, or None."""
        self._checks.append(check)

    def not_ready(self) -> str | None:
        """Why the service is not ready (the first check that says so), or None when it is."""
        for check in self._checks:
            reason = check()
            if reason is not None:
                return reason
        return None

    # ---- running and stopping ------------------------------------------------------------------

    def on_stop(self, hook: StopHook) -> None:
        """Run `hook` when the service stops: hooks run in the reverse order of registration."""
        self._hooks.append(hook)

    def stop(self) -> None:
        """Ask the running service to stop (what SIGINT and SIGTERM do)."""
        self._stop.set()

    async def run(self, start: Callable[[], Awaitable[None]]) -> int:
        """`start` the service, run it until it is asked to stop (a signal, an essential loop that
        ended), then stop it; returns the exit status. A failing `start` stops what it had started
        and raises."""
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, self.stop)
        self._running = True
        if self._ended:  # ended before the service ran
            self.stop()
        try:
            await start()
            await self._stop.wait()
        finally:
            self._running = False
            await self._shutdown()  # the signal handlers stay: a second signal while stopping changes nothing
        return self.exit_status

    async def _shutdown(self) -> None:
        self._stopping = True
        while self._hooks:
            hook = self._hooks.pop()
            try:
                result = hook()
                if inspect.isawaitable(result):
                    await result
            except Exception:  # the other parts must still stop
                log.exception("stop step failed", extra={"step": getattr(hook, "__qualname__", repr(hook))})
        for scope in self._scopes:
            await scope.stop()


def _log_failure(task: asyncio.Task[Any]) -> None:
    if not task.cancelled() and (exc := task.exception()) is not None:
        log.error(
            "background task failed",
            extra={"task": task.get_name(), "error": repr(exc)},
            exc_info=(type(exc), exc, exc.__traceback__),
        )


def run_service(main: Coroutine[Any, Any, int]) -> int:
    """`asyncio.run(main)`, its exit status; from the moment the loop has closed, SIGINT and SIGTERM
    are ignored. The loop's signal handlers go with the loop, and the interpreter's exit that follows
    (joining pool threads, atexit) takes a while: a second SIGTERM then (a kubelet's, a supervisor's)
    would kill with -15 a process that had stopped cleanly. A second signal changes nothing, to the
    last instant; SIGKILL still ends it."""
    try:
        return asyncio.run(main)
    finally:
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, signal.SIG_IGN)
