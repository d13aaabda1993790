"""`fault-manager`: flags (and FAULT_MANAGER_* variables) -> a running fault-manager."""

from __future__ import annotations

import asyncio
import logging
import sys
from collections.abc import Sequence

from ascend_common.settings import prepare

from fault_manager.settings import FaultManagerSettings


def main(argv: Sequence[str] | None = None) -> int:
    settings = prepare(FaultManagerSettings, argv, "fault-manager")
    if settings is None:
        return 2
    log = logging.getLogger("fault_manager")
    if not settings.node_name:
        log.error("cannot start", extra={"error": "--node-name is required (it names the device-info ConfigMap)"})
        return 2
    from ascend_common.faults import FaultPolicyError

    from fault_manager.app import Service, serve
    from fault_manager.store import StoreError

    try:
        service = Service.build(settings)
    except (FaultPolicyError, StoreError, OSError, ValueError) as exc:
        log.error("cannot start", extra={"error": str(exc)})
        return 2
    return asyncio.run(serve(service))


if __name__ == "__main__":
    sys.exit(main())
