"""Hot-reset groups per chip family (contract section 8)."""

from __future__ import annotations

import pytest
from ascend_common.chips import NO_HCCS_910B_BOARD_IDS, ChipFamily, ChipTopology
from ascend_common.reset_groups import reset_group, reset_groups


def _chip(
    phy: int,
    family: ChipFamily,
    *,
    card: int | None = None,
    logic: int | None = None,
    board: int | None = None,
    product: str | None = None,
    partner: int | None = None,
) -> ChipTopology:
    return ChipTopology(
        logic_id=phy if logic is None else logic,
        phy_id=phy,
        card_id=phy if card is None else card,
        family=family,
        board_id=board,
        product_type=product,
        partner_card=partner,
    )


def _by_phy(chips: list[ChipTopology], phy: int) -> ChipTopology:
    return next(c for c in chips if c.phy_id == phy)


# 910A: logic ids deliberately differ from phy ids, because groups are on phy ids.
NODE_910A = [_chip(p, ChipFamily.ASCEND910, logic=7 - p) for p in range(8)]


@pytest.mark.parametrize(
    ("phy", "group"),
    [(0, (0, 1, 2, 3)), (3, (0, 1, 2, 3)), (4, (4, 5, 6, 7)), (6, (4, 5, 6, 7))],
)
def test_910a_rings_of_four(phy: int, group: tuple[int, ...]) -> None:
    assert reset_group(_by_phy(NODE_910A, phy), NODE_910A) == group


def test_910a_partial_node_keeps_what_is_present() -> None:
    chips = [c for c in NODE_910A if c.phy_id != 2]
    assert reset_group(_by_phy(chips, 1), chips) == (0, 1, 3)
    assert reset_groups(chips) == [(0, 1, 3), (4, 5, 6, 7)]


@pytest.mark.parametrize("board", [None, 0x21, 0x30, 0xB0 - 1])
def test_910b_with_hccs_is_one_group(board: int | None) -> None:
    chips = [_chip(p, ChipFamily.ASCEND910B, board=board) for p in range(8)]
    for chip in chips:
        assert reset_group(chip, chips) == tuple(range(8))
    assert reset_groups(chips) == [tuple(range(8))]


def test_910b_sixteen_chip_box_is_one_group() -> None:
    chips = [_chip(p, ChipFamily.ASCEND910B, board=0x51) for p in range(16)]
    assert reset_group(chips[11], chips) == tuple(range(16))


@pytest.mark.parametrize("board", sorted(NO_HCCS_910B_BOARD_IDS))
def test_910b_without_hccs_resets_alone(board: int) -> None:
    chips = [_chip(p, ChipFamily.ASCEND910B, board=board) for p in range(8)]
    for chip in chips:
        assert reset_group(chip, chips) == (chip.phy_id,)
    assert reset_groups(chips) == [(p,) for p in range(8)]


def test_no_hccs_board_ids_are_the_contract_ones() -> None:
    assert frozenset({0x28, 0x29, 0x33, 0x3C}) == NO_HCCS_910B_BOARD_IDS


def _a3_node() -> list[ChipTopology]:
    # 8 cards of 2 dies; cards (0,1), (2,3), ... are partners. Phy ids 2c and 2c+1 on card c.
    return [
        _chip(2 * card + die, ChipFamily.ASCEND910A3, card=card, board=0xB0, partner=card ^ 1)
        for card in range(8)
        for die in range(2)
    ]


@pytest.mark.parametrize(
    ("phy", "group"),
    [(0, (0, 1, 2, 3)), (1, (0, 1, 2, 3)), (3, (0, 1, 2, 3)), (4, (4, 5, 6, 7)), (14, (12, 13, 14, 15))],
)
def test_a3_die_sibling_and_partner_card(phy: int, group: tuple[int, ...]) -> None:
    chips = _a3_node()
    assert reset_group(_by_phy(chips, phy), chips) == group


def test_a3_groups_of_a_node() -> None:
    assert reset_groups(_a3_node()) == [(4 * i, 4 * i + 1, 4 * i + 2, 4 * i + 3) for i in range(4)]


def test_a3_without_known_partner_is_the_card() -> None:
    chips = [_chip(p, ChipFamily.ASCEND910A3, card=p // 2) for p in range(4)]
    assert reset_group(chips[2], chips) == (2, 3)


def _duo_node(product: str) -> list[ChipTopology]:
    return [_chip(p, ChipFamily.ASCEND310P, card=p // 2, product=product) for p in range(4)]


@pytest.mark.parametrize(("phy", "group"), [(0, (0, 1)), (1, (0, 1)), (2, (2, 3)), (3, (2, 3))])
def test_300i_duo_both_chips_of_the_card(phy: int, group: tuple[int, ...]) -> None:
    chips = _duo_node("Atlas 300I Duo")
    assert reset_group(_by_phy(chips, phy), chips) == group


@pytest.mark.parametrize("product", ["Atlas 300I Pro", "Atlas 300V Pro", "", "atlas 300i duo"])
def test_other_310p_cards_reset_alone(product: str) -> None:
    chips = _duo_node(product)
    assert [reset_group(c, chips) for c in chips] == [(0,), (1,), (2,), (3,)]


@pytest.mark.parametrize("family", [ChipFamily.ASCEND310, ChipFamily.ASCEND310B, ChipFamily.ASCEND950])
def test_other_families_reset_alone(family: ChipFamily) -> None:
    chips = [_chip(p, family, card=0) for p in range(4)]
    assert reset_groups(chips) == [(0,), (1,), (2,), (3,)]


def test_chip_outside_the_list_is_still_in_its_group() -> None:
    chips = [c for c in NODE_910A if c.phy_id != 5]
    assert reset_group(_by_phy(NODE_910A, 5), chips) == (4, 5, 6, 7)


def test_other_families_on_the_node_are_not_pulled_in() -> None:
    chips = [*NODE_910A[:4], _chip(1, ChipFamily.ASCEND310P, card=9, product="Atlas 300I Duo")]
    assert reset_group(NODE_910A[1], chips) == (0, 1, 2, 3)


def test_empty_node_has_no_groups() -> None:
    assert reset_groups([]) == []
