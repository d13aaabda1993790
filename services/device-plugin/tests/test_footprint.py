"""The plugin's resident memory is mostly the code it loads: what it must not load at start-up."""

from __future__ import annotations

import json
import subprocess
import sys

# Loaded by `import httpx` (its CLI) and by the __init__ of kubernetes and of its config and utils
# packages unless ascend_common.adapters.lazy_packages keeps them out; none of them serves the plugin.
# The kubeconfig loader (requests, oauthlib, PyYAML) is loaded for a kubeconfig only: not here,
# where the apiserver is a URL, as not in a pod with its service account.
NOT_LOADED = (
    "click", "rich", "pygments",
    "kubernetes.dynamic", "kubernetes.stream", "kubernetes.watch", "kubernetes.leaderelection",
    "kubernetes.informer", "kubernetes_validate", "jsonschema", "websocket",
    "kubernetes.config.kube_config", "kubernetes.utils.create_from_yaml", "yaml", "requests", "oauthlib",
    "charset_normalizer",
)  # fmt: skip


def test_the_plugin_loads_no_library_code_it_does_not_run() -> None:
    code = (
        "import json, sys, ascend_device_plugin.cli, ascend_device_plugin.app, ascend_device_plugin.kube\n"
        "from ascend_common.adapters.kube.config import build_api_client\n"
        "build_api_client('http://127.0.0.1:1')\n"
        "print(json.dumps([m for m, v in sys.modules.items() if v is not None]))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60)
    loaded = json.loads(out.stdout)
    assert "kubernetes.client" in loaded and "httpx" in loaded
    strays = sorted(m for m in loaded if any(m == name or m.startswith(name + ".") for name in NOT_LOADED))
    assert strays == []
