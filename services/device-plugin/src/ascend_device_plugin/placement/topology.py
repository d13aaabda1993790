"""Affinity groups: the chips an allocation should stay inside.

- 910A (Ascend910): HCCS rings of 4 on phy ids 0-3 and 4-7, the same rings the reference uses
  for placement and reset (pkg/common/constants.go `Ascend910RingsNum = 4`).
- A3: a card and its partner card (dcmi_get_netdev_brother_device) share the network.
- Everything else: the NUMA node when known, else one group for the node.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from ascend_common.chip_traits import ResetScope, traits

from ascend_device_plugin.model.chip_pod import ChipInfo
from ascend_device_plugin.resources.devices import chip_of

WHOLE_NODE = "node"


def affinity_groups(chips: Iterable[ChipInfo]) -> dict[int, str]:
    """phy id -> group key."""
    return {chip.phy_id: _group(chip) for chip in chips}


def _group(chip: ChipInfo) -> str:
    row = traits(chip.family)
    # A fixed HCCS ring of more than one chip (the 910A's 4) keeps its chips together.
    if row.reset_scope is ResetScope.RING and row.ring_size > 1:
        return f"ring-{chip.phy_id // row.ring_size}"
    if row.reset_scope is ResetScope.BROTHER_CARDS:
        # Both cards of a pair must get the same key whichever of them we look from.
        cards = sorted({chip.card_id} if chip.partner_card is None else {chip.card_id, chip.partner_card})
        return "cards-" + "-".join(str(c) for c in cards)
    if chip.numa_node is not None:
        return f"numa-{chip.numa_node}"
    return WHOLE_NODE


def device_groups(device_ids: Iterable[str], groups: Mapping[int, str]) -> dict[str, str]:
    """device id -> group key of the chip it lives on (for `preferred_allocation`).

    IDs that name no chip, or a chip without a group, are left out; the preferred-allocation
    rule puts them in a group of their own.
    """
    out: dict[str, str] = {}
    for device_id in device_ids:
        try:
            phy = chip_of(device_id)
        except ValueError:
            continue
        if phy in groups:
            out[device_id] = groups[phy]
    return out
