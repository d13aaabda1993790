"""The cluster tier: a real single-node Kubernetes (1.20, built from Debian's source package), a
real containerd, and the stack's own image, deployed the way the README tells a user.

Outside CI a machine that cannot run the cluster (not root, no mount namespaces, ...) skips the
tier with the reason; with CI set that is a failure. The cluster is started once per session
and torn down at its end (ASCEND_KEEP_CLUSTER=1 keeps it up, for debugging).
"""

from __future__ import annotations

import os
import secrets
import shutil
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.cluster.node import (
    NAMESPACE,
    ROOT,
    Cluster,
    Exporter,
    parse_exports,
    ready,
    script,
)
from tests.support.realnode import image_archive, record
from tests.support.waiting import until_sync

OVERLAY = ROOT / "deploy" / "kustomize" / "overlays" / "simulated"
POOL_LABEL = "ascend.pool=simulated"
# The stack's host paths: made by the kubelet for the DaemonSets (/etc/enpu and /share_device by
# the soft-share component's, /user/mindx-dl/* by the 950 component's), or by the 950 drill where
# an operator's driver install and mapping file would be; removed when the tier ends, deepest first.
HOST_PATHS = (
    Path("/run/ascend"),
    Path("/var/lib/ascend"),
    Path("/user/restore/reset"),
    Path("/user/restore"),
    Path("/etc/enpu"),
    Path("/share_device"),
    Path("/user/mindx-dl/npu"),
    Path("/user/mindx-dl/ras"),
    Path("/user/mindx-dl"),
    Path("/usr/local/Ascend/driver/topo/950"),
    Path("/usr/local/Ascend/driver/topo"),
    Path("/usr/local/Ascend/driver"),
    Path("/usr/local/Ascend"),
)


_UP: list[Cluster] = []  # the session's cluster, for the failure report below


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    """A failed drill reports the end of each stack pod's log and of the kubelet's: CI keeps
    nothing else of a cluster it has torn down."""
    outcome = yield
    report = outcome.get_result()  # type: ignore[attr-defined]
    if report.failed and _UP and "/tests/cluster/" in item.path.as_posix():
        cluster = _UP[0]
        for pod in cluster.pods():
            name = pod["metadata"]["name"]
            text = cluster.kubectl("logs", "-n", NAMESPACE, name, "--all-containers", "--tail=40", check=False)
            report.sections.append((f"log of {name} (last 40 lines)", text))
        kubelet = cluster.kubelet_log().splitlines()[-40:]
        report.sections.append(("kubelet log (last 40 lines)", "\n".join(kubelet)))


@pytest.fixture(scope="session")
def cluster() -> Iterator[Cluster]:
    can = script("can-run", timeout=60)
    if can.returncode != 0:
        reason = f"the cluster tier cannot run here: {(can.stdout + can.stderr).strip()}"
        if os.environ.get("CI"):
            pytest.fail(reason + " (CI must run it)")
        pytest.skip(reason)
    existed = {p for p in HOST_PATHS if p.exists()}
    started = time.monotonic()
    up = script("up", timeout=2400)
    assert up.returncode == 0, f"cluster.sh up failed:\n{up.stdout}\n{up.stderr[-6000:]}"
    record("cluster_up_s", round(time.monotonic() - started, 1))
    _UP.append(Cluster(parse_exports(up.stdout)))
    yield _UP[0]
    _UP.clear()
    if os.environ.get("ASCEND_KEEP_CLUSTER"):
        return
    down = script("down", timeout=300)
    for path in HOST_PATHS:
        if path not in existed and path.exists():
            shutil.rmtree(path, ignore_errors=True)
    assert down.returncode == 0, f"cluster.sh down failed:\n{down.stdout}\n{down.stderr[-4000:]}"


@dataclass
class Stack:
    cluster: Cluster
    exporter: Exporter
    overlay: Path  # the user's overlay: the simulated one with real tokens


def write_user_overlay(directory: Path, overlay: Path) -> dict[str, str]:
    """An operator's overlay as the README describes it: the pool overlay plus the token Secret
    replaced from files kept out of git. Returns the tokens by scope."""
    # The plugin's token also holds `containers` (it tells the exporter who holds which chip).
    scopes = {"vnpu": "containers,vnpu", "reset": "reset", "sim": "sim"}
    tokens = {scope: secrets.token_hex(16) for scope in scopes}
    (directory / "tokens").write_text("".join(f"{token} {scopes[scope]}\n" for scope, token in tokens.items()))
    (directory / "device-plugin-token").write_text(f"{tokens['vnpu']} {scopes['vnpu']}\n")
    (directory / "fault-manager-token").write_text(f"{tokens['reset']} reset\n")
    (directory / "kustomization.yaml").write_text(
        "apiVersion: kustomize.config.k8s.io/v1beta1\n"
        "kind: Kustomization\n"
        "resources:\n"
        f"  - {os.path.relpath(overlay, directory)}\n"
        "secretGenerator:\n"
        "  - name: ascend-tokens\n"
        f"    namespace: {NAMESPACE}\n"
        "    behavior: replace\n"
        "    files: [tokens, device-plugin-token, fault-manager-token]\n"
        "    options:\n"
        "      disableNameSuffixHash: true\n"
    )
    return tokens


def stack_pods_ready(cluster: Cluster) -> list[dict[str, Any]] | None:
    pods = cluster.pods()
    by_app = {p["metadata"]["labels"].get("app.kubernetes.io/name") for p in pods if ready(p)}
    if by_app >= {"dcmi-exporter", "ascend-device-plugin", "fault-manager"} and all(
        ready(p) for p in pods if p["metadata"].get("deletionTimestamp") is None
    ):
        return pods
    return None


@pytest.fixture(scope="session")
def stack(cluster: Cluster, tmp_path_factory: pytest.TempPathFactory) -> Stack:
    """The simulated overlay applied to the node, its three DaemonSets Ready. Nothing to undo:
    the cluster's teardown wipes etcd and stops every pod."""
    archive = image_archive()
    imported = subprocess.run(
        ["ctr", "-n", "k8s.io", "images", "import", str(archive)], capture_output=True, text=True, timeout=600
    )
    assert imported.returncode == 0, imported.stderr
    overlay = tmp_path_factory.mktemp("user-overlay")
    tokens = write_user_overlay(overlay, OVERLAY)

    started = time.monotonic()
    cluster.kubectl("label", "node", cluster.node, POOL_LABEL, "--overwrite")
    cluster.kubectl("apply", "-k", str(overlay), timeout=120)
    until_sync(lambda: stack_pods_ready(cluster), 180, "the three DaemonSets' pods Running and Ready", interval=0.5)
    record("stack_ready_after_apply_s", round(time.monotonic() - started, 1))
    return Stack(cluster=cluster, exporter=Exporter(sim_token=tokens["sim"]), overlay=overlay)
