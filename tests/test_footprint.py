"""A service's resident memory is mostly the code it loads: which service loads the Kubernetes client
(and gRPC), checked in fresh interpreters as the services start.

The Kubernetes services load the official client as its authors intend it (`kubernetes.aio`, which
brings the whole package); the checks here are on what must stay out: the exporter loads neither
the Kubernetes client nor gRPC, and a plugin without a cluster (--kube offline) no Kubernetes client.
(tests/test_boundaries.py checks the same on the import graph; this is what a process really loads.)
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

KUBERNETES = ("kubernetes", "aiohttp")
GRPC = ("grpc", "google.protobuf")
# What each service imports before it serves (its command line and its app).
SERVICES = {
    "dcmi-exporter": "dcmi_exporter.cli, dcmi_exporter.backends.sim",
    "device-plugin": "ascend_device_plugin.cli, ascend_device_plugin.app",
    "fault-manager": "fault_manager.cli, fault_manager.app",
}


def loaded_modules(service: str, then: str = "") -> list[str]:
    """The modules loaded after importing `service`'s modules and running `then` (Python, may await)."""
    code = (
        f"import asyncio, json, sys, {SERVICES[service]}\n"
        "async def then():\n"
        f"    {then or 'pass'}\n"
        "asyncio.run(then())\n"
        "print(json.dumps([m for m, v in sys.modules.items() if v is not None]))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60)
    loaded: list[str] = json.loads(out.stdout)
    return loaded


def of(loaded: list[str], packages: tuple[str, ...]) -> list[str]:
    return sorted(m for m in loaded if any(m == p or m.startswith(p + ".") for p in packages))


def test_the_exporter_loads_neither_kubernetes_nor_grpc() -> None:
    loaded = loaded_modules("dcmi-exporter")
    assert "dcmi_exporter.cli" in loaded
    assert of(loaded, KUBERNETES + GRPC) == []


def test_a_plugin_without_a_cluster_loads_no_kubernetes_client() -> None:
    """--kube offline: the bridge to the cluster, and the client with it, is imported only for --kube api."""
    assert of(loaded_modules("device-plugin"), KUBERNETES) == []


@pytest.mark.parametrize("service", ["device-plugin", "fault-manager"])
def test_a_service_with_a_kubeconfig_loads_the_asyncio_client(service: str, tmp_path: Path) -> None:
    kubeconfig = tmp_path / "config"
    kubeconfig.write_text(
        json.dumps({
            "apiVersion": "v1", "kind": "Config", "current-context": "c",
            "clusters": [{"name": "k", "cluster": {"server": "http://127.0.0.1:1"}}],
            "contexts": [{"name": "c", "context": {"cluster": "k", "user": "u"}}],
            "users": [{"name": "u", "user": {"token": "t"}}],
        })
    )  # fmt: skip
    loaded = loaded_modules(
        service,
        "from ascend_common.adapters.kube.config import build_api_client; "
        f"await (await build_api_client(kubeconfig={str(kubeconfig)!r})).close()",
    )
    assert {"kubernetes.aio.client", "kubernetes.aio.config.kube_config", "aiohttp"} <= set(loaded)
