"""Hot-reset groups: the chips that go down together when one of them is reset (contract section 8).

A reset takes a whole interconnect domain down, so a reset is only safe when the whole group is
idle. Groups are computed on logic ids, as the reference does: its rings are ranges of logic ids
(ring start = logic id / ring size x ring size), and logic ids are what the driver resets by.

Reference: component/ascend-device-plugin/pkg/server/hot_reset_manager.go `getResetRingDevices`:
- A3 first: the associated dies of pkg/device/ascend910.go `GetAssociatedLogicIDs` (both dies of
  the card and both dies of its brother card, dcmi_get_netdev_brother_device);
- then, on a node with an Atlas 300I Duo card (`IsContainAtlas300IDuo`), the chips of the card;
- else `getRingSize` (pkg/common/constants.go): 910A 4; 910B 1 on the boards without HCCS, 16
  when the node has more than 8 chips, else 8; A5 1; anything else 1; a ring of 1 is the chip
  alone, a larger one `getHccsRingDevices`.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from ascend_common.chip_traits import TRAITS, ResetScope, traits
from ascend_common.chips import NO_HCCS_910B_BOARD_IDS, ChipFamily, ChipTopology
from ascend_common.schemas.exporter import Chip

__all__ = [
    "A200T_A2_RING_SIZE",
    "ASCEND910A3_RING_SIZE",
    "ASCEND910B_INFER_RING_SIZE",
    "ASCEND910B_TRAIN_RING_SIZE",
    "ASCEND910_RING_SIZE",
    "ASCEND950_RING_SIZE",
    "ATLAS_300I_DUO",
    "group_of",
    "hccs_ring",
    "reset_group",
    "reset_groups",
    "ring_size",
    "topology_of",
    "unknown_group_reason",
]

# The families' ring sizes are their rows' (chip_traits.TRAITS); named here for the readers of getRingSize.
ASCEND910_RING_SIZE = TRAITS[ChipFamily.ASCEND910].ring_size  # Ascend910RingsNum
ASCEND910B_TRAIN_RING_SIZE = TRAITS[ChipFamily.ASCEND910B].ring_size  # Ascend910BRingsNumTrain
ASCEND910B_INFER_RING_SIZE = 1  # Ascend910BRingsNumInfer: the boards without HCCS
A200T_A2_RING_SIZE = 16  # A200TA2RingsNum: a 910B node of more than 8 chips
ASCEND910A3_RING_SIZE = TRAITS[ChipFamily.ASCEND910A3].ring_size  # Ascend910A3RingsNum
ASCEND950_RING_SIZE = TRAITS[ChipFamily.ASCEND950].ring_size  # Ascend910A5RingsNum
ATLAS_300I_DUO = "Atlas 300I Duo"


def ring_size(family: str, board_id: int | None, device_num: int) -> int:
    """Chips in a reset ring (getRingSize).

    `family` is the node's card type (a ChipFamily; any other text is a type the reference does
    not know and gets 1), `board_id` the node's board id (None: unreadable, which the reference
    treats as board 0), `device_num` how many chips of that family the node has.
    """
    try:
        row = traits(ChipFamily(family))
    except ValueError:
        return 1  # a card type the reference does not know
    if row.reset_scope is ResetScope.HCCS:
        if board_id is not None and board_id in NO_HCCS_910B_BOARD_IDS:
            return ASCEND910B_INFER_RING_SIZE
        if device_num > ASCEND910B_TRAIN_RING_SIZE:
            return A200T_A2_RING_SIZE
    return row.ring_size


def hccs_ring(logic_id: int, size: int, logic_ids: Iterable[int]) -> tuple[int, ...]:
    """The ids of `logic_ids` in the ring of `logic_id` (getHccsRingDevices), sorted.

    The ring is [start, start + size) with start = logic_id / size x size in Go's truncating
    integer division. `logic_id` itself is only in the answer when it is in `logic_ids`, as there.
    """
    if size < 1:
        raise ValueError(f"ring size {size} must be at least 1")
    quotient = abs(logic_id) // size
    start = (-quotient if logic_id < 0 else quotient) * size
    return tuple(sorted({other for other in logic_ids if start <= other < start + size}))


def reset_group(chip: ChipTopology, chips: Sequence[ChipTopology]) -> tuple[int, ...]:
    """Sorted logic ids of the chips reset together with `chip` (always including `chip` itself).

    `chips` are the node's chips; only chips of `chip`'s family are ever in its group (a node
    has one card type in the reference).
    """
    return tuple(sorted({chip.logic_id, *(other.logic_id for other in _members(chip, chips))}))


def reset_groups(chips: Sequence[ChipTopology]) -> list[tuple[int, ...]]:
    """The distinct reset groups of a node (sorted logic ids each), sorted."""
    return sorted({reset_group(chip, chips) for chip in chips})


def _members(chip: ChipTopology, chips: Sequence[ChipTopology]) -> list[ChipTopology]:
    same_family = [other for other in chips if other.family is chip.family]
    if traits(chip.family).reset_scope is ResetScope.BROTHER_CARDS:
        # The other die of the card and both dies of the brother card. An unknown brother card
        # leaves the card alone here; unknown_group_reason() says the group is not known.
        cards = {chip.card_id} if chip.partner_card is None else {chip.card_id, chip.partner_card}
        return [other for other in same_family if other.card_id in cards]
    if any(_is_300i_duo(other) for other in (chip, *same_family)):
        # The reference asks whether any card of the node is a Duo, not whether this one is.
        return [other for other in same_family if other.card_id == chip.card_id]
    size = ring_size(chip.family, _node_board_id(chip, same_family), len(same_family))
    if size == 1:
        return []
    ring = set(hccs_ring(chip.logic_id, size, (other.logic_id for other in same_family)))
    return [other for other in same_family if other.logic_id in ring]


def _node_board_id(chip: ChipTopology, same_family: Sequence[ChipTopology]) -> int | None:
    # The reference reads the board id of logic id 0 (GetServerBoardId(FirstDevice)): it is the
    # node's. The lowest known one stands in when that chip's read failed or it is absent.
    for other in sorted((chip, *same_family), key=lambda c: c.logic_id):
        if other.board_id is not None:
            return other.board_id
    return None


def _is_300i_duo(chip: ChipTopology) -> bool:
    # The reference compares the DCMI product type for equality with "Atlas 300I Duo".
    return chip.product_type is not None and chip.product_type.strip() == ATLAS_300I_DUO


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
    members = set(reset_group(topo, topos))
    group = [c for c in chips if c.logic_id in members]
    if not any(c.logic_id == chip.logic_id for c in group):
        group.append(chip)
    return sorted(group, key=lambda c: c.logic_id)


def unknown_group_reason(chip: Chip) -> str | None:
    """Why `chip`'s reset group is not known, or None when it is.

    An A3 die whose brother card could not be read: the reference then finds no ring
    (getA3AssociatedDevices fails) and does not reset, because the brother card's dies would go
    down unchecked. group_of() answers the card's own dies for such a chip.
    """
    if (
        chip.family is not None
        and traits(chip.family).reset_scope is ResetScope.BROTHER_CARDS
        and not chip.static.partner_card.is_ok
    ):
        return f"the brother card of {chip.name} is unknown (dcmi_get_netdev_brother_device failed)"
    return None
