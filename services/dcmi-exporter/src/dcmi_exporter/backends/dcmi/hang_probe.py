"""The dcmi backend's HangProbe: traffic from `hccn_tool`, CPU time from the host's /proc."""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Sequence
from pathlib import Path

from ascend_common.schemas.exporter import Chip

from dcmi_exporter.backends.base import CpuTimes
from dcmi_exporter.backends.dcmi import procstat
from dcmi_exporter.backends.dcmi.hccn import TIMEOUT_S, HccnTool, HccnTraffic

log = logging.getLogger(__name__)


class DcmiHangProbe:
    def __init__(
        self, hccn_tool: Path, host_proc: Path, timeout_s: float = TIMEOUT_S, tool: HccnTool | None = None
    ) -> None:
        # `tool`: a runner shared with the UB codes, so that the node runs at most its few tools at once.
        self._traffic = HccnTraffic(tool or HccnTool(hccn_tool, timeout_s=timeout_s))
        self.host_proc = host_proc
        # The reference parses /proc/self/auxv for AT_CLKTCK and silently zeroes every CPU delta
        # when that fails; sysconf is the C library's answer to the same question.
        self.clk_tck = os.sysconf("SC_CLK_TCK")
        self._warned_missing = False

    async def traffic(self, chip: Chip) -> tuple[int, int] | None:
        return await self._traffic.traffic(chip)

    async def cpu_times(self, pids: Sequence[int]) -> CpuTimes:
        # /proc reads are quick but are file I/O all the same: a thread, not the event loop.
        total, starts, missing = await asyncio.to_thread(procstat.read_times, self.host_proc, list(pids), self.clk_tck)
        if missing and not self._warned_missing:
            # A chip process the host's /proc does not know: most likely the pod lacks hostPID
            # (then every job's CPU looks still). Said once; the details go to debug.
            self._warned_missing = True
            log.warning(
                "a chip process is not in the host /proc, its CPU time counts as 0: does the exporter have hostPID?",
                extra={"pids": missing, "host_proc": str(self.host_proc)},
            )
        return CpuTimes(total, starts)
