"""`ascend-device-plugin`: flags (and ASCEND_DEVICE_PLUGIN_* variables) -> a running plugin."""

from __future__ import annotations

import asyncio
import faulthandler
import logging
import signal
import sys
from collections.abc import Sequence

from ascend_common.logs import setup_logging
from ascend_common.settings import load_settings
from ascend_common.tokens import TokenFileError
from pydantic import ValidationError

from ascend_device_plugin.settings import PluginSettings


def main(argv: Sequence[str] | None = None) -> int:
    try:
        settings = load_settings(PluginSettings, sys.argv[1:] if argv is None else argv, prog="ascend-device-plugin")
    except ValidationError as exc:
        print(f"ascend-device-plugin: invalid settings:\n{exc}", file=sys.stderr)
        return 2
    setup_logging("ascend-device-plugin", settings.log_level)
    faulthandler.register(signal.SIGUSR1, all_threads=True)
    log = logging.getLogger("ascend_device_plugin")
    if settings.kube == "api" and not settings.node_name:
        log.error("cannot start", extra={"error": "--node-name is required with --kube api"})
        return 2
    from ascend_device_plugin.app import DevicePlugin, serve
    from ascend_device_plugin.registrar import UnsafePath

    try:
        plugin = DevicePlugin(settings)
        asyncio.run(serve(plugin))
    except (TokenFileError, UnsafePath, OSError) as exc:
        log.error("cannot start", extra={"error": str(exc)})
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
