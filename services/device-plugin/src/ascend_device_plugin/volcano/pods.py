"""The pods a Volcano-annotated allocation may choose from: the cache's servable ones less those
already taken in memory (marked taken before the cache sees it), re-listed once when none fits."""

from __future__ import annotations

from collections.abc import Container
from dataclasses import dataclass, field

from ascend_device_plugin.allocation.report import PodSource
from ascend_device_plugin.volcano.annotations import VolcanoChoice, pick_pod


@dataclass
class VolcanoPods:
    source: PodSource | None = None
    taken: set[str] = field(default_factory=set)  # pod uids marked taken, before the cache sees it

    async def choose(
        self, resource_name: str, count: int, aicore: int | None = None, *, soft_share: bool = False
    ) -> VolcanoChoice:
        """The pod from the cache; if none fits, re-list once (a cold cache) and look again."""
        assert self.source is not None
        for attempt in range(2):
            # The taken ones are left out here: pick_pod parses only what is left.
            pods = [p for p in self.source.servable() if p.uid not in self.taken]
            choice = pick_pod(pods, resource_name, count, chip_aicore=aicore, soft_share=soft_share)
            if choice.pod is not None or attempt:
                return choice
            await self.source.refresh()
        raise AssertionError("unreachable")

    def forget(self, present: Container[str]) -> None:
        """Drop what we remember of pods that are gone (`present`: the uids still there) to keep memory
        bounded. Walks what we remember, not `present` (the node's pods: maybe 10,000)."""
        self.taken = {uid for uid in self.taken if uid in present}
