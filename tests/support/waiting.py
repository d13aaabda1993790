"""Waiting in tests: poll a condition until it holds (or fail saying what was awaited), and the
readiness check every service process shares."""

from __future__ import annotations

import asyncio
import subprocess
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


def ready(name: str, proc: subprocess.Popen[bytes], ops_url: str, log_path: Path) -> bool:
    """Whether a service process answers 200 on /readyz; raises (with its log) once it has exited."""
    if proc.poll() is not None:
        raise RuntimeError(f"{name} exited with {proc.returncode}: {log_path.read_text()[-3000:]}")
    try:
        return httpx.get(ops_url + "/readyz", timeout=1).status_code == 200
    except httpx.HTTPError:
        return False
