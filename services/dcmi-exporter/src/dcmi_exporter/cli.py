"""`dcmi-exporter`: flags (and DCMI_EXPORTER_* variables) -> a running exporter."""

from __future__ import annotations

import asyncio
import faulthandler
import logging
import os
import signal
import sys
from collections.abc import Sequence

from ascend_common.logs import setup_logging
from ascend_common.settings import load_settings
from ascend_common.tokens import TokenFileError
from pydantic import ValidationError

from dcmi_exporter.runtime import Exporter
from dcmi_exporter.server import serve
from dcmi_exporter.settings import ExporterSettings


def main(argv: Sequence[str] | None = None) -> int:
    try:
        settings = load_settings(ExporterSettings, sys.argv[1:] if argv is None else argv, prog="dcmi-exporter")
    except ValidationError as exc:
        print(f"dcmi-exporter: invalid settings:\n{exc}", file=sys.stderr)
        return 2
    setup_logging("dcmi-exporter", settings.log_level)
    # `kill -USR1` dumps every thread's stack: the way to see which library call hangs.
    faulthandler.register(signal.SIGUSR1, all_threads=True)
    try:
        exporter = Exporter.from_settings(settings)
    except (TokenFileError, OSError, ValueError, KeyError) as exc:
        logging.getLogger("dcmi_exporter").error("cannot start", extra={"error": str(exc)})
        return 2
    asyncio.run(serve(exporter))
    if exporter.guard.hung_keys():
        # A library call that never returns would block the interpreter's exit, which joins
        # every pool thread: everything is closed, so leave without waiting for it.
        logging.getLogger("dcmi_exporter").warning("exiting with abandoned library calls")
        logging.shutdown()
        os._exit(0)
    return 0


if __name__ == "__main__":
    sys.exit(main())
