"""Waiting in tests: poll a condition until it holds (or fail saying what was awaited), and the
readiness check every service process shares."""

from __future__ import annotations

import asyncio
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx


async def until(
    check: Callable[[], Any], timeout: float = 5.0, what: str = "the condition", interval: float = 0.05
) -> Any:
    """Poll `check` (sync, or returning an awaitable) until its value is truthy; return that value."""
    try:
        async with asyncio.timeout(timeout):
            while True:
                value = check()
                if asyncio.iscoroutine(value) or isinstance(value, asyncio.Future):
                    value = await value
                if value:
                    return value
                await asyncio.sleep(interval)
    except TimeoutError:
        raise AssertionError(f"timed out after {timeout}s waiting for {what}") from None


def poll(check: Callable[[], Any], timeout: float, what: str, interval: float = 0.2) -> Any:
    """`until` for synchronous callers (the cluster tier drives kubectl): the truthy value of
    `check`, or an AssertionError naming what was awaited and the last value seen."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what} (last: {value!r})")
        time.sleep(interval)


def ready(name: str, proc: subprocess.Popen[bytes], ops_url: str, log_path: Path) -> bool:
    """Whether a service process answers 200 on /readyz; raises (with its log) once it has exited."""
    if proc.poll() is not None:
        raise RuntimeError(f"{name} exited with {proc.returncode}: {log_path.read_text()[-3000:]}")
    try:
        return httpx.get(ops_url + "/readyz", timeout=1).status_code == 200
    except httpx.HTTPError:
        return False
