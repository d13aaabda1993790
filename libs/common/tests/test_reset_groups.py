"""Hot-reset groups per chip family (contract section 8), on logic ids as the reference computes them.

test_reference_hot_reset_rings.py ports the reference's own Go tests of the same rule.
"""

from __future__ import annotations

import pytest
from ascend_common.chips import NO_HCCS_910B_BOARD_IDS, ChipFamily, ChipTopology
from ascend_common.reset_groups import hccs_ring, reset_group, reset_groups, ring_size


def _chip(
    logic: int,
    family: ChipFamily,
    *,
    phy: int | None = None,
    card: int | None = None,
    board: int | None = None,
    product: str | None = None,
    partner: int | None = None,
) -> ChipTopology:
    return ChipTopology(
        logic_id=logic,
        phy_id=logic if phy is None else phy,
        card_id=logic if card is None else card,
        family=family,
        board_id=board,
        product_type=product,
        partner_card=partner,
    )


def _by_logic(chips: list[ChipTopology], logic: int) -> ChipTopology:
    return next(c for c in chips if c.logic_id == logic)


# 910A with phy ids shifted by 2 against logic ids: a rule on phy ids would put logic 2 and 3
# (phy 4 and 5) in the second ring, a rule on logic ids keeps them in the first.
NODE_910A = [_chip(logic, ChipFamily.ASCEND910, phy=(logic + 2) % 8) for logic in range(8)]


@pytest.mark.parametrize(
    ("logic", "group"),
    [(0, (0, 1, 2, 3)), (2, (0, 1, 2, 3)), (3, (0, 1, 2, 3)), (4, (4, 5, 6, 7)), (6, (4, 5, 6, 7))],
)
def test_910a_rings_of_four_logic_ids(logic: int, group: tuple[int, ...]) -> None:
    assert reset_group(_by_logic(NODE_910A, logic), NODE_910A) == group


def test_910a_groups_are_logic_ranges_not_phy_ranges() -> None:
    assert reset_groups(NODE_910A) == [(0, 1, 2, 3), (4, 5, 6, 7)]
    phys = {c.logic_id: c.phy_id for c in NODE_910A}
    assert sorted(phys[logic] for logic in reset_group(NODE_910A[0], NODE_910A)) == [2, 3, 4, 5]


def test_910a_partial_node_keeps_what_is_present() -> None:
    chips = [c for c in NODE_910A if c.logic_id != 2]
    assert reset_group(_by_logic(chips, 1), chips) == (0, 1, 3)
    assert reset_groups(chips) == [(0, 1, 3), (4, 5, 6, 7)]


@pytest.mark.parametrize("board", [None, 0x00, 0x21, 0x30, 0xB0 - 1])
def test_910b_with_hccs_is_a_ring_of_eight(board: int | None) -> None:
    chips = [_chip(logic, ChipFamily.ASCEND910B, phy=7 - logic, board=board) for logic in range(8)]
    for chip in chips:
        assert reset_group(chip, chips) == tuple(range(8))
    assert reset_groups(chips) == [tuple(range(8))]


def test_910b_more_than_eight_chips_is_a_ring_of_sixteen() -> None:
    chips = [_chip(logic, ChipFamily.ASCEND910B, phy=(logic + 8) % 16, board=0x51) for logic in range(16)]
    assert reset_group(chips[11], chips) == tuple(range(16))
    assert reset_group(chips[2], chips) == tuple(range(16))


def test_910b_a_ring_of_eight_is_a_logic_range() -> None:
    # 8 chips present, but numbered 4..11 (a node whose first chips are missing): two rings of 8.
    chips = [_chip(logic, ChipFamily.ASCEND910B) for logic in range(4, 12)]
    assert reset_groups(chips) == [(4, 5, 6, 7), (8, 9, 10, 11)]


@pytest.mark.parametrize("board", sorted(NO_HCCS_910B_BOARD_IDS))
def test_910b_without_hccs_resets_alone(board: int) -> None:
    chips = [_chip(logic, ChipFamily.ASCEND910B, board=board) for logic in range(8)]
    for chip in chips:
        assert reset_group(chip, chips) == (chip.logic_id,)
    assert reset_groups(chips) == [(logic,) for logic in range(8)]


def test_910b_board_id_is_the_nodes() -> None:
    # The reference reads the board id of logic id 0 for the whole node: a chip whose own read
    # failed is still on a board without HCCS.
    chips = [_chip(logic, ChipFamily.ASCEND910B, board=0x3C if logic == 0 else None) for logic in range(8)]
    assert reset_group(chips[5], chips) == (5,)


def test_no_hccs_board_ids_are_the_contract_ones() -> None:
    assert frozenset({0x28, 0x29, 0x33, 0x3C}) == NO_HCCS_910B_BOARD_IDS


