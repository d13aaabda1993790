"""`--kubelet-api both`: a chip goes to one API at a time (allocation.chip_owners). Allocate takes its chips
out of the slice before it answers; a chip reserved for a claim refuses Allocate, and turns Unhealthy
for the kubelet's device-plugin side until the claim is unprepared. With either API alone, only the
slice's wake-ups are left of it."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from ascend_common.inuse import chips_in_use_for_allocation

from ascend_device_plugin.allocation.chip_owners import ChipOwners, ChipTaken
from ascend_device_plugin.allocation.refusals import AllocationError, Refusal
from ascend_device_plugin.dra.slices import SlicePublisher
from ascend_device_plugin.model.chip_pod import PodView
from ascend_device_plugin.resources.manager import ResourceManager


@dataclass
class DraHandover:
    owners: ChipOwners
    manager: ResourceManager
    both: bool  # --kubelet-api both
    slices: SlicePublisher | None  # None: no cluster, no slice
    prepared: Callable[[], frozenset[str]] = frozenset  # the DRA driver's prepared devices

    def held_by_device_plugin(self) -> frozenset[str]:
        """What the slice leaves out: the chips the device-plugin side holds (`both`)."""
        return self.owners.device_plugin(time.monotonic()) if self.both else frozenset()

    def dra_changed(self) -> None:
        """The DRA driver's prepared or reserved chips changed."""
        if self.both:
            self.manager.set_withheld(self.prepared())
        self.kick()

    def take_for_device_plugin(self, chips: list[str]) -> None:
        try:
            self.owners.allocate(chips, time.monotonic())
        except ChipTaken as exc:
            raise AllocationError(
                Refusal.DRA_CLAIM, f"{', '.join(exc.chips)} is prepared for the DRA claim uid {exc.claim}"
            ) from None
        if self.slices is not None:
            self.slices.kick()  # the slice's next generation leaves them out; no claim can have them meanwhile
            # A hold no pod's annotation took over ends then: offer the chips again at once, not a period later.
            asyncio.get_running_loop().call_later(self.owners.allocate_hold_s, self.slices.kick)

    def pods_changed(self, pods: Iterable[PodView]) -> None:
        if self.both:
            self.owners.set_annotated(chips_in_use_for_allocation(pods))
            self.kick()  # a pod's chips may have changed hands

    def kick(self) -> None:
        """The slice looks again (a write only if its devices differ)."""
        if self.slices is not None:
            self.slices.kick()
