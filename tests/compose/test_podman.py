"""docker-compose.yml run for real: podman and podman-compose (deploy/compose/podman.sh) start it
with the image of `./dev image`, each service answers /readyz on its published port, and a fault
injected through the exporter reaches the fault-manager's verdicts and the kubelet stand-in.

The host ports are free ones (the compose file's ASCEND_*_PORT variables), not 8082-8084: the
cluster tier's exporter, on the host network, holds 8082 while its session-wide cluster is up.
Needs root; builds the image when it changed (./dev image); outside CI it is skipped when podman cannot run
here, in CI that fails.
"""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support.exporter import ROOT, free_port
from tests.support.realnode import image_archive, record
from tests.support.waiting import until_sync

PODMAN_SH = ROOT / "deploy" / "compose" / "podman.sh"
PORT_VARIABLES = {
    "dcmi-exporter": "ASCEND_EXPORTER_PORT",
    "device-plugin": "ASCEND_PLUGIN_PORT",
    "fault-manager": "ASCEND_FAULT_MANAGER_PORT",
}
WAIT_S = 90.0
FAULT = {"code": "80E3A201", "assertion": "occur"}


def sh(*args: str, timeout: float = 120, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, **(env or {})}
    return subprocess.run([str(PODMAN_SH), *args], capture_output=True, text=True, timeout=timeout, env=env)


def out(*args: str) -> str:
    result = sh(*args)
    assert result.returncode == 0, f"podman.sh {' '.join(args)}: {result.stdout}{result.stderr}"
    return result.stdout


def unavailable(reason: str) -> None:
    if os.environ.get("CI"):
        pytest.fail(reason)
    pytest.skip(reason)


def require_podman() -> None:
    """Install podman and podman-compose, load the image, and run one container."""
    if os.geteuid() != 0:
        unavailable("podman runs as root here (rootless needs subuids): not root")
    image_archive()  # podman.sh loads it from .state/image/
    for step, args in (
        ("installing podman", ("install",)),
        ("loading the image", ("load",)),
        ("running a container", ("podman", "run", "--rm", "--network=none", "ascend-node-stack:latest", "true")),
    ):
        result = sh(*args, timeout=600)
        if result.returncode != 0:
            unavailable(f"podman cannot run here: {step} failed: {(result.stderr or result.stdout).strip()[-300:]}")


def ready(port: int) -> bool:
    try:
        return httpx.get(f"http://127.0.0.1:{port}/readyz", timeout=2).status_code == 200
    except httpx.HTTPError:
        return False


def unix_client(path: Path) -> httpx.Client:
    return httpx.Client(transport=httpx.HTTPTransport(uds=str(path)), base_url="http://x", timeout=5)


def sim_token() -> str:
    lines = (ROOT / "deploy" / "compose" / "tokens").read_text().splitlines()
    return next(line.split()[0] for line in lines if line.split()[1:] == ["sim"])


def leftovers(project: str, bridge: str) -> list[str]:
    """What podman and netavark keep of the project: containers, pods, volumes, networks (by
    name), the network's firewall rules, DNS entry and bridge."""
    found = []
    for kind, args in (
        ("container", ("ps", "-a", "--format", "{{.Names}}")),
        ("pod", ("pod", "ps", "--format", "{{.Name}}")),
        ("volume", ("volume", "ls", "--format", "{{.Name}}")),
        ("network", ("network", "ls", "--format", "{{.Name}}")),
    ):
        found += [f"{kind} {name}" for name in out("podman", *args).split() if project in name]
    net = f"{project}_default"
    nat = subprocess.run(["iptables-save", "-t", "nat"], capture_output=True, text=True, check=True).stdout
    found += ["DNAT rules"] if f"dnat name: {net} " in nat else []
    found += ["aardvark-dns entry"] if (Path("/run/containers/networks/aardvark-dns") / net).exists() else []
    found += [f"bridge {bridge}"] if (Path("/sys/class/net") / bridge).exists() else []
    return found


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_compose_stack_runs_under_podman() -> None:
    require_podman()
    project = f"ascend-podman-test-{os.getpid()}"
    ports = {name: free_port() for name in PORT_VARIABLES}
    env = {variable: str(ports[name]) for name, variable in PORT_VARIABLES.items()}

    def compose(*args: str) -> subprocess.CompletedProcess[str]:
        return sh("compose", "-p", project, *args, env=env)

    def wait(check: Callable[[], Any], what: str, interval: float = 0.05) -> Any:
        try:
            return until_sync(check, WAIT_S, what, interval)
        except AssertionError as exc:
            logs = compose("logs", "--no-color", "--tail", "40").stdout
            raise AssertionError(f"{exc}\n--- podman-compose logs (last 40 lines each) ---\n{logs}") from None

    started = time.monotonic()
    up = compose("up", "-d")
    try:
        assert up.returncode == 0, f"podman-compose up failed: {up.stdout}{up.stderr}"
        for name, port in ports.items():
            wait(partial(ready, port), f"{name}'s /readyz on 127.0.0.1:{port}")
        ready_s = time.monotonic() - started
        bridge = out("podman", "network", "inspect", f"{project}_default", "--format", "{{.NetworkInterface}}").strip()

        # The sockets are in the named volume, on this machine's disk.
        sockets = Path(out("podman", "volume", "inspect", f"{project}_sockets", "--format", "{{.Mountpoint}}").strip())
        auth = {"Authorization": f"Bearer {sim_token()}"}
        with unix_client(sockets / "dcmi-exporter.sock") as exporter, unix_client(sockets / "fault-manager.sock") as fm:
            chip = exporter.get("/v1/chips/0").json()["name"]  # logic id 0 is Ascend910-4 in the 910b-8 profile
            injected = time.monotonic()
            response = exporter.post("/v1/sim/chips/0/faults", json=FAULT, headers=auth)
            assert response.status_code == 204, response.text

            def verdict() -> dict[str, object] | None:
                v = next(v for v in fm.get("/v1/verdicts").json()["verdicts"] if v["chip"] == chip)
                return v if not v["schedulable"] and FAULT["code"] in v["codes"] else None

            what = f"the fault-manager's verdict on {chip} to turn unschedulable with {FAULT['code']}"
            wait(verdict, what, interval=0.005)
            verdict_s = time.monotonic() - injected
        # ... and the device-plugin's ListAndWatch, as the kubelet stand-in prints it.
        wait(lambda: f"Unhealthy: {chip}" in compose("logs", "--no-color", "kubelet").stdout,
             f"the kubelet stand-in to see {chip} unhealthy", interval=0.5)  # fmt: skip
        record("compose_up_to_all_ready_s", round(ready_s, 1))
        record("compose_fault_to_verdict_ms", round(verdict_s * 1000, 1))
    finally:
        down = sh("down", project)  # podman-compose down -v, and what netavark failed to tear down
    assert down.returncode == 0, f"podman.sh down failed: {down.stdout}{down.stderr}"
    assert "did not tear down" not in down.stderr, f"did something unmount /run/netns/*? {down.stderr[-3000:]}"
    assert leftovers(project, bridge) == []
