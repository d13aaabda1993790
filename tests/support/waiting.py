"""Waiting in tests: the one poll every test and test double uses (`until`, and `until_sync` for
code that cannot await), and the readiness check every service process shares.

A test waits for a condition, never for a time: the bound only says when to give up, so it is
generous (a loaded CI machine is slow, a broken service never gets there), and the failure names
what was awaited and the last value seen."""

from __future__ import annotations

import asyncio
import inspect
import subprocess
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TypeVar, overload

import httpx

T = TypeVar("T")

WAIT_S = 10.0  # the default bound: far beyond what a healthy run needs
START_S = 30.0  # a service process's start: imports alone take seconds on a loaded machine


class WaitTimedOut(AssertionError, TimeoutError):
    """A wait gave up: a failed assertion to pytest, a TimeoutError to callers that bound an attempt."""


@overload
async def until(
    check: Callable[[], Awaitable[T | None]],
    timeout: float = ...,
    what: str | Callable[[], str] = ...,
    interval: float = ...,
) -> T: ...
@overload
async def until(
    check: Callable[[], T | None],
    timeout: float = ...,
    what: str | Callable[[], str] = ...,
    interval: float = ...,
) -> T: ...
async def until(
    check: Callable[[], object],
    timeout: float = WAIT_S,
    what: str | Callable[[], str] = "the condition",
    interval: float = 0.05,
) -> object:
    """Poll `check` (sync, or returning an awaitable) until its value is truthy; return that value.
    `what` names what is awaited (a callable is asked only on failure, for the state at that time)."""
    last: object = None
    try:
        async with asyncio.timeout(timeout):
            while True:
                value = check()
                if inspect.isawaitable(value):
                    value = await value
                if value:
                    return value
                last = value
                await asyncio.sleep(interval)
    except TimeoutError:
        described = what() if callable(what) else what
        raise WaitTimedOut(f"timed out after {timeout}s waiting for {described} (last: {last!r})") from None


def until_sync(
    check: Callable[[], T | None],
    timeout: float = WAIT_S,
    what: str | Callable[[], str] = "the condition",
    interval: float = 0.05,
) -> T:
    """`until` for code that cannot await (sync fixtures, kubectl drills, process start-up): it
    runs on a loop of its own in a worker thread, so it works whether or not the calling thread
    runs a loop (which it blocks meanwhile, as any synchronous call does)."""
    with ThreadPoolExecutor(1, thread_name_prefix="until") as pool:
        return pool.submit(asyncio.run, until(check, timeout, what, interval)).result()


def ready(name: str, proc: subprocess.Popen[bytes], ops_url: str, log_path: Path) -> bool:
    """Whether a service process answers 200 on /readyz; raises (with its log) once it has exited."""
    if proc.poll() is not None:
        raise RuntimeError(f"{name} exited with {proc.returncode}: {log_path.read_text()[-3000:]}")
    try:
        return httpx.get(ops_url + "/readyz", timeout=1).status_code == 200
    except httpx.HTTPError:
        return False
