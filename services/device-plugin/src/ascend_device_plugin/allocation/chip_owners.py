"""`--kubelet-api both`: which of the two kubelet APIs holds each chip. One table, and both APIs
take chips only through it.

Pure and synchronous: the device plugin's Allocate and the DRA driver's Prepare run on one event
loop, and each checks and marks in one call (`allocate`, `reserve`) with no await in between, so
however their calls interleave, a chip goes to one of them. The answer to the kubelet follows the
mark: a chip Allocate handed out is out of the DRA side before Allocate answers, and a chip a
Prepare reserved (before it writes the CDI spec, so a Prepare still in progress counts) refuses
Allocate.

What the device plugin holds has two sources: its Allocates (the API tells no pod; the pod names
its chips in the annotation the plugin writes after the answer) and the pods' annotations as the
pod cache has them. An Allocate's hold ends when the cache names the chip (from then on the
annotation holds it, until the pod finishes) or, if no pod ever does (the kubelet failed the pod
before it started, the annotation could not be written), after `allocate_hold_s`.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass, field


class ChipTaken(Exception):
    """Some of the chips asked for are held by the other API, or by another claim."""

    def __init__(self, chips: list[str], claim: str | None) -> None:
        self.chips = chips  # by the device plugin's names, sorted
        self.claim = claim  # the uid of the claim holding chips[0]; None: the device plugin holds them
        holder = "the device plugin" if claim is None else f"claim uid {claim}"
        super().__init__(f"{', '.join(chips)} held by {holder}")


@dataclass
class ChipOwners:
    allocate_hold_s: float = 120.0
    _claims: dict[str, str] = field(default_factory=dict)  # chip -> uid of the claim reserving it
    _allocated: dict[str, float] = field(default_factory=dict)  # chip -> when Allocate handed it out
    _annotated: frozenset[str] = frozenset()  # chips the pod cache's annotations name

    def allocate(self, chips: Collection[str], now: float) -> None:
        """The device plugin hands `chips` out; ChipTaken (nothing marked) when a claim holds one."""
        taken = sorted(c for c in set(chips) if c in self._claims)
        if taken:
            raise ChipTaken(taken, self._claims[taken[0]])
        for chip in chips:
            self._allocated[chip] = now

    def reserve(self, claim: str, chips: Collection[str], now: float) -> None:
        """The DRA driver prepares `claim` on `chips`; ChipTaken (nothing marked) when the device
        plugin or another claim holds one. Again for the same claim is no error."""
        mine = self.device_plugin(now)
        taken = sorted(c for c in set(chips) if c in mine)
        if taken:
            raise ChipTaken(taken, None)
        others = sorted(c for c in set(chips) if self._claims.get(c, claim) != claim)
        if others:
            raise ChipTaken(others, self._claims[others[0]])
        for chip in chips:
            self._claims[chip] = claim

    def release(self, claim: str) -> bool:
        """The claim was unprepared, or its Prepare failed: its chips are free for the device plugin.
        True when it held any."""
        kept = {chip: uid for chip, uid in self._claims.items() if uid != claim}
        freed = len(kept) != len(self._claims)
        self._claims = kept
        return freed

    def set_annotated(self, chips: Collection[str]) -> None:
        """The chips the pods' annotations name now (the pod cache changed)."""
        self._annotated = frozenset(chips)
        for chip in self._annotated:
            self._allocated.pop(chip, None)

    def device_plugin(self, now: float) -> frozenset[str]:
        """The chips the device plugin holds at `now` (Allocate holds that expired are forgotten)."""
        expired = [c for c, at in self._allocated.items() if now - at >= self.allocate_hold_s]
        for chip in expired:
            del self._allocated[chip]
        return self._annotated | self._allocated.keys()

    def claims(self) -> frozenset[str]:
        """The chips reserved for claims, prepared or being prepared."""
        return frozenset(self._claims)
