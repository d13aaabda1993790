"""docker-compose.yml: valid against the Compose specification, and each service's command runs.

No Docker engine runs here, so each service's command is run as a local process, its
container paths mapped to a temporary directory, and must reach its /readyz.
"""

from __future__ import annotations

import shlex
import signal
import subprocess
import sys
from functools import partial
from pathlib import Path

import yaml

from tests.support.exporter import ROOT, free_port
from tests.support.fake_kubelet import short_tmp_dir
from tests.support.waiting import START_S, ready, until_sync

COMPOSE = ROOT / "docker-compose.yml"
BIN = Path(sys.executable).parent


def test_compose_file_validates_against_the_compose_spec() -> None:
    result = subprocess.run(
        [str(BIN / "check-jsonschema"), "--builtin-schema", "vendor.compose-spec", str(COMPOSE)],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr


def local_command(command: str, paths: dict[str, Path], port: int) -> list[str]:
    """The container command with its paths and metrics port mapped to this machine."""
    words = []
    for word in shlex.split(command):
        for container, local in paths.items():
            word = word.replace(container, str(local))
        words.append(f"127.0.0.1:{port}" if word.startswith("0.0.0.0:") else word)
    return [str(BIN / words[0]), *words[1:]]


def test_every_compose_service_command_reaches_readyz() -> None:
    services = yaml.safe_load(COMPOSE.read_text())["services"]
    assert set(services) == {"dcmi-exporter", "fault-manager", "device-plugin"}
    with short_tmp_dir("compose-") as tmp:
        paths = {
            "/run/ascend": tmp / "run",
            "/var/lib/ascend": tmp / "lib",
            "/etc/ascend/tokens": ROOT / "deploy" / "compose" / "tokens",
            "/var/lib/kubelet/device-plugins": tmp / "dp",
        }
        for p in (tmp / "run", tmp / "lib", tmp / "dp"):
            p.mkdir()
        procs: list[subprocess.Popen[bytes]] = []
        standin = subprocess.Popen(
            [sys.executable, "-m", "tools.kubelet_standin", "--plugin-dir", str(tmp / "dp")], cwd=ROOT,
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        procs.append(standin)
        try:
            for name in ("dcmi-exporter", "fault-manager", "device-plugin"):  # the depends_on order
                port = free_port()
                log = (tmp / f"{name}.log").open("wb")
                cmd = local_command(services[name]["command"], paths, port)
                proc = subprocess.Popen(cmd, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT)
                procs.append(proc)
                serving = partial(ready, name, proc, f"http://127.0.0.1:{port}", tmp / f"{name}.log")
                until_sync(serving, START_S, f"{name} ready", interval=0.1)
        finally:
            for proc in reversed(procs):
                proc.send_signal(signal.SIGTERM)
            for proc in procs:
                try:
                    proc.wait(10)
                except subprocess.TimeoutExpired:
                    proc.kill()
