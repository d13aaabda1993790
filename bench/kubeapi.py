"""A real kube-apiserver 1.20 and its etcd, started by the benchmark (bench/fleet.py) and nothing else.

The binaries are the cluster tier's (tests/cluster/scripts/build-kubernetes.sh caches them under
~/.cache/ascend-node-stack/kubernetes/<version>/bin), etcd is Debian's `etcd-server`. Only etcd and
the API server run: no kubelet, no controllers, no scheduler; the benchmark creates the Node objects
itself. Everything (certificates, etcd's data, logs) lives in one work directory, on loopback and
on free ports, so it never meets the cluster tier's cluster.

Identities: a static token file. `admin` (system:masters) is the benchmark's; each node stack has
its own users (`fleet-fm-<i>`, `fleet-dp-<i>`, also system:masters, and in group `fleet`), and the
audit log records, at Metadata level, every request of group `fleet`: who asked what, when. The
API server's own `/metrics` (`apiserver_request_total`) counts everything, by verb and resource.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime
import json
import os
import re
import secrets
import shutil
import signal
import socket
import ssl
import subprocess
import time
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx
import psutil

KUBE_CACHE = Path.home() / ".cache" / "ascend-node-stack" / "kubernetes"
FLEET_GROUP = "fleet"
READY_TIMEOUT_S = 90.0

Json = dict[str, Any]
Key = tuple[str, str]  # (verb, resource) of apiserver_request_total


def kube_bin() -> Path | None:
    """The newest cached Kubernetes build's bin directory holding kube-apiserver, if any."""
    if not KUBE_CACHE.is_dir():
        return None
    found = sorted(d / "bin" for d in KUBE_CACHE.iterdir() if os.access(d / "bin" / "kube-apiserver", os.X_OK))
    return found[-1] if found else None


def cannot_run() -> str | None:
    """Why a real API server cannot be started here, or None."""
    if kube_bin() is None:
        return (
            f"no kube-apiserver under {KUBE_CACHE}/*/bin (tests/cluster/scripts/build-kubernetes.sh builds it, as root)"
        )
    for tool in ("etcd", "openssl"):
        if shutil.which(tool) is None:
            return f"no `{tool}` on PATH (Debian's {'etcd-server' if tool == 'etcd' else 'openssl'})"
    return None


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _openssl(*args: str) -> None:
    subprocess.run(["openssl", *args], check=True, capture_output=True)


def make_pki(pki: Path) -> None:
    """A CA, the API server's serving certificate for 127.0.0.1, the service-account key pair."""
    pki.mkdir(parents=True, exist_ok=True)
    ec = ("-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256")
    _openssl("genpkey", *ec, "-out", str(pki / "ca.key"))
    _openssl("req", "-x509", "-new", "-key", str(pki / "ca.key"), "-out", str(pki / "ca.crt"), "-days", "2",
             "-subj", "/CN=fleet-ca")  # fmt: skip
    _openssl("genpkey", *ec, "-out", str(pki / "apiserver.key"))
    ext = pki / "apiserver.ext"
    ext.write_text("subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n")
    csr = pki / "apiserver.csr"
    _openssl("req", "-new", "-key", str(pki / "apiserver.key"), "-subj", "/CN=kube-apiserver", "-out", str(csr))
    _openssl("x509", "-req", "-in", str(csr), "-CA", str(pki / "ca.crt"), "-CAkey", str(pki / "ca.key"),
             "-CAcreateserial", "-days", "2", "-extfile", str(ext), "-out", str(pki / "apiserver.crt"))  # fmt: skip
    _openssl("genpkey", "-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:2048", "-out", str(pki / "sa.key"))
    _openssl("pkey", "-in", str(pki / "sa.key"), "-pubout", "-out", str(pki / "sa.pub"))


AUDIT_POLICY = f"""apiVersion: audit.k8s.io/v1
kind: Policy
rules:
  - level: Metadata
    userGroups: [{FLEET_GROUP}]
  - level: None
"""


@dataclass(frozen=True)
class Request:
    """One audited request of a node stack."""

    at: float  # time.time() the server received it
    user: str
    verb: str  # get, list, watch, create, update, patch, delete
    resource: str
    stream: str  # path + selectors: the same watch/list across requests
    timeout_s: int | None  # a watch's timeoutSeconds
    code: int  # 0 while it has no response (an open watch that has sent nothing yet)


