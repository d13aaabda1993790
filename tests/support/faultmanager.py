"""Run the fault-manager as a real process beside a sim exporter."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import httpx

from tests.support.exporter import ROOT, ExporterProc, free_port
from tests.support.waiting import START_S, ready, until


@dataclass
class FaultManagerProc:
    proc: subprocess.Popen[bytes]
    socket: Path
    db: Path
    ops_url: str
    log_path: Path

    def client(self) -> httpx.AsyncClient:
        return httpx.AsyncClient(
            transport=httpx.AsyncHTTPTransport(uds=str(self.socket)), base_url="http://fm", timeout=10
        )

    def ready(self) -> bool:
        return ready("fault-manager", self.proc, self.ops_url, self.log_path)

    def stop(self, sig: int = signal.SIGTERM) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        return self.proc.returncode


def start_fault_manager(
    workdir: Path,
    exporter: ExporterProc,
    *extra: str,
    kube: str = "offline",
    db: Path | None = None,
    env: dict[str, str] | None = None,
) -> FaultManagerProc:
    workdir.mkdir(parents=True, exist_ok=True)
    port = free_port()
    sock = workdir / "fm.sock"
    db = db or workdir / "fm.db"
    log_path = workdir / "fault-manager.log"
    args = [
        sys.executable, "-m", "fault_manager.cli",
        "--exporter-socket", str(exporter.socket), "--db", str(db), "--socket", str(sock),
        "--node-name", "node-a", "--kube", kube, "--state-dir", str(workdir / "state"),
        "--metrics-addr", f"127.0.0.1:{port}", "--write-interval", "0.1",
        *extra,
    ]  # fmt: skip
    proc = subprocess.Popen(
        args, stdout=log_path.open("ab"), stderr=subprocess.STDOUT, cwd=ROOT, env={**os.environ, **(env or {})}
    )
    return FaultManagerProc(proc, sock, db, f"http://127.0.0.1:{port}", log_path)


async def wait_ready(fm: FaultManagerProc, timeout: float = START_S) -> None:
    await until(lambda: asyncio.to_thread(fm.ready), timeout, f"the fault-manager to be ready (log: {fm.log_path})")
