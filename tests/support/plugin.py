"""Run the device-plugin as a real process beside a sim exporter, for cross-service tests."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import httpx

from tests.support.exporter import ROOT, ExporterProc, free_port
from tests.support.waiting import START_S, ready, until


@dataclass
class PluginProc:
    proc: subprocess.Popen[bytes]
    plugin_dir: Path
    ops_url: str
    log_path: Path
    relaunch: Callable[[], PluginProc] | None = None  # the same command again (see `restart`)

    def restart(self) -> PluginProc:
        """Stop (SIGTERM, must exit 0) and start a new plugin with the same flags."""
        assert self.relaunch is not None
        assert self.stop() == 0, self.log_path.read_text()[-3000:]
        return self.relaunch()

    def ready(self) -> bool:
        return ready("plugin", self.proc, self.ops_url, self.log_path)

    def metrics(self) -> str:
        return httpx.get(self.ops_url + "/metrics", timeout=2).text

    def stop(self, timeout: float = 10.0) -> int:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        return self.proc.returncode


def dra_args(workdir: Path, kubeconfig: Path) -> list[str]:
    """The plugin as a DRA driver (--kubelet-api dra), its kubelet and CDI dirs under `workdir`."""
    return [
        "--kubelet-api", "dra",
        "--plugins-registry-dir", str(workdir / "k" / "plugins_registry"),
        "--kubelet-plugins-dir", str(workdir / "k" / "plugins"),
        "--cdi-root", str(workdir / "cdi"),
        "--kubeconfig", str(kubeconfig),
    ]  # fmt: skip


def start_plugin(
    workdir: Path,
    exporter: ExporterProc,
    plugin_dir: Path,
    *extra: str,
    kube: str = "offline",
    env: dict[str, str] | None = None,
) -> PluginProc:
    port = free_port()
    log_path = workdir / "plugin.log"
    args = [
        sys.executable, "-m", "ascend_device_plugin.cli",
        "--exporter-socket", str(exporter.socket),
        "--plugin-dir", str(plugin_dir),
        "--podresources-socket", str(workdir / "podres" / "kubelet.sock"),
        "--node-name", "node-a",
        "--kube", kube,
        "--metrics-addr", f"127.0.0.1:{port}",
        "--require-root-owned", "false",
        *extra,
    ]  # fmt: skip
    proc = subprocess.Popen(
        args, stdout=log_path.open("wb"), stderr=subprocess.STDOUT, cwd=ROOT, env={**os.environ, **(env or {})}
    )

    def relaunch() -> PluginProc:
        return start_plugin(workdir, exporter, plugin_dir, *extra, kube=kube, env=env)

    return PluginProc(proc, plugin_dir, f"http://127.0.0.1:{port}", log_path, relaunch)


async def wait_ready(plugin: PluginProc, timeout: float = START_S) -> None:
    """Async: the fake kubelet runs on the test's event loop and must keep serving meanwhile."""
    await until(lambda: asyncio.to_thread(plugin.ready), timeout, f"the plugin to be ready (log: {plugin.log_path})")