def _ts(text: str) -> float:
    return datetime.datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def parse_audit(lines: Iterable[str]) -> list[Request]:
    """One Request per audit ID, at the time the server received it (a watch's later stages are
    written only with its first byte, or when it ends), with the code of its last stage seen."""
    by_id: dict[str, Request] = {}
    for line in lines:
        try:
            ev = json.loads(line)
            at = _ts(ev["requestReceivedTimestamp"])
        except (ValueError, KeyError, TypeError):
            continue
        code = int((ev.get("responseStatus") or {}).get("code", 0))
        known = by_id.get(ev.get("auditID", ""))
        if known is not None:
            if code:
                by_id[ev["auditID"]] = dataclasses.replace(known, code=code)
            continue
        uri = urlsplit(ev.get("requestURI", ""))
        query = parse_qs(uri.query)
        selectors = "&".join(f"{k}={query[k][0]}" for k in ("fieldSelector", "labelSelector") if k in query)
        timeout = query.get("timeoutSeconds", [None])[0]
        by_id[ev.get("auditID", "")] = Request(
            at=at,
            user=(ev.get("user") or {}).get("username", ""),
            verb=ev.get("verb", ""),
            resource=(ev.get("objectRef") or {}).get("resource", ""),
            stream=uri.path + ("?" + selectors if selectors else ""),
            timeout_s=int(timeout) if timeout and timeout.isdigit() else None,
            code=code,
        )
    return sorted(by_id.values(), key=lambda r: r.at)


METRIC_RE = re.compile(r"^(?P<name>apiserver_\w+)\{(?P<labels>[^}]*)\} (?P<value>\S+)$")
LABEL_RE = re.compile(r'(\w+)="((?:[^"\\]|\\.)*)"')


def parse_request_total(text: str, metric: str = "apiserver_request_total") -> Counter[Key]:
    """A metric (apiserver_request_total, by default) summed over everything but verb and resource."""
    out: Counter[Key] = Counter()
    for line in text.splitlines():
        m = METRIC_RE.match(line)
        if m is None or m.group("name") != metric:
            continue
        labels = dict(LABEL_RE.findall(m.group("labels")))
        out[(labels.get("verb", ""), labels.get("resource", ""))] += int(float(m.group("value")))
    return out


