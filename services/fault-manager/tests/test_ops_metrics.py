"""The fault-manager's hot reset counter as /metrics renders it: a series per outcome from the start."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from fault_manager.metrics import hot_reset_family
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.registry import Collector


class _One(Collector):
    def __init__(self, outcomes: dict[str, int]) -> None:
        self.outcomes = outcomes

    def collect(self) -> Iterator[CounterMetricFamily]:
        yield hot_reset_family(self.outcomes)


def rendered(outcomes: dict[str, int]) -> dict[str, float]:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_One(outcomes))
    text = generate_latest(registry).decode()
    (family,) = text_string_to_metric_families(text)
    assert family.name == "fault_manager_hot_resets" and family.type == "counter"
    return {s.labels["outcome"]: s.value for s in family.samples if s.name == "fault_manager_hot_resets_total"}


@pytest.mark.parametrize(
    ("outcomes", "expected"),
    [
        ({}, {"succeeded": 0, "failed": 0, "refused": 0}),  # no attempt yet: every series at 0
        ({"failed": 2}, {"succeeded": 0, "failed": 2, "refused": 0}),
        ({"succeeded": 3, "refused": 1}, {"succeeded": 3, "failed": 0, "refused": 1}),
    ],
)
def test_hot_resets_total_has_every_outcome(outcomes: dict[str, int], expected: dict[str, float]) -> None:
    assert rendered(outcomes) == expected
