"""npu-exporter's container families on the plugin's /metrics, sampled by a task of their own.

Every `period` seconds the task asks the kubelet's PodResources API what each container holds and
the exporter for its chips (`GET /v1/chips`, one read per round), each with a deadline, and keeps
the samples (container_metrics/families.py). A scrape only reads the last samples: a kubelet or an
exporter that hangs delays the next round, never a scrape. A source that fails keeps the last
answer it gave (the kubelet keeps its allocations across its own restarts); the chips' readings
are never served stale, only their labels.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TypeVar

from ascend_common.adapters.clients.exporter import ExporterClient
from ascend_common.inuse import ASCEND_REAL
from ascend_common.schemas.exporter import (
    VDEV_ID_MAX,
    VDEV_ID_MIN,
    Chip,
    ChipHolders,
    ContainerHolder,
    ContainerMapping,
    VnpuHolders,
)
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from ascend_device_plugin.container_metrics.families import (
    FAMILIES,
    ContainerDevices,
    ContainerRef,
    Sample,
    chip_holders,
    container_samples,
    vnpu_holders,
)
from ascend_device_plugin.model.chip_pod import PodView

log = logging.getLogger(__name__)
T = TypeVar("T")

# Each source is called with its deadline in seconds.
ListContainers = Callable[[float], Awaitable[Sequence[ContainerDevices]]]
ListChips = Callable[[float], Awaitable[Sequence[Chip]]]
RealAllocations = Callable[[], Mapping[tuple[str, str], str]]
# Tells the exporter who holds which chip (phy id -> holders) and which vNPU (vdev id -> holders),
# within the deadline in seconds.
PublishHolders = Callable[
    [Mapping[int, Sequence[ContainerRef]], Mapping[int, Sequence[ContainerRef]], float], Awaitable[None]
]
MAX_CALL_S = 5.0  # a source's deadline, shorter when the period is


@dataclass
class ExporterHolders:
    """The exporter's side of a round: its chips, read afresh, and who holds them, told back."""

    exporter: ExporterClient

    async def chips(self, deadline_s: float) -> list[Chip]:
        # Read afresh: the follower re-reads a chip on its events only, so its readings are old.
        async with asyncio.timeout(deadline_s):
            return (await self.exporter.chips()).chips

    async def publish(
        self,
        holders: Mapping[int, Sequence[ContainerRef]],
        vnpus: Mapping[int, Sequence[ContainerRef]],
        deadline_s: float,
    ) -> None:
        def containers(refs: Sequence[ContainerRef]) -> list[ContainerHolder]:
            return [ContainerHolder(namespace=r.namespace, pod=r.pod, container=r.container) for r in refs]

        mapping = ContainerMapping(
            chips=[ChipHolders(phy_id=phy, containers=containers(refs)) for phy, refs in sorted(holders.items())],
            # Only the vdev ids the exporter accepts (npu-exporter serves no other): one the kubelet
            # names outside them must not cost the whole mapping a 422.
            vnpus=[
                VnpuHolders(vdev_id=vdev, containers=containers(refs))
                for vdev, refs in sorted(vnpus.items())
                if VDEV_ID_MIN <= vdev <= VDEV_ID_MAX
            ],
        )
        async with asyncio.timeout(deadline_s):
            await self.exporter.put_containers(mapping)


def real_allocations(allocated: Mapping[str, PodView]) -> dict[tuple[str, str], str]:
    """The AscendReal annotations of the pods holding an allocation, by (namespace, name)."""
    return {
        (p.namespace, p.name): p.annotations[ASCEND_REAL] for p in allocated.values() if ASCEND_REAL in p.annotations
    }


class ContainerMetrics(Collector):
    def __init__(
        self,
        containers: ListContainers,
        chips: ListChips,
        real: RealAllocations = dict,
        *,
        period: float,
        kubelet_chips: bool = True,
        publish: PublishHolders | None = None,
    ) -> None:
        """`real`: the pods' `huawei.com/AscendReal` annotations by (namespace, name), from the pod
        cache. `kubelet_chips` False (--volcano-type): the kubelet's chip ids are not the chips.
        `publish`: where each round's chip and vNPU holders go (the exporter's `PUT /v1/containers`,
        for the pod labels of its chip and vNPU series); None: nowhere."""
        self._publish = publish
        self._containers = containers
        self._chips = chips
        self._real = real
        self.period = period
        self.kubelet_chips = kubelet_chips
        self.timeout = min(MAX_CALL_S, period)
        self.samples: tuple[Sample, ...] = ()
        self.rounds = 0  # completed rounds (tests wait on it)
        self._listing: Sequence[ContainerDevices] = ()
        self._last_chips: Sequence[Chip] = ()
        self._failing: set[str] = set()  # sources whose failure was logged (once per failure streak)

    async def run(self) -> None:
        while True:
            await self.refresh()
            await asyncio.sleep(self.period)

    async def refresh(self) -> None:
        """One round: both sources read side by side, each within `timeout`."""
        listing, chips = await asyncio.gather(
            self._read("kubelet PodResources", self._containers), self._read("exporter chips", self._chips)
        )
        if listing is not None:
            self._listing = listing
        if chips is not None:
            self._last_chips = chips
        self.samples = tuple(
            container_samples(
                self._listing,
                self._last_chips,
                self._real(),
                with_values=chips is not None,
                kubelet_chips=self.kubelet_chips,
            )
        )
        publish = self._publish
        if publish is not None:  # the listing the container families use, so both endpoints agree
            real = self._real()
            holders = chip_holders(self._listing, real, kubelet_chips=self.kubelet_chips)
            vnpus = vnpu_holders(self._listing, real, kubelet_chips=self.kubelet_chips)
            await self._read("exporter containers", lambda deadline_s: publish(holders, vnpus, deadline_s))
        self.rounds += 1

    async def _read(self, source: str, read: Callable[[float], Awaitable[T]]) -> T | None:
        try:
            # The deadline again around the call: a source that ignores its own still ends here.
            async with asyncio.timeout(self.timeout):
                result = await read(self.timeout)
        except Exception as exc:  # any failure of a source costs that source's round, never the loop
            if source not in self._failing:
                self._failing.add(source)
                log.warning(
                    "container metrics: a source failed; its last answer is used",
                    extra={"source": source, "error": repr(exc), "timeout_s": self.timeout},
                )
            return None
        if source in self._failing:
            self._failing.discard(source)
            log.info("container metrics: the source answers again", extra={"source": source})
        return result

    def collect(self) -> Iterator[GaugeMetricFamily]:
        families = {name: GaugeMetricFamily(name, doc, labels=list(labels)) for name, doc, labels in FAMILIES}
        for sample in self.samples:
            families[sample.family].add_metric(list(sample.labels), sample.value)
        yield from families.values()

    def describe(self) -> Iterator[GaugeMetricFamily]:
        yield from (GaugeMetricFamily(name, doc, labels=list(labels)) for name, doc, labels in FAMILIES)
