"""Local mode: the node stack on one machine with simulated chips and no cluster.

`./dev local [--profile 910b-8] [--state-dir .state/local]` starts the exporter (sim), the
fault-manager (offline: its ConfigMaps go to files and its API), the device-plugin (offline:
no pod cache, no patches; verdicts from the fault-manager) and a kubelet stand-in that prints
what the kubelet sees, as real processes; prints where each API is; and stops them all on
Ctrl-C, leaving no process and no socket behind. A development tool, never part of a service.
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
from dcmi_exporter.backends.sim.profiles import PROFILES

ROOT = Path(__file__).resolve().parents[1]


@dataclass
class Service:
    name: str
    proc: subprocess.Popen[bytes]
    socket: Path
    ops_url: str | None  # None: no /readyz (the kubelet stand-in)


PLUGIN_SCOPES = "containers,vnpu"


def write_tokens(state: Path) -> dict[str, str]:
    """Fresh tokens per run, one per scope holder, in a 0600 file."""
    tokens = {"reset": secrets.token_hex(16), "vnpu": secrets.token_hex(16), "sim": secrets.token_hex(16)}
    path = state / "tokens"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write("# local mode tokens: <token> <scopes>\n")
        for scope, token in tokens.items():
            f.write(f"{token} {PLUGIN_SCOPES if scope == 'vnpu' else scope}\n")
    # The plugin's own file: its `vnpu` token first (it uses the first token of its file), which also
    # tells the exporter who holds which chip (`containers`).
    plugin = state / "plugin-token"
    fd = os.open(plugin, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(f"{tokens['vnpu']} {PLUGIN_SCOPES}\n")
    return tokens


def spawn(state: Path, name: str, module_args: list[str], to_terminal: bool = False) -> subprocess.Popen[bytes]:
    """A service as its own process (own session: Ctrl-C reaches us, and we stop it in order)."""
    log = (state / f"{name}.log").open("ab")
    return subprocess.Popen(
        [sys.executable, "-m", *module_args],
        stdout=None if to_terminal else log,
        stderr=log,
        cwd=ROOT,
        start_new_session=True,
    )


def wait_ready(svc: Service, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if svc.proc.poll() is not None:
            raise SystemExit(f"{svc.name} exited with {svc.proc.returncode}; see its log")
        if svc.ops_url is None:
            if svc.socket.exists():
                return
        else:
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
        "dcmi_exporter.cli", "--backend", "sim", "--profile", profile,
        "--socket", str(sock), "--metrics-addr", f"127.0.0.1:{port}", "--token-file", str(state / "tokens"),
    ]  # fmt: skip
    if scenario is not None:
        args += ["--scenario", str(scenario)]
    return Service("dcmi-exporter", spawn(state, "dcmi-exporter", args), sock, f"http://127.0.0.1:{port}")


def start_fault_manager(state: Path, exporter: Service, port: int) -> Service:
    sock = state / "fault-manager.sock"
    args = [
        "fault_manager.cli", "--exporter-socket", str(exporter.socket), "--db", str(state / "fault-manager.db"),
        "--socket", str(sock), "--node-name", "local", "--kube", "offline", "--state-dir", str(state / "fault-manager"),
        "--metrics-addr", f"127.0.0.1:{port}",
    ]  # fmt: skip
    return Service("fault-manager", spawn(state, "fault-manager", args), sock, f"http://127.0.0.1:{port}")


def start_kubelet(state: Path, plugin_dir: Path) -> Service:
    proc = spawn(state, "kubelet-standin", ["tools.kubelet_standin", "--plugin-dir", str(plugin_dir)], to_terminal=True)
    return Service("kubelet stand-in", proc, plugin_dir / "kubelet.sock", None)


def start_plugin(state: Path, exporter: Service, fault_manager: Service, plugin_dir: Path, port: int) -> Service:
    args = [
        "ascend_device_plugin.cli", "--exporter-socket", str(exporter.socket), "--plugin-dir", str(plugin_dir),
        "--fault-manager-socket", str(fault_manager.socket),
        "--node-name", "local", "--kube", "offline", "--metrics-addr", f"127.0.0.1:{port}",
        "--token-file", str(state / "plugin-token"),
        # Local files belong to whoever runs this, not to root as on a node.
        "--require-root-owned", "false",
    ]  # fmt: skip
    return Service("ascend-device-plugin", spawn(state, "device-plugin", args), plugin_dir, f"http://127.0.0.1:{port}")


def stop(services: list[Service]) -> None:
    for svc in reversed(services):
        if svc.proc.poll() is None:
            svc.proc.send_signal(signal.SIGTERM)
        try:
            svc.proc.wait(10)
        except subprocess.TimeoutExpired:
            svc.proc.kill()
            svc.proc.wait(5)
        if svc.socket.is_socket():
            svc.socket.unlink()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="./dev local", description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--profile", choices=sorted(PROFILES), default="910b-8", help="simulated node (default 910b-8)")
    parser.add_argument("--state-dir", type=Path, default=ROOT / ".state" / "local", help="sockets, logs, tokens")
    parser.add_argument("--exporter-port", type=int, default=9101, help="exporter /metrics, /healthz, /readyz")
    parser.add_argument("--plugin-port", type=int, default=9102, help="device-plugin /metrics, /healthz, /readyz")
    parser.add_argument(
        "--fault-manager-port", type=int, default=9103, help="fault-manager /metrics, /healthz, /readyz"
    )
    parser.add_argument("--scenario", type=Path, help="a scripted fault scenario (YAML) for the simulator")
    args = parser.parse_args(argv)
    state: Path = args.state_dir.resolve()
    state.mkdir(parents=True, exist_ok=True)
    os.chmod(state, 0o700)
    plugin_dir = state / "device-plugins"
    plugin_dir.mkdir(exist_ok=True)
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
        fault_manager = start_fault_manager(state, exporter, args.fault_manager_port)
        services.append(fault_manager)
        wait_ready(fault_manager)
        kubelet = start_kubelet(state, plugin_dir)
        services.append(kubelet)
        wait_ready(kubelet)
        plugin = start_plugin(state, exporter, fault_manager, plugin_dir, args.plugin_port)
        services.append(plugin)
        wait_ready(plugin)
        sock = exporter.socket
        print(
            f"""
