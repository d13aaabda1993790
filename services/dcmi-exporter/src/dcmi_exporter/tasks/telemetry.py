"""The slow sources behind npu-exporter's extra metric families, each sampled in a task of its own.

A scrape never calls a library or runs a tool: it reads the last samples kept here. Two loops, each
on its own period, so one slow source holds back only its own families:

- chip telemetry (voltage, AI-core frequency, vector / cube / overall utilisation, HBM ECC, PCIe
  bandwidth): libdcmi calls through a call pool of their own, each time-bounded, so a hung call
  costs this chip's telemetry and never a thread or a key of the poller's pool;
- RoCE / MAC counters, optical module, link, and the 950's UB port counters: `hccn_tool` through
  the shared runner (its timeout kills a stuck tool).

A chip whose read fails this round loses its sample (its series disappear) rather than showing
stale numbers; npu-exporter would keep serving the last value it had.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import TypeVar

from ascend_common.adapters.lifecycle import TaskScope
from ascend_common.chips import ChipAddress
from ascend_common.schemas.exporter import Chip, ChipState

from dcmi_exporter.backends.base import ChipTelemetry, NetStatsProbe, UbPortLink, UbPortOptical, UbPortStat
from dcmi_exporter.backends.failing import FailingChips
from dcmi_exporter.node.calls import CallGuard
from dcmi_exporter.node.poller import ChipPoller
from dcmi_exporter.tasks.periodic import PeriodicTask, Round, read_chips, round_deadline

log = logging.getLogger(__name__)
T = TypeVar("T")


@dataclass(frozen=True)
class Samples:
    """The last samples, by logic id; replaced whole, so a scrape reads one consistent view."""

    chips: dict[int, ChipTelemetry] = field(default_factory=dict)
    net: dict[int, Mapping[str, int | None]] = field(default_factory=dict)
    optical: dict[int, dict[str, float]] = field(default_factory=dict)
    link: dict[int, dict[str, float]] = field(default_factory=dict)
    ub: dict[int, list[UbPortStat]] = field(default_factory=dict)  # the 950's UB port counters
    ub_link: dict[int, list[UbPortLink]] = field(default_factory=dict)  # the 950's per-port link
    ub_optical: dict[int, list[UbPortOptical]] = field(default_factory=dict)  # the 950's per-port optical


class TelemetryTask(PeriodicTask):
    name = "telemetry"

    def __init__(
        self,
        poller: ChipPoller,
        read: Callable[[ChipAddress], ChipTelemetry] | None,
        net: NetStatsProbe | None,
        guard: CallGuard,
        period_s: float,
        net_period_s: float,
        tasks: TaskScope,
        chip_deadline_s: float | None = None,
        net_deadline_s: float | None = None,
    ) -> None:
        """`read`: the backend's `read_telemetry` (blocking; run in `guard`'s pool), None: no such
        families. `net`: the RoCE counters' probe, None: no such families. The deadlines bound
        each round (default: `round_deadline` of its period)."""
        super().__init__(tasks)
        self.poller = poller
        self.read = read
        self.net = net
        self.guard = guard
        self.period_s = period_s
        self.net_period_s = net_period_s
        self.chip_deadline_s = chip_deadline_s if chip_deadline_s is not None else round_deadline(period_s)
        self.net_deadline_s = net_deadline_s if net_deadline_s is not None else round_deadline(net_period_s)
        self.samples = Samples()
        self._failing = FailingChips(
            log, "chip telemetry unreadable; its metric series are dropped", "chip telemetry is back"
        )
        self._net_late = FailingChips(
            log,
            "network metrics abandoned at the round's deadline; their series are dropped",
            "network metrics in time again",
        )

    async def begin(self) -> bool:
        # The first rounds as soon as the chips are known, so a first scrape has the families.
        await self.poller.discovered.wait()
        return True

    def schedule(self) -> list[Round]:
        rounds = []
        if self.read is not None:
            rounds.append(Round("telemetry", self.period_s, self.chip_round, "chip telemetry round failed", True))
        if self.net is not None:
            rounds.append(Round("net-stats", self.net_period_s, self.net_round, "RoCE counters round failed", True))
        return rounds

    def closed(self) -> None:
        self.guard.shutdown()

    def _answering(self) -> list[Chip]:
        return [chip for chip in self.poller.snapshot.chips if chip.state is ChipState.OK]

    async def chip_round(self) -> None:
        chips = self._answering()
        results = await read_chips(chips, self._read_chip, self.chip_deadline_s, self._failing)
        self.samples = Samples(
            chips={chip.logic_id: r for chip, r in zip(chips, results, strict=True) if r is not None},
            net=self.samples.net,
            optical=self.samples.optical,
            link=self.samples.link,
            ub=self.samples.ub,
            ub_link=self.samples.ub_link,
            ub_optical=self.samples.ub_optical,
        )

    async def _read_chip(self, chip: Chip) -> ChipTelemetry | None:
        read, addr = self.read, self.poller.address(chip.logic_id)
        if read is None or addr is None:
            return None
        try:
            sample = await self.guard.call(chip.logic_id, lambda: read(addr))
        except Exception as exc:  # a timeout, a hung chip's fast failure, a card drop
            self._failing.failed(chip, repr(exc))
            return None
        self._failing.succeeded(chip)
        return sample

    async def net_round(self) -> None:
        net = self.net
        if net is None:
            return
        chips = self._answering()
        results = await read_chips(chips, lambda chip: self._read_net(net, chip), self.net_deadline_s, self._net_late)
        read = [(chip, r) for chip, r in zip(chips, results, strict=True) if r is not None]
        self.samples = Samples(
            chips=self.samples.chips,
            net={chip.logic_id: r.counters for chip, r in read if r.counters is not None},
            optical={chip.logic_id: r.optical for chip, r in read if r.optical is not None},
            link={chip.logic_id: r.link for chip, r in read if r.link is not None},
            ub={chip.logic_id: r.ub for chip, r in read if r.ub is not None},
            ub_link={chip.logic_id: r.ub_link for chip, r in read if r.ub_link is not None},
            ub_optical={chip.logic_id: r.ub_optical for chip, r in read if r.ub_optical is not None},
        )

    async def _read_net(self, net: NetStatsProbe, chip: Chip) -> NetRead:
        """One chip's network reads, one tool run after the other (the runner bounds each)."""
        counters = await self._read_one(net.net_stats, chip)
        optical, link = await self._read_one(net.optical, chip), await self._read_one(net.link, chip)
        ub = await self._read_one(net.ub_stats, chip)
        ub_link = await self._read_one(net.ub_links, chip)
        ub_optical = await self._read_one(net.ub_optical, chip)
        self._net_late.succeeded(chip)
        return NetRead(counters, optical, link, ub, ub_link, ub_optical)

    @staticmethod
    async def _read_one(read: Callable[[Chip], Awaitable[T | None]], chip: Chip) -> T | None:
        try:
            return await read(chip)
        except Exception:  # a probe bug costs this chip's families only
            log.exception("network read failed", extra={"logic_id": chip.logic_id, "chip": chip.name})
            return None


@dataclass(frozen=True)
class NetRead:
    """One chip's network reads of a round; None: not read (no such port, or unreadable)."""

    counters: Mapping[str, int | None] | None
    optical: dict[str, float] | None
    link: dict[str, float] | None
    ub: list[UbPortStat] | None
    ub_link: list[UbPortLink] | None
    ub_optical: list[UbPortOptical] | None