@dataclass
class KubeApiServer:
    """etcd + kube-apiserver in `workdir`; `users`: the node stacks' user names (tokens made here)."""

    workdir: Path
    users: list[str]
    tokens: dict[str, str] = field(default_factory=dict)
    port: int = 0
    _etcd: subprocess.Popen[bytes] | None = None
    _api: subprocess.Popen[bytes] | None = None
    _api_args: list[str] = field(default_factory=list)
    mine: Counter[Key] = field(default_factory=Counter)  # the benchmark's own requests (verb, resource)

    @property
    def url(self) -> str:
        return f"https://127.0.0.1:{self.port}"

    @property
    def ca(self) -> Path:
        return self.workdir / "pki" / "ca.crt"

    @property
    def audit_log(self) -> Path:
        return self.workdir / "audit.log"

    @property
    def pid(self) -> int:
        assert self._api is not None
        return self._api.pid

    def start(self) -> KubeApiServer:
        binary = kube_bin()
        if binary is None:
            raise RuntimeError(cannot_run() or "no kube-apiserver")
        w = self.workdir
        w.mkdir(parents=True, exist_ok=True)
        make_pki(w / "pki")
        self.tokens = {u: secrets.token_hex(16) for u in ["admin", *self.users]}
        lines = [f'{self.tokens["admin"]},admin,admin,"system:masters"']
        lines += [f'{self.tokens[u]},{u},{u},"system:masters,{FLEET_GROUP}"' for u in self.users]
        (w / "tokens.csv").write_text("\n".join(lines) + "\n")
        (w / "audit-policy.yaml").write_text(AUDIT_POLICY)
        client, peer = free_port(), free_port()
        etcd_url, peer_url = f"http://127.0.0.1:{client}", f"http://127.0.0.1:{peer}"
        self._etcd = self._spawn("etcd", [
            "etcd", "--name", "fleet", "--data-dir", str(w / "etcd"), "--logger", "zap",
            "--listen-client-urls", etcd_url, "--advertise-client-urls", etcd_url,
            "--listen-peer-urls", peer_url, "--initial-advertise-peer-urls", peer_url,
            "--initial-cluster", f"fleet={peer_url}",
        ])  # fmt: skip
        self.port = free_port()
        pki = w / "pki"
        self._api_args = [
            str(binary / "kube-apiserver"),
            f"--etcd-servers={etcd_url}",
            "--bind-address=127.0.0.1", f"--secure-port={self.port}",
            f"--tls-cert-file={pki / 'apiserver.crt'}", f"--tls-private-key-file={pki / 'apiserver.key'}",
            f"--token-auth-file={w / 'tokens.csv'}",
            "--authorization-mode=Node,RBAC",
            "--service-cluster-ip-range=10.96.0.0/12",
            f"--service-account-key-file={pki / 'sa.pub'}",
            f"--service-account-signing-key-file={pki / 'sa.key'}",
            "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
            f"--audit-policy-file={w / 'audit-policy.yaml'}", f"--audit-log-path={self.audit_log}",
        ]  # fmt: skip
        self._start_api()
        return self

    def _spawn(self, name: str, args: list[str]) -> subprocess.Popen[bytes]:
        log = (self.workdir / f"{name}.log").open("ab")
        with log:
            return subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                    start_new_session=True)  # fmt: skip

    def _start_api(self) -> None:
        self._api = self._spawn("kube-apiserver", self._api_args)
        self.wait_ready()

    def wait_ready(self, timeout: float = READY_TIMEOUT_S) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self._api is not None and self._api.poll() is not None:
                raise RuntimeError(f"kube-apiserver exited with {self._api.returncode}: {self.log_tail()}")
            with contextlib.suppress(httpx.HTTPError):
                if self.client().get("/readyz", timeout=2).status_code == 200:
                    return
            time.sleep(0.1)
        raise RuntimeError(f"kube-apiserver not ready within {timeout:.0f} s: {self.log_tail()}")

    def log_tail(self, name: str = "kube-apiserver", chars: int = 3000) -> str:
        path = self.workdir / f"{name}.log"
        return path.read_text(errors="replace")[-chars:] if path.exists() else ""

    def stop_api(self) -> None:
        _stop(self._api)
        self._api = None

    def restart_api(self) -> tuple[float, float, float]:
        """Stop the API server and start it with the same arguments, port and etcd: when it had
        stopped, when it was started again, when it answered /readyz (time.time())."""
        self.stop_api()
        stopped = time.time()
        self._start_api()
        return stopped, stopped, time.time()

    def stop(self) -> None:
        self.stop_api()
        _stop(self._etcd)
        self._etcd = None

    def __enter__(self) -> KubeApiServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- requests ---------------------------------------------------------------------------

    def client(self) -> httpx.Client:
        return httpx.Client(
            base_url=self.url, verify=ssl.create_default_context(cafile=str(self.ca)), timeout=10,
            headers={"Authorization": f"Bearer {self.tokens['admin']}"},
        )  # fmt: skip

    def request(self, method: str, path: str, *, verb: str, resource: str, **kw: Any) -> httpx.Response:
        """A request of the benchmark's own, counted so that it can be taken off the node stacks' figures."""
        self.mine[(verb, resource)] += 1
        with self.client() as c:
            return c.request(method, path, **kw)

    def create_node(self, name: str) -> None:
        body = {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
        }
        r = self.request("POST", "/api/v1/nodes", verb="POST", resource="nodes", json=body)
        if r.status_code not in (201, 409):
            raise RuntimeError(f"create node {name}: {r.status_code} {r.text[:300]}")

    def request_total(self) -> Counter[Key]:
        with self.client() as c:
            return parse_request_total(c.get("/metrics").text)

    def open_watches(self) -> Counter[str]:
        """Watches open now by resource, on the server's own gauge (its internal clients' included)."""
        with self.client() as c:
            gauge = parse_request_total(c.get("/metrics").text, "apiserver_longrunning_gauge")
        return Counter({res: v for (verb, res), v in gauge.items() if verb == "WATCH"})

    def cpu_s(self) -> float:
        t = psutil.Process(self.pid).cpu_times()
        return float(t.user + t.system)

    def rss_mb(self) -> float:
        return float(psutil.Process(self.pid).memory_info().rss / 2**20)

    def audit_size(self) -> int:
        return self.audit_log.stat().st_size if self.audit_log.exists() else 0

    def audited(self, since: int = 0) -> list[Request]:
        """The node stacks' requests in the audit log from byte offset `since`."""
        if not self.audit_log.exists():
            return []
        with self.audit_log.open("rb") as f:
            f.seek(since)
            data = f.read()
        cut = data.rfind(b"\n") + 1  # a line being written is left for the next read
        return parse_audit(data[:cut].decode(errors="replace").splitlines())

    def kubeconfig(self, path: Path, user: str) -> Path:
        config = {
            "apiVersion": "v1", "kind": "Config", "current-context": "fleet",
            "clusters": [{"name": "fleet", "cluster": {"server": self.url, "certificate-authority": str(self.ca)}}],
            "users": [{"name": user, "user": {"token": self.tokens[user]}}],
            "contexts": [{"name": "fleet", "context": {"cluster": "fleet", "user": user}}],
        }  # fmt: skip
        path.write_text(json.dumps(config))
        return path


def _stop(proc: subprocess.Popen[bytes] | None) -> None:
    if proc is None or proc.poll() is not None:
        return
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(15)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(5)
