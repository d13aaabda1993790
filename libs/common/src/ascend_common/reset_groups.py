"""Hot-reset groups: the chips that go down together when one of them is reset (contract section 8).

A reset takes a whole interconnect domain down, so a reset is only safe when the whole group is
idle. Groups are computed on phy ids, because those are what every report names.
Reference: component/ascend-device-plugin/pkg/server/hot_reset_manager.go `getResetRingDevices`
(ring sizes from pkg/common/constants.go: 910A 4, 910B 8 or 16 with HCCS / 1 without, A3 the
associated dies of pkg/device/ascend910.go `GetAssociatedLogicIDs`, 300I Duo the card).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from ascend_common.chips import NO_HCCS_910B_BOARD_IDS, ChipFamily, ChipTopology
from ascend_common.schemas.exporter import Chip

ASCEND910_RING_SIZE = 4
ATLAS_300I_DUO = "Atlas 300I Duo"


def reset_group(chip: ChipTopology, chips: Sequence[ChipTopology]) -> tuple[int, ...]:
    """Sorted phy ids of the chips reset together with `chip` (always including `chip` itself)."""
    return _sorted_ids([chip, *_members(chip, chips)])


def reset_groups(chips: Sequence[ChipTopology]) -> list[tuple[int, ...]]:
    """The distinct reset groups of a node, sorted."""
    return sorted({reset_group(chip, chips) for chip in chips})


def _members(chip: ChipTopology, chips: Sequence[ChipTopology]) -> Iterable[ChipTopology]:
    same_family = [other for other in chips if other.family is chip.family]
    match chip.family:
        case ChipFamily.ASCEND910:
            # HCCS rings of 4 on phy ids 0-3 and 4-7.
            ring = chip.phy_id // ASCEND910_RING_SIZE
            return [other for other in same_family if other.phy_id // ASCEND910_RING_SIZE == ring]
        case ChipFamily.ASCEND910B:
            # With HCCS the whole node is one domain (the reference's ring of 8, or 16 on a
            # 16-chip box, is every 910B chip of the node); without HCCS each chip stands alone.
            if chip.board_id is not None and chip.board_id in NO_HCCS_910B_BOARD_IDS:
                return []
            return same_family
        case ChipFamily.ASCEND910A3:
            # The two dies of a card share it; the partner card (dcmi_get_netdev_brother_device)
            # shares the network with it, so its dies go down too.
            cards = {chip.card_id} if chip.partner_card is None else {chip.card_id, chip.partner_card}
            return [other for other in same_family if other.card_id in cards]
        case ChipFamily.ASCEND310P if _is_300i_duo(chip):
            return [other for other in same_family if other.card_id == chip.card_id]
        case _:
            return []


def _is_300i_duo(chip: ChipTopology) -> bool:
    # The reference compares the DCMI product type for equality with "Atlas 300I Duo".
    return chip.product_type is not None and chip.product_type.strip() == ATLAS_300I_DUO


def _sorted_ids(chips: Iterable[ChipTopology]) -> tuple[int, ...]:
    return tuple(sorted({c.phy_id for c in chips}))


def topology_of(chip: Chip) -> ChipTopology | None:
    """What the reset-group rule needs of an exporter chip; None when its family is unknown."""
    if chip.family is None:
        return None
    s = chip.static
    return ChipTopology(
        logic_id=chip.logic_id,
        phy_id=chip.phy_id,
        card_id=chip.card_id,
        family=chip.family,
        board_id=s.board_id.value if s.board_id.is_ok else None,
        product_type=s.product_type.value if s.product_type.is_ok else None,
        partner_card=s.partner_card.value if s.partner_card.is_ok else None,
    )


def group_of(chip: Chip, chips: Sequence[Chip]) -> list[Chip]:
    """The exporter chips reset together with `chip`, sorted by logic id."""
    topo = topology_of(chip)
    if topo is None:
        return [chip]
    topos = [t for t in (topology_of(c) for c in chips) if t is not None]
    phys = set(reset_group(topo, topos))
    return sorted((c for c in chips if c.phy_id in phys), key=lambda c: c.logic_id)
