"""Who holds which chip: the mapping behind the metrics' namespace / pod_name / container_name labels.

The exporter sees no container runtime and holds no cluster credentials; the device plugin, which
reads the kubelet's PodResources already, PUTs the whole mapping on the exporter's API (scope
`containers`). The exporter keeps the last one, forgets it when the plugin DELETEs it or when the
plugin stops refreshing it for `ttl_s` (a stopped plugin must not leave pods on chips for ever).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

NOT_DISPLAYED_FOR_MULTI_POD = "not_displayed_for_multi_pod"  # npu-exporter's label value for a shared chip


@dataclass(frozen=True)
class Holder:
    namespace: str
    pod: str
    container: str


def card_labels(holders: Sequence[Holder]) -> tuple[str, str, str]:
    """(namespace, pod_name, container_name) as npu-exporter's getContainerLabels fills them."""
    if not holders:
        return "", "", ""
    if len(holders) > 1:
        return (NOT_DISPLAYED_FOR_MULTI_POD,) * 3
    only = holders[0]
    return only.namespace, only.pod, only.container


class ContainerMap:
    """The last mapping the plugin sent (phy id -> holders), with its expiry."""

    def __init__(self, ttl_s: float, clock: Callable[[], float]) -> None:
        self.ttl_s = ttl_s
        self._clock = clock
        self._holders: dict[int, tuple[Holder, ...]] = {}
        self._expires_at = 0.0

    def replace(self, holders: Mapping[int, Sequence[Holder]]) -> None:
        self._holders = {phy: tuple(h) for phy, h in holders.items() if h}
        self._expires_at = self._clock() + self.ttl_s

    def clear(self) -> None:
        self._holders = {}

    def current(self) -> Mapping[int, tuple[Holder, ...]]:
        if self._holders and self._clock() >= self._expires_at:
            self._holders = {}
        return self._holders
