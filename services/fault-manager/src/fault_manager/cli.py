"""`fault-manager`: flags (and FAULT_MANAGER_* variables) -> a running fault-manager;
`fault-manager replay`: the same policy engine over a timeline or a node's database, offline."""

from __future__ import annotations

import argparse
import json
import logging
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TextIO

from ascend_common.adapters.lifecycle import run_service
from ascend_common.adapters.settings import prepare

from fault_manager.settings import FaultManagerSettings


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if args[:1] == ["replay"]:
        return replay_main(args[1:])
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

    async def run() -> int:
        # One event loop for both: the Kubernetes client's loader is a coroutine, and its aiohttp
        # session belongs to the loop that uses it.
        try:
            service = await Service.build(settings)
        except (FaultPolicyError, StoreError, OSError, ValueError) as exc:
            log.error("cannot start", extra={"error": str(exc)})
            return 2
        return await serve(service)

    return run_service(run())


REPLAY_USAGE = """fault-manager replay [--policy-dir DIR] TIMELINE
       fault-manager replay --db PATH [--policy-dir DIR]"""


def replay_main(argv: Sequence[str], out: TextIO | None = None, stdin: TextIO | None = None) -> int:
    """Exit 0 with the answers on stdout; 2 with one line on stderr for a bad line, file or policy."""
    parser = argparse.ArgumentParser(
        prog="fault-manager replay",
        usage=REPLAY_USAGE,
        description="Replay fault events through the fault-manager's policy engine. A TIMELINE is JSON lines "
        '(- for stdin): events {"t", "chip", "code", "assertion", "severity"?} and queries {"t", "query": true}; '
        "each query prints every chip's level, network level, health, isolation and reasons. With --db, a "
        "node's stored history is replayed and every chip whose outcome differs from the stored one is printed.",
    )
    parser.add_argument("timeline", nargs="?", help="JSON-lines file, or - for standard input")
    parser.add_argument("--policy-dir", type=Path, help="a directory with faultCode.json / faultCustomization.json")
    parser.add_argument("--db", type=Path, help="a fault-manager SQLite file (read; migrated if older)")
    parser.add_argument("--now", type=float, help="with --db: evaluate at this Unix time (default: now)")
    ns = parser.parse_args(argv)
    out = out or sys.stdout
    if (ns.timeline is None) == (ns.db is None):
        parser.print_usage(sys.stderr)
        print("fault-manager replay: give either a TIMELINE or --db", file=sys.stderr)
        return 2
    from ascend_common.faults import FaultPolicyError

    from fault_manager.policy.keeper import build, read_policy_dir
    from fault_manager.reactor.replay import Replayer, TimelineError, compare_store, parse_timeline

    try:
        if ns.policy_dir is not None and not ns.policy_dir.is_dir():
            raise FaultPolicyError(f"--policy-dir {ns.policy_dir} is not a directory")
        policy = build(read_policy_dir(ns.policy_dir))
    except (FaultPolicyError, OSError, UnicodeDecodeError) as exc:
        print(f"fault-manager replay: policy: {exc}", file=sys.stderr)
        return 2
    try:
        if ns.db is not None:
            if not ns.db.is_file():
                raise OSError(f"{ns.db}: no such database")
            now = time.time() if ns.now is None else ns.now
            for line in compare_store(ns.db, policy, now):
                print(json.dumps(line, separators=(",", ":")), file=out)
            return 0
        source = (stdin or sys.stdin) if ns.timeline == "-" else open(ns.timeline, encoding="utf-8")  # noqa: SIM115
        with source:
            for answer in Replayer(policy).run(parse_timeline(source)):
                print(json.dumps(answer, separators=(",", ":")), file=out)
    except TimelineError as exc:
        print(f"fault-manager replay: {ns.timeline}: {exc}", file=sys.stderr)
        return 2
    except (OSError, UnicodeDecodeError) as exc:
        print(f"fault-manager replay: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