Local Ascend node stack is up (profile {args.profile}); state in {state}

  dcmi-exporter         API  unix socket {sock}
                        ops  {exporter.ops_url}/metrics  /healthz  /readyz
  ascend-device-plugin  gRPC {plugin_dir}/<resource>.sock (registered with the stand-in)
                        ops  {plugin.ops_url}/metrics  /healthz  /readyz
  fault-manager         API  unix socket {fault_manager.socket}  (/v1/verdicts, /v1/faults, /v1/kube/objects)
                        ops  {fault_manager.ops_url}/metrics  /healthz  /readyz
                        ConfigMaps it would write: {state}/fault-manager/kube/configmaps/
  kubelet stand-in      {plugin_dir}/kubelet.sock; prints below what the kubelet sees
  logs                  {state}/*.log

Try:
  export ASCENDCTL_EXPORTER_SOCKET={sock} ASCENDCTL_FAULT_MANAGER_SOCKET={fault_manager.socket}
  .venv/bin/ascendctl chips;  .venv/bin/ascendctl verdicts;  .venv/bin/ascendctl deviceinfo
  .venv/bin/ascendctl sim inject --chip 0 --code 8C1FA006 --token-file {state / "tokens"}
  curl -s --unix-socket {sock} http://x/v1/chips | python3 -m json.tool | head -40
  curl -sN --unix-socket {sock} http://x/v1/events
  curl -s --unix-socket {fault_manager.socket} http://x/v1/verdicts | python3 -m json.tool | head -30
  curl -s --unix-socket {sock} -H 'Authorization: Bearer {tokens["sim"]}' \\
       -H 'Content-Type: application/json' -d '{{"code": "8C1FA006"}}' http://x/v1/sim/chips/0/faults

Ctrl-C stops everything.
""",
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
