"""`ascend-device-plugin`: flags (and ASCEND_DEVICE_PLUGIN_* variables) -> a running plugin."""

from __future__ import annotations

import logging
import sys
from collections.abc import Sequence

from ascend_common.adapters.lifecycle import run_service
from ascend_common.adapters.settings import prepare
from ascend_common.tokens import TokenFileError

from ascend_device_plugin.settings import PluginSettings


def main(argv: Sequence[str] | None = None) -> int:
    settings = prepare(PluginSettings, argv, "ascend-device-plugin")
    if settings is None:
        return 2
    log = logging.getLogger("ascend_device_plugin")
    if settings.kube == "api" and not settings.node_name:
        log.error("cannot start", extra={"error": "--node-name is required with --kube api"})
        return 2
    from ascend_device_plugin.app import DevicePlugin, SoftShareRefused, serve
    from ascend_device_plugin.kubelet.registrar import UnsafePath

    try:
        plugin = DevicePlugin.build(settings)
        return run_service(serve(plugin))
    except (TokenFileError, UnsafePath, OSError, SoftShareRefused) as exc:
        log.error("cannot start", extra={"error": str(exc)})
        return 2


if __name__ == "__main__":
    sys.exit(main())
