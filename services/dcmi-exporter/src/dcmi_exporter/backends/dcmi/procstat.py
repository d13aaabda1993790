"""CPU time of host processes from `<proc>/<pid>/stat` (the reference's `getProcessCPUTime`)."""

from __future__ import annotations

import logging
from collections.abc import Iterable
from pathlib import Path
from typing import NamedTuple

log = logging.getLogger(__name__)

# Fields 14 and 15 of proc(5) (utime, stime), counted from the first field after the command
# name: the name is in parentheses and may itself hold spaces and ")".
UTIME_AFTER_COMM = 11
STIME_AFTER_COMM = 12
# Field 22 (starttime, clock ticks after boot): with the pid, it names one process, since the
# kernel reuses pids but never with the same start time.
STARTTIME_AFTER_COMM = 19


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


def start_time(text: str) -> int | None:
    """The process's start time in one stat line; None when the line does not hold it."""
    fields = text[text.rfind(")") + 1 :].split()
    try:
        return int(fields[STARTTIME_AFTER_COMM])
    except (IndexError, ValueError):
        return None


class ProcTimes(NamedTuple):
    seconds: int  # the sum over the pids
    starts: tuple[int | None, ...]  # each pid's start time, None when it could not be read
    missing: list[int]  # the pids that could not be read


def read_times(proc_root: Path, pids: Iterable[int], clk_tck: int) -> ProcTimes:
    """CPU seconds and start times of `pids`; blocking (call it in a thread). An unreadable pid
    adds 0, as in the reference (`collectCPUTime` skips it)."""
    total, missing = 0, []
    starts: list[int | None] = []
    for pid in pids:
        try:
            text = (proc_root / str(pid) / "stat").read_text(errors="replace")
            total += parse(text, clk_tck)
        except (OSError, ValueError) as exc:
            missing.append(pid)
            starts.append(None)
            log.debug("no CPU time for a chip process", extra={"pid": pid, "error": str(exc)})
        else:
            starts.append(start_time(text))
    return ProcTimes(total, tuple(starts), missing)


def cpu_seconds(proc_root: Path, pids: Iterable[int], clk_tck: int) -> tuple[int, list[int]]:
    """The sum over `pids`, and the pids that could not be read (`read_times`)."""
    times = read_times(proc_root, pids, clk_tck)
    return times.seconds, times.missing
