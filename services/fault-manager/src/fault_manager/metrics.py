"""The fault-manager's own metric families, which its ops endpoint (`ascend_common.adapters.ops`)
renders at /metrics: events ingested, chips by fault level, the verdict revision, hot reset outcomes."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Protocol

from prometheus_client import CollectorRegistry
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

from fault_manager.reactor.verdicts import VerdictBoard
from fault_manager.store import RESET_OUTCOMES


class NodeView(Protocol):
    """What the API and the metrics read of the published state (fault_manager.reactor.published.Published)."""

    @property
    def board(self) -> VerdictBoard: ...

    def chips(self) -> frozenset[str]: ...


def hot_reset_family(outcomes: Mapping[str, int]) -> CounterMetricFamily:
    """fault_manager_hot_resets_total{outcome}: reset attempts ended since start, a series for every
    outcome from the start (0 before the first), so that increase() sees the first failure."""
    family = CounterMetricFamily(
        "fault_manager_hot_resets", "hot reset attempts ended since start, by outcome", labels=["outcome"]
    )
    for outcome in sorted(RESET_OUTCOMES):
        family.add_metric([outcome], outcomes.get(outcome, 0))
    return family


class NodeStats(Collector):
    """The fault-manager's own families, read from its state at each scrape."""

    def __init__(
        self, node: NodeView, ingested: Callable[[], int], resets: Callable[[], Mapping[str, int]] = dict
    ) -> None:
        self.node = node
        self.ingested = ingested
        self.resets = resets

    def collect(self) -> Any:
        ingested = GaugeMetricFamily("fault_manager_events_ingested", "fault events stored since start")
        ingested.add_metric([], self.ingested())
        yield ingested
        levels = GaugeMetricFamily("fault_manager_chips", "chips by fault level", labels=["level", "schedulable"])
        counts: dict[tuple[str, str], int] = {}
        for v in self.node.board.current().values():
            key = (v.fault_level.value, str(v.schedulable).lower())
            counts[key] = counts.get(key, 0) + 1
        for (level, ok), n in sorted(counts.items()):
            levels.add_metric([level, ok], n)
        yield levels
        revision = GaugeMetricFamily("fault_manager_verdict_revision", "verdict revision")
        revision.add_metric([], self.node.board.revision)
        yield revision
        yield hot_reset_family(self.resets())


def ops_registry(
    node: NodeView, ingested: Callable[[], int], resets: Callable[[], Mapping[str, int]] = dict
) -> CollectorRegistry:
    """What /metrics renders: events ingested, chips by fault level, the verdict revision, and
    `resets`' hot reset outcomes (none counted when hot reset is off)."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(NodeStats(node, ingested, resets))
    return registry
