"""Loops a service cannot run without.

A loop that ends on its own (an exception nobody caught, or a return) would leave the service
up but deaf: ingestion stopped, health frozen, no error anywhere. `essential` logs the end with
its traceback and, in a service that called `stop_service_when_one_ends`, stops the service
the normal way (SIGTERM to itself); `exit_status` then gives 1, so that Kubernetes restarts it
and the restart rebuilds a clean state. Elsewhere (a library user, a test) it only logs.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
from collections.abc import Coroutine
from typing import Any

log = logging.getLogger(__name__)
_ended: list[str] = []
_stop_service = False


def stop_service_when_one_ends() -> None:
    global _stop_service
    _stop_service = True


def essential(coro: Coroutine[Any, Any, Any], name: str) -> asyncio.Task[Any]:
    task = asyncio.create_task(coro, name=name)
    task.add_done_callback(_on_done)
    return task


def _on_done(task: asyncio.Task[Any]) -> None:
    if task.cancelled():
        return
    exc = task.exception()
    log.error(
        "essential loop ended; stopping so that the service is restarted",
        extra={"task": task.get_name()},
        exc_info=(type(exc), exc, exc.__traceback__) if exc is not None else None,
    )
    _ended.append(task.get_name())
    if _stop_service:
        os.kill(os.getpid(), signal.SIGTERM)


def exit_status() -> int:
    """1 when an essential loop ended (the service stopped because of it), else 0."""
    return 1 if _ended else 0
