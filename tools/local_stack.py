"""Local mode: the node stack on one machine with simulated chips and no cluster.

`./dev local [--profile 910b-8] [--state-dir .state/local]` starts every service that
exists so far as a real process, prints where each API is, and stops them all on Ctrl-C,
leaving no process and no socket behind. A development tool, never part of a service.
"""

from __future__ import annotations

import argparse
import os
import secrets
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
PROFILES = ("910b-8", "910a-8", "a3-16", "310p-duo-4", "310p-4")


@dataclass
class Service:
    name: str
    proc: subprocess.Popen[bytes]
    socket: Path
    ops_url: str


def write_tokens(state: Path) -> dict[str, str]:
    """Fresh tokens per run, one per scope holder, in a 0600 file."""
    tokens = {"reset": secrets.token_hex(16), "vnpu": secrets.token_hex(16), "sim": secrets.token_hex(16)}
    path = state / "tokens"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write("# local mode tokens: <token> <scopes>\n")
        for scope, token in tokens.items():
            f.write(f"{token} {scope}\n")
    return tokens


def wait_ready(svc: Service, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if svc.proc.poll() is not None:
            raise SystemExit(f"{svc.name} exited with {svc.proc.returncode}; see its log")
        try:
            if httpx.get(svc.ops_url + "/readyz", timeout=1).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.1)
    raise SystemExit(f"{svc.name} not ready within {timeout}s")


def start_exporter(state: Path, profile: str, port: int, scenario: Path | None) -> Service:
    sock = state / "dcmi-exporter.sock"
    args = [
        sys.executable, "-m", "dcmi_exporter.cli",
        "--backend", "sim", "--profile", profile,
        "--socket", str(sock), "--metrics-addr", f"127.0.0.1:{port}",
        "--token-file", str(state / "tokens"),
    ]  # fmt: skip
    if scenario is not None:
        args += ["--scenario", str(scenario)]
    log = (state / "dcmi-exporter.log").open("ab")
    proc = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, cwd=ROOT, start_new_session=True)
    return Service("dcmi-exporter", proc, sock, f"http://127.0.0.1:{port}")


def stop(services: list[Service]) -> None:
    for svc in services:
        if svc.proc.poll() is None:
            svc.proc.send_signal(signal.SIGTERM)
    for svc in services:
        try:
            svc.proc.wait(10)
        except subprocess.TimeoutExpired:
            svc.proc.kill()
            svc.proc.wait(5)
        if svc.socket.exists():
            svc.socket.unlink()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="./dev local", description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--profile", choices=PROFILES, default="910b-8", help="simulated node (default 910b-8)")
    parser.add_argument("--state-dir", type=Path, default=ROOT / ".state" / "local", help="sockets, logs, tokens")
    parser.add_argument("--exporter-port", type=int, default=9101, help="exporter /metrics, /healthz, /readyz")
    parser.add_argument("--scenario", type=Path, help="a scripted fault scenario (YAML) for the simulator")
    args = parser.parse_args(argv)
    state: Path = args.state_dir.resolve()
    state.mkdir(parents=True, exist_ok=True)
    os.chmod(state, 0o700)
    tokens = write_tokens(state)
    services: list[Service] = []
    stopping = False

    def on_signal(signum: int, _frame: object) -> None:
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)
    try:
        exporter = start_exporter(state, args.profile, args.exporter_port, args.scenario)
        services.append(exporter)
        wait_ready(exporter)
        sock = exporter.socket
        print(
            f"""
Local Ascend node stack is up (profile {args.profile}); state in {state}

  dcmi-exporter   API    unix socket {sock}
                  ops    {exporter.ops_url}/metrics  /healthz  /readyz
                  log    {state / "dcmi-exporter.log"}
  device-plugin   not yet part of the stack (issue 3)
  fault-manager   not yet part of the stack (issue 4)

Try:
  curl -s --unix-socket {sock} http://x/v1/chips | python3 -m json.tool | head -40
  curl -sN --unix-socket {sock} http://x/v1/events
  curl -s --unix-socket {sock} -H 'Authorization: Bearer {tokens["sim"]}' \\
       -H 'Content-Type: application/json' -d '{{"code": "80E01801"}}' http://x/v1/sim/chips/0/faults

Ctrl-C stops everything.""",
            flush=True,
        )
        while not stopping:
            for svc in services:
                if svc.proc.poll() is not None:
                    print(f"{svc.name} exited with {svc.proc.returncode}; stopping the stack", file=sys.stderr)
                    return 1
            time.sleep(0.2)
        return 0
    finally:
        stop(services)
        print("local stack stopped", flush=True)


if __name__ == "__main__":
    sys.exit(main())
