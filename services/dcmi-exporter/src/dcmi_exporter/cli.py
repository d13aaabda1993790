"""`dcmi-exporter`: flags (and DCMI_EXPORTER_* variables) -> a running exporter."""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Sequence

from ascend_common.adapters.lifecycle import run_service
from ascend_common.adapters.settings import prepare
from ascend_common.tokens import TokenFileError

from dcmi_exporter.runtime import Exporter
from dcmi_exporter.server import serve
from dcmi_exporter.settings import ExporterSettings


def main(argv: Sequence[str] | None = None) -> int:
    settings = prepare(ExporterSettings, argv, "dcmi-exporter")
    if settings is None:
        return 2
    try:
        exporter = Exporter.from_settings(settings)
    except (TokenFileError, OSError, ValueError, KeyError) as exc:
        logging.getLogger("dcmi_exporter").error("cannot start", extra={"error": str(exc)})
        return 2
    status = run_service(serve(exporter))
    if exporter.guard.hung_keys():
        # A library call that never returns would block the interpreter's exit, which joins
        # every pool thread: everything is closed, so leave without waiting for it.
        logging.getLogger("dcmi_exporter").warning("exiting with abandoned library calls")
        logging.shutdown()
        os._exit(status)
    return status


if __name__ == "__main__":
    sys.exit(main())
