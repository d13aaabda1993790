"""The sim backend's HangProbe, UbPortsProbe and RoceLinkProbe: traffic, CPU time, 950 ports and the RoCE
link from the simulator's state."""

from __future__ import annotations

from collections.abc import Sequence

from ascend_common.schemas.exporter import Chip, UbPorts

from dcmi_exporter.backends.base import CpuTimes, UbPortLink, UbPortOptical, UbPortStat
from dcmi_exporter.backends.sim.backend import SimBackend


class SimHangProbe:
    def __init__(self, backend: SimBackend) -> None:
        self.backend = backend

    async def traffic(self, chip: Chip) -> tuple[int, int] | None:
        # A short lock, no I/O: no thread needed.
        return self.backend.traffic(chip.logic_id)

    async def cpu_times(self, pids: Sequence[int]) -> CpuTimes:
        return CpuTimes(self.backend.cpu_seconds(pids), self.backend.start_times(pids))


class SimUbPortsProbe:
    def __init__(self, backend: SimBackend) -> None:
        self.backend = backend

    async def ub_ports(self, chip: Chip) -> UbPorts:
        return self.backend.ub_ports(chip.logic_id)


class SimNetStats:
    """The RoCE / MAC counters (`NetStatsProbe`) from the simulator's traffic."""

    def __init__(self, backend: SimBackend) -> None:
        self.backend = backend

    async def net_stats(self, chip: Chip) -> dict[str, int] | None:
        return self.backend.net_stats(chip.logic_id)

    async def optical(self, chip: Chip) -> dict[str, float] | None:
        return self.backend.optical(chip.logic_id)

    async def link(self, chip: Chip) -> dict[str, float] | None:
        return self.backend.link(chip.logic_id)

    async def ub_stats(self, chip: Chip) -> list[UbPortStat] | None:
        return self.backend.ub_stats(chip.logic_id)

    async def ub_links(self, chip: Chip) -> list[UbPortLink] | None:
        return self.backend.ub_links(chip.logic_id)

    async def ub_optical(self, chip: Chip) -> list[UbPortOptical] | None:
        return self.backend.ub_optical(chip.logic_id)


class SimRoceLinkProbe:
    def __init__(self, backend: SimBackend) -> None:
        self.backend = backend

    async def link_status(self, chip: Chip) -> str:
        return self.backend.link_status(chip.logic_id)
