"""The allocator's pod cache and pod patcher, in memory: the pods a test plants, the patches it sent."""

from __future__ import annotations

from dataclasses import dataclass, field

from ascend_device_plugin.model.chip_pod import PodView
from ascend_device_plugin.volcano.annotations import may_serve


@dataclass
class FakePods:
    items: list[PodView] = field(default_factory=list)
    patches: list[tuple[str, str, dict[str, str]]] = field(default_factory=list)
    refreshes: int = 0

    def pods(self) -> list[PodView]:
        return list(self.items)

    def servable(self) -> list[PodView]:
        # The same rule as the plugin's pod index, so a pod it wrongly leaves out is never chosen here either.
        return [p for p in self.items if may_serve(p)]

    async def refresh(self) -> None:
        self.refreshes += 1

    async def patch_pod(
        self, namespace: str, name: str, annotations: dict[str, str], *, retries: int = 3, base_delay: float = 0.2
    ) -> None:
        self.patches.append((namespace, name, annotations))
