"""CPU time of host processes from `<proc>/<pid>/stat` (the reference's `getProcessCPUTime`)."""

from __future__ import annotations

import logging
from collections.abc import Iterable
from pathlib import Path

log = logging.getLogger(__name__)

# Fields 14 and 15 of proc(5) (utime, stime), counted from the first field after the command
# name: the name is in parentheses and may itself hold spaces and ")".
UTIME_AFTER_COMM = 11
STIME_AFTER_COMM = 12


def parse(text: str, clk_tck: int) -> int:
    """Whole seconds of CPU (user + system) in one stat line: floor((utime+stime)/CLK_TCK)."""
    if clk_tck <= 0:
        raise ValueError(f"invalid CLK_TCK {clk_tck}")
    end = text.rfind(")")
    if end < 0:
        raise ValueError("missing comm field")
    fields = text[end + 1 :].split()
    if len(fields) <= STIME_AFTER_COMM:
        raise ValueError(f"{len(fields)} fields after the command name, need {STIME_AFTER_COMM + 1}")
    return (int(fields[UTIME_AFTER_COMM]) + int(fields[STIME_AFTER_COMM])) // clk_tck


def cpu_seconds(proc_root: Path, pids: Iterable[int], clk_tck: int) -> tuple[int, list[int]]:
    """The sum over `pids`, and the pids that could not be read; blocking (call it in a thread).
    An unreadable pid adds 0, as in the reference (`collectCPUTime` skips it)."""
    total, missing = 0, []
    for pid in pids:
        try:
            total += parse((proc_root / str(pid) / "stat").read_text(errors="replace"), clk_tck)
        except (OSError, ValueError) as exc:
            missing.append(pid)
            log.debug("no CPU time for a chip process", extra={"pid": pid, "error": str(exc)})
    return total, missing
