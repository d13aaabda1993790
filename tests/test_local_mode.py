"""The README's first command: local mode comes up, answers, and Ctrl-C leaves nothing behind."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
from dcmi_exporter.backends.sim import PROFILES

from tests.support.exporter import ROOT, free_port
from tests.support.waiting import START_S, until_sync

A5_CHIPS = {"a5-superpod-8": 8, "a5-8": 8, "a5-atlas350-4": 4, "a5-atlas350-4p": 4}


def test_local_mode_starts_answers_and_stops_cleanly(tmp_path: Path) -> None:
    port = free_port()
    state = tmp_path / "state"
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "tools.local_stack",
            "--state-dir",
            str(state),
            "--exporter-port",
            str(port),
            "--profile",
            "a3-16",
        ],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        sock = state / "dcmi-exporter.sock"
        until_sync(lambda: sock.exists() and _ready(port), START_S, "the local stack to be ready")
        plugin_sock = state / "device-plugins" / "Ascend910.sock"
        until_sync(plugin_sock.exists, START_S, "the plugin's socket")
        transport = httpx.HTTPTransport(uds=str(sock))
        with httpx.Client(transport=transport, base_url="http://x") as client:
            assert len(client.get("/v1/chips").json()["chips"]) == 16
        assert (state / "tokens").stat().st_mode & 0o777 == 0o600
        fm = httpx.HTTPTransport(uds=str(state / "fault-manager.sock"))
        with httpx.Client(transport=fm, base_url="http://x") as client:

            def all_schedulable() -> bool:
                verdicts = client.get("/v1/verdicts").json()["verdicts"]
                return len(verdicts) == 16 and all(v["schedulable"] for v in verdicts)

            until_sync(all_schedulable, what="16 schedulable verdicts")
        cm_file = state / "fault-manager/kube/configmaps/kube-system/mindx-dl-deviceinfo-local.json"
        until_sync(cm_file.exists, what="the device-info ConfigMap file")
        # The operator CLI answers against the local stack.
        env = {
            **os.environ,
            "ASCENDCTL_EXPORTER_SOCKET": str(sock),
            "ASCENDCTL_FAULT_MANAGER_SOCKET": str(state / "fault-manager.sock"),
        }
        ascendctl = str(Path(sys.executable).parent / "ascendctl")
        for command in ("chips", "verdicts", "deviceinfo"):
            result = subprocess.run([ascendctl, "--json", command], env=env, capture_output=True, text=True, timeout=30)
            assert result.returncode == 0, (command, result.stdout, result.stderr)
            assert result.stdout.strip(), command
    finally:
        proc.send_signal(signal.SIGINT)
        out, _ = proc.communicate(timeout=20)
    assert proc.returncode == 0, out
    assert "unix socket" in out and "local stack stopped" in out
    # The kubelet stand-in printed what the kubelet sees: 16 chips, all Healthy.
    assert "huawei.com/Ascend910: 16 devices, 16 Healthy" in out
    assert not list(state.glob("*.sock")), "no socket left behind"
    children = subprocess.run(["pgrep", "-f", str(state)], capture_output=True, text=True)
    assert children.stdout.strip() == "", "no process left behind"


def test_local_mode_offers_every_simulator_profile() -> None:
    """`./dev local --profile` takes each profile the simulator has, and the README names them all."""
    result = subprocess.run(
        [sys.executable, "-m", "tools.local_stack", "--help"], cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stderr
    readme = (ROOT / "README.md").read_text()
    for profile in PROFILES:
        assert profile in result.stdout, profile
        assert profile in readme, profile


@pytest.mark.parametrize("profile", sorted(A5_CHIPS))
def test_local_mode_starts_on_every_950_profile(tmp_path: Path, profile: str) -> None:
    """The 950 chips register as huawei.com/npu on npu.sock, all healthy, and the stack stops cleanly."""
    state = tmp_path / "state"
    ports = [str(free_port()) for _ in range(3)]
    args = ["--state-dir", str(state), "--profile", profile, "--exporter-port", ports[0]]
    args += ["--plugin-port", ports[1], "--fault-manager-port", ports[2]]
    proc = subprocess.Popen(
        [sys.executable, "-m", "tools.local_stack", *args],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        until_sync((state / "device-plugins" / "npu.sock").exists, START_S, "the plugin's npu.sock")
        cm_file = state / "fault-manager/kube/configmaps/kube-system/mindx-dl-deviceinfo-local.json"
        until_sync(cm_file.exists, what="the device-info ConfigMap file")
    finally:
        proc.send_signal(signal.SIGINT)
        out, _ = proc.communicate(timeout=20)
    assert proc.returncode == 0, out
    n = A5_CHIPS[profile]
    assert f"huawei.com/npu: {n} devices, {n} Healthy" in out
    assert not list(state.glob("*.sock")), "no socket left behind"


def _ready(port: int) -> bool:
    try:
        return httpx.get(f"http://127.0.0.1:{port}/readyz", timeout=1).status_code == 200
    except httpx.HTTPError:
        return False
