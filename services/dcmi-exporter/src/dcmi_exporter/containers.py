"""Who holds which chip: the mapping behind the metrics' namespace / pod_name / container_name labels.

The exporter sees no container runtime and holds no cluster credentials; the device plugin, which
reads the kubelet's PodResources already, PUTs the whole mapping on the exporter's API (scope
`containers`). The exporter keeps the last one and forgets it when the plugin DELETEs it or stops
refreshing it for `ttl_s`: a plugin that died must not leave pods on chips for ever.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from ascend_common.schemas.exporter import ContainerHolder

Holders = Mapping[int, tuple[ContainerHolder, ...]]  # phy id -> the containers holding the chip


class ContainerMap:
    def __init__(self, ttl_s: float, clock: Callable[[], float]) -> None:
        self.ttl_s = ttl_s
        self._clock = clock
        self._holders: dict[int, tuple[ContainerHolder, ...]] = {}
        self._expires_at = 0.0

    def replace(self, holders: Mapping[int, Sequence[ContainerHolder]]) -> None:
        self._holders = {phy: tuple(h) for phy, h in holders.items() if h}
        self._expires_at = self._clock() + self.ttl_s

    def clear(self) -> None:
        self._holders = {}

    def current(self) -> Holders:
        if self._holders and self._clock() >= self._expires_at:
            self._holders = {}
        return self._holders
