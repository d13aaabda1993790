"""The monitoring component on a real Prometheus (Debian's): the local stack (`./dev local`:
the exporter's simulator, the fault-manager and the device-plugin offline) scraped every second
with the component's rules (their `for` shortened to seconds), then every dashboard query
returns data through the HTTP API, the healthy stack raises no alert, a chip fault injected
through the simulator fires AscendNPUChipUnhealthy (and, local mode running no hot reset,
AscendNPUHotResetNotRecovering), both resolve when the fault recovers, and a chip isolated on
the fault-manager's API fires AscendNPUChipIsolated until it is released."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from tests.monitoring.component import JOBS, Query, alerts, queries, write_rules
from tests.support.exporter import ROOT, free_port
from tests.support.waiting import START_S, until_sync

FOR = "2s"  # every alert's `for` in this test (the component ships minutes)
UNHEALTHY_CODE = "8C1FA006"  # RestartNPU in the packaged policy: the chip's health turns 0
# The exporter samples the RoCE / link families every --net-stats-period s (30): the network
# panels have data within about that of the start.
DATA_S = 75.0
ALERT_S = 30.0


@dataclass
class Node:
    state: Path
    ports: dict[str, int]  # by job

    def exporter(self) -> httpx.Client:
        transport = httpx.HTTPTransport(uds=str(self.state / "dcmi-exporter.sock"))
        return httpx.Client(transport=transport, base_url="http://x", timeout=5)

    def fault_manager(self) -> httpx.Client:
        transport = httpx.HTTPTransport(uds=str(self.state / "fault-manager.sock"))
        return httpx.Client(transport=transport, base_url="http://x", timeout=5)

    def sim_token(self) -> str:
        for line in (self.state / "tokens").read_text().splitlines():
            if line.endswith(" sim"):
                return line.split()[0]
        raise AssertionError("no sim token in the local stack's token file")


def _ready(port: int) -> bool:
    try:
        return httpx.get(f"http://127.0.0.1:{port}/readyz", timeout=1).status_code == 200
    except httpx.HTTPError:
        return False


@pytest.fixture
def node(tmp_path: Path) -> Iterator[Node]:
    """`./dev local` (tools.local_stack) on free ports, stopped with Ctrl-C at the end."""
    ports = {job: free_port() for job in JOBS}
    state = tmp_path / "state"
    args = ["--state-dir", str(state), "--profile", "910b-8", "--exporter-port", str(ports["dcmi-exporter"])]
    args += ["--plugin-port", str(ports["ascend-device-plugin"]), "--fault-manager-port", str(ports["fault-manager"])]
    proc = subprocess.Popen(
        [sys.executable, "-m", "tools.local_stack", *args],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        until_sync(lambda: all(_ready(p) for p in ports.values()), START_S, "the local stack to be ready")
        yield Node(state, ports)
    finally:
        proc.send_signal(signal.SIGINT)
        out, _ = proc.communicate(timeout=30)
    assert proc.returncode == 0, out
    assert not list(state.glob("*.sock")), "no socket left behind"


@dataclass
class Prometheus:
    url: str

    def get(self, path: str, **params: str) -> Any:
        answer = httpx.get(self.url + path, params=params, timeout=5)
        assert answer.status_code == 200, answer.text
        body = answer.json()
        assert body["status"] == "success", body
        return body["data"]

    def query(self, expr: str) -> list[dict[str, Any]]:
        data = self.get("/api/v1/query", query=expr)
        result: list[dict[str, Any]] = data["result"] if data["resultType"] == "vector" else [data]
        return result

    def alerts(self) -> list[dict[str, Any]]:
        alerts: list[dict[str, Any]] = self.get("/api/v1/alerts")["alerts"]
        return alerts


@pytest.fixture
def prom(prometheus: Path, node: Node, tmp_path: Path) -> Iterator[Prometheus]:
    """A Prometheus scraping the node's three metrics ports every second, evaluating the
    component's rules every second; storage in the test's tmp dir, stopped at the end."""
    directory = tmp_path / "prometheus"
    directory.mkdir()
    rules = write_rules(directory / "ascend-rules.yaml", for_override=FOR)
    config = {
        "global": {"scrape_interval": "1s", "scrape_timeout": "1s", "evaluation_interval": "1s"},
        "rule_files": [str(rules)],
        "scrape_configs": [
            {
                "job_name": job,
                "static_configs": [{"targets": [f"127.0.0.1:{port}"], "labels": {"node": "local"}}],
            }
            for job, port in node.ports.items()
        ],
    }
    (directory / "prometheus.yml").write_text(yaml.safe_dump(config, sort_keys=False))
    port = free_port()
    log = (directory / "prometheus.log").open("wb")
    proc = subprocess.Popen(
        [
            str(prometheus),
            f"--config.file={directory / 'prometheus.yml'}",
            f"--storage.tsdb.path={directory / 'data'}",
            f"--web.listen-address=127.0.0.1:{port}",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    url = f"http://127.0.0.1:{port}"

    def ready() -> bool:
        if proc.poll() is not None:
            raise AssertionError(f"prometheus exited: {(directory / 'prometheus.log').read_text()[-3000:]}")
        try:
            return httpx.get(url + "/-/ready", timeout=1).status_code == 200
        except httpx.HTTPError:
            return False

    try:
        until_sync(ready, START_S, "prometheus to be ready")
        yield Prometheus(url)
    finally:
        proc.terminate()
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)
        log.close()


def _ours(alerts: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [a for a in alerts if a["labels"]["alertname"].startswith("Ascend")]


@pytest.mark.timeout(240)
def test_dashboard_queries_return_data_and_alerts_fire_and_resolve(prom: Prometheus, node: Node) -> None:
    started = time.monotonic()

    # The rules loaded, as promtool read them, and each evaluates without an error.
    def evaluated() -> dict[str, str] | None:
        health = {r["name"]: r["health"] for g in prom.get("/api/v1/rules")["groups"] for r in g["rules"]}
        return health if "unknown" not in health.values() else None

    health = until_sync(evaluated, START_S, "the rules evaluated")
    assert health == dict.fromkeys((a["alert"] for a in alerts()), "ok")

    def all_up() -> bool:
        return {s["metric"]["job"]: s["value"][1] for s in prom.query("up")} == dict.fromkeys(JOBS, "1")

    until_sync(all_up, START_S, "the three services scraped")

    # Every panel's queries return data (the RoCE / link families after their first sample).
    missing: list[Query] = queries()
    deadline = time.monotonic() + DATA_S
    while missing and time.monotonic() < deadline:
        missing = [q for q in missing if not prom.query(q.expanded())]
        if missing:
            time.sleep(1)
    assert not missing, [f"{q.panel} {q.ref}: {q.expanded()}" for q in missing]
    queries_s = time.monotonic() - started

    # A healthy node raises nothing (several evaluations since the first scrape).
    assert _ours(prom.alerts()) == []

    def firing(name: str) -> list[dict[str, Any]] | None:
        found = [a for a in prom.alerts() if a["labels"]["alertname"] == name and a["state"] == "firing"]
        return found or None

    def resolved(name: str) -> bool:
        gone = not [a for a in prom.alerts() if a["labels"]["alertname"] == name]
        return gone and not prom.query(f'ALERTS{{alertname="{name}"}}')

    with node.exporter() as exporter, node.fault_manager() as fault_manager:
        chip = exporter.get("/v1/chips/0").json()
        phy = str(chip["phy_id"])
        auth = {"Authorization": f"Bearer {node.sim_token()}"}

        def inject(assertion: str) -> None:
            body = {"code": UNHEALTHY_CODE, "assertion": assertion}
            answer = exporter.post("/v1/sim/chips/0/faults", json=body, headers=auth)
            assert answer.status_code == 204, answer.text

        inject("occur")
        fault_at = time.monotonic()
        (alert,) = until_sync(lambda: firing("AscendNPUChipUnhealthy"), ALERT_S, "AscendNPUChipUnhealthy firing")
        fired_s = time.monotonic() - fault_at
        assert alert["labels"]["id"] == phy
        assert alert["labels"]["node"] == "local"
        assert alert["labels"]["severity"] == "critical"
        assert alert["annotations"]["summary"] == f"NPU chip {phy} on local is unhealthy"
        assert float(alert["value"]) == 0
        # The fault-manager's verdict: RestartNPU, and local mode runs no hot reset to recover it.
        (waiting,) = until_sync(
            lambda: firing("AscendNPUHotResetNotRecovering"), ALERT_S, "AscendNPUHotResetNotRecovering firing"
        )
        assert waiting["labels"] == {
            "alertname": "AscendNPUHotResetNotRecovering",
            "node": "local",
            "level": "RestartNPU",
            "severity": "warning",
        }

        inject("recover")
        recover_at = time.monotonic()
        until_sync(lambda: resolved("AscendNPUChipUnhealthy"), ALERT_S, "AscendNPUChipUnhealthy resolved")
        resolved_s = time.monotonic() - recover_at
        until_sync(lambda: resolved("AscendNPUHotResetNotRecovering"), ALERT_S, "the hot-reset alert resolved")

        # An administrator isolates the chip on the fault-manager's API, then releases it.
        answer = fault_manager.post(f"/v1/chips/{chip['name']}/separation")
        assert answer.status_code == 200, answer.text
        (isolated,) = until_sync(lambda: firing("AscendNPUChipIsolated"), ALERT_S, "AscendNPUChipIsolated firing")
        assert isolated["labels"]["level"] == "ManuallySeparateNPU"
        assert isolated["annotations"]["summary"] == "1 NPU chip(s) on local isolated (ManuallySeparateNPU)"
        answer = fault_manager.delete(f"/v1/chips/{chip['name']}/separation")
        assert answer.status_code == 200, answer.text
        until_sync(lambda: resolved("AscendNPUChipIsolated"), ALERT_S, "AscendNPUChipIsolated resolved")
    assert _ours(prom.alerts()) == []
    print(
        json.dumps(
            {
                "queries": len(queries()),
                "all_data_s": round(queries_s, 1),
                "fired_s": round(fired_s, 1),
                "resolved_s": round(resolved_s, 1),
            }
        )
    )
