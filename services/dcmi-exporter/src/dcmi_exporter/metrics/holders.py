"""Who holds which chip: the mapping behind the metrics' namespace / pod_name / container_name labels.

The exporter sees no container runtime and holds no cluster credentials; the device plugin, which
reads the kubelet's PodResources already, PUTs the whole mapping on the exporter's API (scope
`containers`). The exporter keeps the last one and forgets it when the plugin DELETEs it or stops
refreshing it for `ttl_s`: a plugin that died must not leave pods on chips for ever.

A vNPU's holders are kept apart, by vdev id (unique on the node: it names /dev/vdavinci<N>), as
npu-exporter's container map keys a vNPU: they label its `vnpu_pod_*` series, not the chip's.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from ascend_common.schemas.exporter import ContainerHolder

Holders = Mapping[int, tuple[ContainerHolder, ...]]  # phy id (or vdev id) -> the containers holding it


class ContainerMap:
    def __init__(self, ttl_s: float, clock: Callable[[], float]) -> None:
        self.ttl_s = ttl_s
        self._clock = clock
        self._holders: dict[int, tuple[ContainerHolder, ...]] = {}
        self._vnpus: dict[int, tuple[ContainerHolder, ...]] = {}
        self._expires_at = 0.0

    def replace(
        self,
        holders: Mapping[int, Sequence[ContainerHolder]],
        vnpus: Mapping[int, Sequence[ContainerHolder]] | None = None,
    ) -> None:
        """`holders` by chip phy id, `vnpus` by vdev id; both replace the last mapping whole."""
        self._holders = {phy: tuple(h) for phy, h in holders.items() if h}
        self._vnpus = {vdev: tuple(h) for vdev, h in (vnpus or {}).items() if h}
        self._expires_at = self._clock() + self.ttl_s

    def clear(self) -> None:
        self._holders = {}
        self._vnpus = {}

    def _expire(self) -> None:
        if (self._holders or self._vnpus) and self._clock() >= self._expires_at:
            self.clear()

    def current(self) -> Holders:
        """The chips' holders, by phy id."""
        self._expire()
        return self._holders

    def current_vnpus(self) -> Holders:
        """The vNPUs' holders, by vdev id."""
        self._expire()
        return self._vnpus
