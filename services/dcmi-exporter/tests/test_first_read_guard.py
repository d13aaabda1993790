"""Before the node's first full read, every route that names a chip answers 503 with Retry-After,
never a list without the chips or a 404 for a chip that exists; a node without chips answers its
true, empty list once it was read."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import httpx
from ascend_common.adapters.ops import ops_app
from ascend_common.clock import SystemClock
from ascend_common.tokens import Scope, TokenTable
from dcmi_exporter.api import NOT_READ_YET, RETRY_AFTER_S, create_api
from dcmi_exporter.metrics.families import build_registry
from dcmi_exporter.runtime import Exporter
from dcmi_exporter.server import readiness
from dcmi_exporter.settings import ExporterSettings
from dcmi_exporter.tasks.telemetry import Samples

from tests.support.exporter_inprocess import GatedSim

TOKEN = "t-sim-" + "3" * 26
# (method, path, body): every route of the local API that names a chip, or lists or streams them.
CHIP_ROUTES: list[tuple[str, str, dict[str, object] | None]] = [
    ("GET", "/v1/chips", None),
    ("GET", "/v1/chips/5", None),
    ("GET", "/v1/events", None),
    ("POST", "/v1/chips/5/reset", {"channel": "auto"}),
    ("POST", "/v1/chips/5/vnpus", {"template": "vir05_1c_16g"}),
    ("DELETE", "/v1/chips/5/vnpus?vdev_id=100", None),
    ("POST", "/v1/sim/chips/5/faults", {"code": "80E01801"}),
    ("POST", "/v1/sim/chips/5/bursts", {"code": "80E01801", "count": 2}),
    ("PUT", "/v1/sim/chips/5/network", {"healthy": False}),
    ("PUT", "/v1/sim/chips/5/hang", {"seconds": 1}),
    ("DELETE", "/v1/sim/chips/5/hang", None),
    ("PUT", "/v1/sim/chips/5/processes", {"processes": []}),
    ("PUT", "/v1/sim/chips/5/idle-job", {"pids": [100]}),
    ("DELETE", "/v1/sim/chips/5/idle-job", None),
    ("POST", "/v1/sim/chips/5/reset-failure", {}),
]


@asynccontextmanager
async def gated_exporter(tmp_path: Path, *, chipless: bool = False) -> AsyncIterator[tuple[Exporter, threading.Event]]:
    gate = threading.Event()
    settings = ExporterSettings(socket=tmp_path / "sock", poll_period=0.2, call_timeout=30.0)
    exp = Exporter(settings, GatedSim(gate, chipless=chipless), SystemClock(), TokenTable(((TOKEN, frozenset(Scope)),)))
    await exp.start()
    try:
        yield exp, gate
    finally:
        gate.set()
        await exp.stop()


def clients(exp: Exporter) -> tuple[httpx.AsyncClient, httpx.AsyncClient]:
    api = httpx.AsyncClient(transport=httpx.ASGITransport(create_api(exp)), base_url="http://exporter")
    registry = build_registry(lambda: exp.poller.snapshot, exp.stats, Samples)
    held = ops_app(
        lambda: readiness(exp),
        registry,
        metrics_held=lambda: None if exp.poller.snapshot.node.ready else NOT_READ_YET,
        retry_after_s=RETRY_AFTER_S,
    )
    ops = httpx.AsyncClient(transport=httpx.ASGITransport(held), base_url="http://ops")  # type: ignore[arg-type]
    return api, ops


async def test_every_chip_route_answers_503_with_retry_after_until_every_chip_was_read(tmp_path: Path) -> None:
    async with gated_exporter(tmp_path) as (exp, gate):
        api, ops = clients(exp)
        async with api, ops:
            auth = {"Authorization": f"Bearer {TOKEN}"}
            for method, path, body in CHIP_ROUTES:
                resp = await api.request(method, path, json=body, headers=auth)
                assert resp.status_code == 503, (method, path, resp.status_code, resp.text)
                assert resp.headers["retry-after"] == str(RETRY_AFTER_S), (method, path)
                assert resp.json() == {"detail": NOT_READ_YET}, (method, path)
            # The node names no chip: it answers, and says it is not ready.
            node = (await api.get("/v1/node")).json()
            assert node["ready"] is False
            metrics = await ops.get("/metrics")
            assert metrics.status_code == 503 and metrics.headers["retry-after"] == str(RETRY_AFTER_S)
            readyz = await ops.get("/readyz")
            assert readyz.status_code == 503 and readyz.json()["status"] == "not ready" and readyz.json()["reason"]
            assert (await ops.get("/healthz")).status_code == 200  # alive: a liveness probe must not restart it

            gate.set()
            async with asyncio.timeout(10):
                await exp.poller.read_once.wait()
            listing = (await api.get("/v1/chips")).json()
            assert len(listing["chips"]) == 8
            assert (await api.get("/v1/chips/5")).json()["logic_id"] == 5
            assert (await api.delete("/v1/sim/chips/5/hang", headers=auth)).status_code == 204
            assert (await api.get("/v1/node")).json()["ready"] is True
            metrics = await ops.get("/metrics")
            assert metrics.status_code == 200
            assert metrics.text.count("npu_chip_info_health_status{") == 8
            assert (await ops.get("/readyz")).json() == {"status": "ready", "chips": 8}


async def test_a_node_without_chips_is_ready_after_its_first_read_and_lists_no_chip(tmp_path: Path) -> None:
    async with gated_exporter(tmp_path, chipless=True) as (exp, gate):
        api, ops = clients(exp)
        async with api, ops:
            assert (await api.get("/v1/chips")).status_code == 503
            gate.set()
            async with asyncio.timeout(10):
                await exp.poller.read_once.wait()
            resp = await api.get("/v1/chips")
            assert resp.status_code == 200 and resp.json()["chips"] == []
            assert (await api.get("/v1/chips/0")).status_code == 404  # a true answer now: the node has none
            assert (await api.get("/v1/node")).json()["ready"] is True
            assert (await ops.get("/readyz")).json() == {"status": "ready", "chips": 0}
            assert (await ops.get("/metrics")).status_code == 200
