"""The lifecycle kit: a loop a service cannot run without ends (logged, the exit status says so, a
running service stops), background work is kept and stopped, signals and stop hooks, readiness."""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from ascend_common.adapters.lifecycle import Lifecycle


async def crashes() -> None:
    await asyncio.sleep(0)
    raise KeyError("chip 7")


async def returns() -> None:
    await asyncio.sleep(0)


async def runs_forever() -> None:
    await asyncio.Event().wait()


@pytest.mark.parametrize(("loop", "logged"), [(crashes, "KeyError: 'chip 7'"), (returns, "")])
async def test_an_ended_loop_is_logged_and_fails_the_exit_status(
    loop: object, logged: str, caplog: pytest.LogCaptureFixture
) -> None:
    kit = Lifecycle()  # not running a service: the end is only logged
    assert kit.exit_status == 0
    task = kit.scope("ingest").essential(loop(), "ingest")  # type: ignore[operator]
    await asyncio.wait([task])
    await asyncio.sleep(0)  # done callbacks run on the next turn
    [record] = [r for r in caplog.records if r.levelno == logging.ERROR]
    assert record.task == "ingest"  # type: ignore[attr-defined]
    assert logged in (caplog.text if logged else "")
    assert kit.exit_status == 1


async def test_a_cancelled_loop_is_a_normal_stop() -> None:
    kit = Lifecycle()
    task = kit.scope("ingest").essential(runs_forever(), "ingest")
    await asyncio.sleep(0)
    task.cancel()
    await asyncio.wait([task])
    await asyncio.sleep(0)
    assert kit.exit_status == 0


async def test_a_running_service_stops_with_status_1_when_an_essential_loop_ends() -> None:
    kit = Lifecycle()
    scope = kit.scope("ingest")
    stopped: list[str] = []
    other = scope.essential(runs_forever(), "other")

    async def start() -> None:
        kit.on_stop(lambda: stopped.append("first registered"))
        kit.on_stop(lambda: stopped.append("last registered"))
        scope.essential(crashes(), "ingest")

    async with asyncio.timeout(5):
        assert await kit.run(start) == 1
    assert stopped == ["last registered", "first registered"], "hooks run in reverse order"
    assert other.cancelled(), "the tasks left are stopped"


async def test_sigterm_stops_a_running_service_with_status_0(caplog: pytest.LogCaptureFixture) -> None:
    kit = Lifecycle()
    scope = kit.scope("parts")
    loop_task = scope.essential(runs_forever(), "loop")

    async def start() -> None:
        asyncio.get_running_loop().call_soon(os.kill, os.getpid(), signal.SIGTERM)

    async with asyncio.timeout(5):
        assert await kit.run(start) == 0
    assert loop_task.cancelled()
    assert not [r for r in caplog.records if r.levelno == logging.ERROR], "stopping is not an ended loop"


async def test_a_loop_that_returns_while_the_service_stops_is_no_failure() -> None:
    kit = Lifecycle()
    scope = kit.scope("server")
    leave = asyncio.Event()

    async def server() -> None:
        await leave.wait()  # as uvicorn: returns once told to exit

    async def start() -> None:
        task = scope.essential(server(), "api")

        async def told_to_exit() -> None:
            leave.set()
            await asyncio.wait([task])

        kit.on_stop(told_to_exit)
        kit.stop()

    async with asyncio.timeout(5):
        assert await kit.run(start) == 0


async def test_a_failing_start_stops_what_it_started_and_raises() -> None:
    kit = Lifecycle()
    stopped: list[str] = []

    async def start() -> None:
        kit.on_stop(lambda: stopped.append("store closed"))
        raise OSError("socket in use")

    with pytest.raises(OSError, match="socket in use"):
        await kit.run(start)
    assert stopped == ["store closed"]


async def test_spawned_work_is_kept_logged_when_it_fails_and_cancelled_at_stop(
    caplog: pytest.LogCaptureFixture,
) -> None:
    kit = Lifecycle()
    scope = kit.scope("writes")
    failed = scope.spawn(crashes(), "save")
    pending = scope.spawn(runs_forever(), "slow-save")
    await asyncio.wait([failed])
    await asyncio.sleep(0)
    [record] = [r for r in caplog.records if r.levelno == logging.ERROR]
    assert record.task == "save" and "KeyError" in record.error  # type: ignore[attr-defined]
    assert kit.exit_status == 0, "background work is not essential"
    await scope.stop()
    assert pending.cancelled()


async def test_readiness_is_the_first_check_that_fails() -> None:
    kit = Lifecycle()
    synced = False
    kit.ready_when(lambda: None if synced else "not synced yet")
    kit.ready_when(lambda: "never")
    assert kit.not_ready() == "not synced yet"
    synced = True
    assert kit.not_ready() == "never"


def test_run_service_ignores_a_signal_that_comes_while_the_interpreter_exits(tmp_path: Path) -> None:
    """The loop's handlers go with the loop; a SIGTERM during the exit that follows (here an atexit
    hook that takes a second, as joining pool threads can) must not turn a clean 0 into -15."""
    exiting = tmp_path / "exiting"
    code = (
        "import asyncio, atexit, pathlib, time\n"
        "from ascend_common.adapters.lifecycle import run_service\n"
        f"def last():\n    pathlib.Path({str(exiting)!r}).write_text('x')\n    time.sleep(1.0)\n"
        "atexit.register(last)\n"
        "async def main():\n    return 0\n"
        "raise SystemExit(run_service(main()))\n"
    )
    proc = subprocess.Popen([sys.executable, "-c", code])
    deadline = time.monotonic() + 20
    while not exiting.exists():
        assert proc.poll() is None and time.monotonic() < deadline, "the child never reached its exit"
        time.sleep(0.01)
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(10) == 0