def _a3_node() -> list[ChipTopology]:
    # 8 cards of 2 dies, logic ids in card order; cards (0,1), (2,3), ... are brothers. Phy ids
    # shifted by 8, as the simulator's a3-16 profile does.
    return [
        _chip(logic, ChipFamily.ASCEND910A3, phy=(logic + 8) % 16, card=logic // 2, board=0xB0, partner=logic // 2 ^ 1)
        for logic in range(16)
    ]


@pytest.mark.parametrize(
    ("logic", "group"),
    [(0, (0, 1, 2, 3)), (1, (0, 1, 2, 3)), (3, (0, 1, 2, 3)), (4, (4, 5, 6, 7)), (14, (12, 13, 14, 15))],
)
def test_a3_die_sibling_and_brother_card(logic: int, group: tuple[int, ...]) -> None:
    chips = _a3_node()
    assert reset_group(_by_logic(chips, logic), chips) == group


def test_a3_groups_of_a_node() -> None:
    assert reset_groups(_a3_node()) == [(4 * i, 4 * i + 1, 4 * i + 2, 4 * i + 3) for i in range(4)]


def test_a3_brother_cards_need_not_be_neighbours() -> None:
    chips = [
        _chip(2 * card + die, ChipFamily.ASCEND910A3, card=card, partner={0: 3, 3: 0, 1: 2, 2: 1}[card])
        for card in range(4)
        for die in range(2)
    ]
    assert reset_group(chips[0], chips) == (0, 1, 6, 7)


def test_a3_without_known_brother_is_the_card() -> None:
    chips = [_chip(logic, ChipFamily.ASCEND910A3, card=logic // 2) for logic in range(4)]
    assert reset_group(chips[2], chips) == (2, 3)


def _duo_node(product: str) -> list[ChipTopology]:
    return [_chip(logic, ChipFamily.ASCEND310P, card=logic // 2, product=product) for logic in range(4)]


@pytest.mark.parametrize(("logic", "group"), [(0, (0, 1)), (1, (0, 1)), (2, (2, 3)), (3, (2, 3))])
def test_300i_duo_both_chips_of_the_card(logic: int, group: tuple[int, ...]) -> None:
    chips = _duo_node("Atlas 300I Duo")
    assert reset_group(_by_logic(chips, logic), chips) == group


def test_300i_duo_is_a_node_property() -> None:
    # IsContainAtlas300IDuo looks at every card of the node: a chip whose product type could not
    # be read still goes down with its card.
    chips = _duo_node("Atlas 300I Duo")
    chips[2] = _chip(2, ChipFamily.ASCEND310P, card=1, product=None)
    assert reset_group(chips[2], chips) == (2, 3)


@pytest.mark.parametrize("product", ["Atlas 300I Pro", "Atlas 300V Pro", "", "atlas 300i duo"])
def test_other_310p_cards_reset_alone(product: str) -> None:
    chips = _duo_node(product)
    assert [reset_group(c, chips) for c in chips] == [(0,), (1,), (2,), (3,)]


@pytest.mark.parametrize("family", [ChipFamily.ASCEND310, ChipFamily.ASCEND310B, ChipFamily.ASCEND950])
def test_other_families_reset_alone(family: ChipFamily) -> None:
    chips = [_chip(logic, family, card=0) for logic in range(4)]
    assert reset_groups(chips) == [(0,), (1,), (2,), (3,)]


def test_chip_outside_the_list_is_still_in_its_group() -> None:
    chips = [c for c in NODE_910A if c.logic_id != 5]
    assert reset_group(_by_logic(NODE_910A, 5), chips) == (4, 5, 6, 7)


def test_other_families_on_the_node_are_not_pulled_in() -> None:
    chips = [*NODE_910A[:4], _chip(1, ChipFamily.ASCEND310P, card=9, product="Atlas 300I Duo")]
    assert reset_group(NODE_910A[1], chips) == (0, 1, 2, 3)


def test_empty_node_has_no_groups() -> None:
    assert reset_groups([]) == []


def test_hccs_ring_uses_go_integer_division() -> None:
    assert hccs_ring(5, 4, range(8)) == (4, 5, 6, 7)
    assert hccs_ring(-1, 4, [-1, 0, 1, 3, 4]) == (0, 1, 3)  # Go truncates -1/4 to 0
    with pytest.raises(ValueError, match="at least 1"):
        hccs_ring(0, 0, [0])


def test_ring_size_accepts_the_references_card_type_names() -> None:
    assert ring_size("Ascend910", None, 8) == 4
    assert ring_size("Ascend910B", None, 8) == 8
    assert ring_size("Ascend910A5", None, 8) == 1
