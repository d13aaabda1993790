"""A client that reads the exporter from the instant its socket appears is never told that a chip
the node has does not exist: every answer is a 503 with Retry-After or the whole node (issue 32).

The in-process test holds the first read back for as long as it likes (a discovery that waits for
the test), so it shows the ordering whatever the machine's load; the process test starts the real
exporter again and again beside a CPU hog, as the loaded machine of the report did.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest
from ascend_common.clock import SystemClock
from ascend_common.tokens import TokenTable
from dcmi_exporter.runtime import Exporter
from dcmi_exporter.server import serve
from dcmi_exporter.settings import ExporterSettings

from tests.support.exporter import ExporterProc, auth, free_port, start_exporter
from tests.support.exporter_inprocess import GatedSim

CHIPS = 8
STARTS = 50
LANES = 2
READ_AFTER_SOCKET_S = 0.15  # per start: reads from the instant the socket appears, for this long
HOG_S = 150.0  # the hog ends on its own even if this test is killed before its `finally`
CHIP_LINE = re.compile(rb"^npu_chip_info_health_status\{", re.MULTILINE)


def judge(resp: httpx.Response, whole: Callable[[httpx.Response], bool]) -> str | None:
    """What is wrong with an answer before or after the first read, or None."""
    if resp.status_code == 503:
        return None if resp.headers.get("retry-after", "").isdigit() else f"503 without Retry-After: {resp.headers}"
    if resp.status_code in (200, 204) and whole(resp):
        return None
    return f"{resp.request.method} {resp.request.url.path}: {resp.status_code} {resp.text[:200]!r}"


def whole_list(resp: httpx.Response) -> bool:
    return len(resp.json()["chips"]) == CHIPS


def chip_5(resp: httpx.Response) -> bool:
    return bool(resp.json()["logic_id"] == 5)


def every_chip_metric(resp: httpx.Response) -> bool:
    return len(CHIP_LINE.findall(resp.content)) == CHIPS


def read_everything(api: httpx.Client, ops_url: str) -> list[str]:
    """One round of every route that names a chip; what was wrong with each answer."""
    wrong = [
        judge(api.get("/v1/chips"), whole_list),
        judge(api.get("/v1/chips/5"), chip_5),
        judge(api.delete("/v1/sim/chips/5/hang", headers=auth("sim")), lambda _: True),
        judge(httpx.get(ops_url + "/metrics", timeout=5), every_chip_metric),
    ]
    with api.stream("GET", "/v1/events") as stream:
        wrong.append(judge(stream, lambda r: next(r.iter_lines()).startswith("event: hello")))
    return [w for w in wrong if w is not None]


def reads_from_the_first_instant(ep: ExporterProc) -> tuple[int, list[str]]:
    """Wait for the socket in a tight loop, then read /v1/chips (and, between, every other chip
    route) for READ_AFTER_SOCKET_S; returns how many answers came and what was wrong."""
    deadline = time.monotonic() + 30
    while not ep.socket.exists():
        if ep.proc.poll() is not None or time.monotonic() > deadline:
            raise AssertionError(f"no socket (exit {ep.proc.returncode}): {ep.log_path.read_text()[-2000:]}")
        time.sleep(0.0005)  # a busy loop would take the CPU the starting exporter needs
    answers, wrong = 0, []
    with ep.sync_client(timeout=10) as api:
        until = time.monotonic() + READ_AFTER_SOCKET_S
        while time.monotonic() < until or answers == 0:
            try:
                wrong += [w for w in [judge(api.get("/v1/chips"), whole_list)] if w is not None]
            except httpx.TransportError:
                continue  # bound but not listening yet: no answer at all, which is no lie
            answers += 1
            if answers % 10 == 1:
                wrong += read_everything(api, ep.metrics_url)
    return answers, wrong


def cpu_hog() -> subprocess.Popen[bytes]:
    code = f"import time\nend = time.monotonic() + {HOG_S}\nwhile time.monotonic() < end:\n    pass\n"
    return subprocess.Popen([sys.executable, "-c", code])


def starts(tmp: Path, count: int) -> tuple[int, list[str], list[ExporterProc]]:
    """`count` starts one after the other, each read from the instant its socket appears; each
    exporter is sent SIGTERM once read (its exit is checked by the caller)."""
    answers, wrong, started = 0, [], []
    for n in range(count):
        ep = start_exporter(tmp / f"run{n}", wait_ready=False)
        started.append(ep)
        try:
            got, bad = reads_from_the_first_instant(ep)
        finally:
            ep.proc.send_signal(signal.SIGTERM)
        answers += got
        wrong += [f"{tmp.name} start {n}: {w}" for w in bad]
        if len(wrong) > 5:
            break
    return answers, wrong, started


@pytest.mark.slow
@pytest.mark.timeout(240)
def test_a_client_reading_from_the_instant_the_socket_appears_never_sees_a_partial_node(tmp_path: Path) -> None:
    hog = cpu_hog()
    try:
        # Two clients, each starting its own exporters one after the other: 50 starts in all, in
        # half the time (a start is mostly the interpreter importing, which the hog slows).
        with ThreadPoolExecutor(LANES) as pool:
            lanes = list(pool.map(lambda lane: starts(tmp_path / f"lane{lane}", STARTS // LANES), range(LANES)))
    finally:
        hog.kill()
        hog.wait(5)
    wrong = [w for _, bad, _ in lanes for w in bad]
    assert not wrong, "\n".join(wrong[:20])
    assert sum(answers for answers, _, _ in lanes) >= STARTS
    procs = [ep for _, _, started in lanes for ep in started]
    assert len(procs) == STARTS
    for ep in procs:
        assert ep.stop() == 0, ep.log_path.read_text()[-2000:]
        assert not ep.socket.exists(), "the exporter left its socket behind"


async def test_the_socket_appears_only_after_the_first_read_and_never_answers_an_empty_node(tmp_path: Path) -> None:
    gate = threading.Event()
    port = free_port()
    settings = ExporterSettings(
        socket=tmp_path / "exporter.sock", metrics_addr=f"127.0.0.1:{port}", poll_period=0.2, call_timeout=30.0
    )
    exp = Exporter(settings, GatedSim(gate), SystemClock(), TokenTable())
    served = asyncio.create_task(serve(exp))
    ops_url = f"http://127.0.0.1:{port}"
    try:
        async with httpx.AsyncClient(base_url=ops_url, timeout=5) as ops:
            # The ops port is up while the chips are not read: alive, not ready, no metrics yet.
            async with asyncio.timeout(10):
                while True:
                    with contextlib.suppress(httpx.TransportError):
                        readyz = await ops.get("/readyz")
                        break
                    await asyncio.sleep(0.02)
            assert readyz.status_code == 503 and readyz.json()["status"] == "not ready"
            assert (await ops.get("/healthz")).status_code == 200
            metrics = await ops.get("/metrics")
            assert metrics.status_code == 503 and metrics.headers["retry-after"] == "1"
            await asyncio.sleep(0.5)  # time enough for any socket to appear and any answer to come
            if settings.socket.exists():
                transport = httpx.AsyncHTTPTransport(uds=str(settings.socket))
                async with httpx.AsyncClient(transport=transport, base_url="http://x", timeout=2) as api:
                    early = await api.get("/v1/chips")
                raise AssertionError(f"socket before the first read; /v1/chips: {early.status_code} {early.text}")
            gate.set()
            async with asyncio.timeout(10):
                while not settings.socket.exists():
                    await asyncio.sleep(0.005)
            transport = httpx.AsyncHTTPTransport(uds=str(settings.socket), retries=3)
            async with httpx.AsyncClient(transport=transport, base_url="http://x", timeout=5) as api:
                listing = await api.get("/v1/chips")
            assert listing.status_code == 200 and len(listing.json()["chips"]) == CHIPS
            assert (await ops.get("/readyz")).json() == {"status": "ready", "chips": CHIPS}
    finally:
        gate.set()
        exp.lifecycle.stop()
        assert await asyncio.wait_for(served, 20) == 0
        for sig in (signal.SIGINT, signal.SIGTERM):  # serve() left its handlers on the test's loop
            asyncio.get_running_loop().remove_signal_handler(sig)
    assert not settings.socket.exists()


async def test_stopped_before_its_first_read_the_exporter_stops_at_once_and_leaves_no_socket(tmp_path: Path) -> None:
    gate = threading.Event()
    settings = ExporterSettings(
        socket=tmp_path / "exporter.sock", metrics_addr=f"127.0.0.1:{free_port()}", call_timeout=30.0
    )
    exp = Exporter(settings, GatedSim(gate), SystemClock(), TokenTable())
    served = asyncio.create_task(serve(exp))
    # The discovery's thread ends a second after the stop, so that the library's close can run then.
    release = threading.Timer(1.3, gate.set)
    try:
        await asyncio.sleep(0.3)
        exp.lifecycle.stop()
        started = time.monotonic()
        release.start()
        assert await asyncio.wait_for(served, 20) == 0
        assert time.monotonic() - started < 4  # not the 5 s of waiting for an API server that never started
    finally:
        release.cancel()
        gate.set()
        for sig in (signal.SIGINT, signal.SIGTERM):
            asyncio.get_running_loop().remove_signal_handler(sig)
    assert not settings.socket.exists()
