"""A service's resident memory is mostly the code it loads: what the two Kubernetes-facing services must
not load at start-up (ascend_common.adapters.lazy_packages, the lazy kubeconfig loader)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

# Loaded by `import httpx` (its CLI) and by the __init__ of kubernetes and of its config and utils
# packages unless lazy_packages keeps them out; none of them serves a node service.
NEVER = (
    "click", "rich", "pygments",
    "kubernetes.dynamic", "kubernetes.stream", "kubernetes.watch", "kubernetes.leaderelection",
    "kubernetes.informer", "kubernetes_validate", "jsonschema", "websocket", "kubernetes.utils.create_from_yaml",
)  # fmt: skip
# The kubeconfig loader: loaded for a kubeconfig only, never with a URL or in a pod with its service account.
KUBECONFIG_ONLY = ("kubernetes.config.kube_config", "yaml", "requests", "oauthlib", "charset_normalizer")
SERVICES = {
    "device-plugin": "ascend_device_plugin.cli, ascend_device_plugin.app, ascend_device_plugin.kube",
    "fault-manager": "fault_manager.cli, fault_manager.app",
}
# What a service loads of NEVER for a library it does use: uvicorn (every service's HTTP servers) imports
# its own command line, click, at import.
NEEDED_BY = {"fault-manager": ("click",), "device-plugin": ("click",)}


def loaded_modules(service: str, source: str) -> list[str]:
    code = (
        f"import json, sys, {SERVICES[service]}\n"
        "from ascend_common.adapters.kube.config import build_api_client\n"
        f"build_api_client({source})\n"
        "print(json.dumps([m for m, v in sys.modules.items() if v is not None]))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60)
    loaded: list[str] = json.loads(out.stdout)
    assert "kubernetes.client" in loaded
    return loaded


def strays(loaded: list[str], names: tuple[str, ...], service: str) -> list[str]:
    names = tuple(n for n in names if n not in NEEDED_BY.get(service, ()))
    return sorted(m for m in loaded if any(m == name or m.startswith(name + ".") for name in names))


@pytest.mark.parametrize("service", SERVICES)
def test_a_service_with_an_apiserver_url_loads_no_library_code_it_does_not_run(service: str) -> None:
    assert strays(loaded_modules(service, "'http://127.0.0.1:1'"), NEVER + KUBECONFIG_ONLY, service) == []


@pytest.mark.parametrize("service", SERVICES)
def test_a_kubeconfig_loads_its_loader_and_nothing_more(service: str, tmp_path: Path) -> None:
    kubeconfig = tmp_path / "config"
    kubeconfig.write_text(
        json.dumps({
            "apiVersion": "v1", "kind": "Config", "current-context": "c",
            "clusters": [{"name": "k", "cluster": {"server": "http://127.0.0.1:1"}}],
            "contexts": [{"name": "c", "context": {"cluster": "k", "user": "u"}}],
            "users": [{"name": "u", "user": {"token": "t"}}],
        })
    )  # fmt: skip
    loaded = loaded_modules(service, f"kubeconfig={str(kubeconfig)!r}")
    assert "kubernetes.config.kube_config" in loaded
    assert strays(loaded, NEVER, service) == []
