"""Pure rules that build chips: code merging between poll and subscription, card drop, unknown."""

from __future__ import annotations

import pytest
from ascend_common.chips import ChipAddress
from ascend_common.faults.codes import CARD_DROP_CODE
from ascend_common.schemas.exporter import ChipDynamic, ChipState, ChipStatic
from ascend_common.schemas.reading import Reading
from dcmi_exporter.node.snapshot import (
    change_of,
    changed,
    chip_discovered,
    chip_dropped,
    chip_ok,
    chip_unknown,
    codes_of,
    merge_codes,
    with_codes,
)


@pytest.mark.parametrize(
    ("known", "polled", "touched", "merged"),
    [
        ([], ["A"], set(), ["A"]),  # a code that appeared in a poll
        (["A"], [], set(), []),  # a code that vanished from a poll
        (["A"], [], {"A"}, ["A"]),  # occurred by subscription after the poll began: keep it
        ([], ["A"], {"A"}, []),  # recovered by subscription after the poll began: stays gone
        (["A", "B"], ["B", "C"], {"A"}, ["B", "C", "A"]),
        (["A"], ["A", "B"], {"B"}, ["A"]),
        ([], [], {"A"}, []),
    ],
)
def test_merge_codes(known: list[str], polled: list[str], touched: set[str], merged: list[str]) -> None:
    assert merge_codes(known, polled, touched) == merged


ADDR = ChipAddress(card_id=1, device_id=0, logic_id=2, phy_id=6)


def static(name: str = "910B3", board: int = 0x22) -> ChipStatic:
    s, i = Reading[str].ok, Reading[int].ok
    return ChipStatic(
        chip_type=s("Ascend"),
        chip_name=s(name),
        chip_version=s("V1"),
        aicore=i(20),
        board_id=i(board),
        product_type=s("Atlas 800T A2"),
        partner_card=Reading[int].error(-8255),
        numa_node=i(0),
        device_ip=s("10.0.0.7"),
    )


def dynamic(health: int = 0, codes: list[str] | None = None, network: int = 0) -> ChipDynamic:
    i = Reading[int].ok
    return ChipDynamic(
        health=i(health),
        error_codes=Reading[list[str]].ok(codes or []),
        network_health=i(network),
        hbm=Reading.error(-8255),
        temperature_c=i(40),
        power_w=Reading[float].ok(90.0),
        utilization=Reading.error(-8255),
        processes=Reading.ok([]),
        boot_status=i(16),
        vnpus=Reading.ok([]),
    )


@pytest.mark.parametrize(
    ("health", "network", "healthy", "network_healthy"),
    [(0, 0, True, True), (2, 0, False, True), (0, 6, True, True), (0, 1, True, False)],
)
def test_chip_ok_health(health: int, network: int, healthy: bool, network_healthy: bool) -> None:
    chip = chip_ok(ADDR, static(), dynamic(health, network=network), 5.0)
    assert (chip.healthy, chip.network_healthy, chip.state) == (healthy, network_healthy, ChipState.OK)
    assert (chip.name, chip.family, chip.resource_type) == ("Ascend910-6", "Ascend910B", "Ascend910")


def test_unknown_chip_name_is_reported_not_guessed() -> None:
    chip = chip_ok(ADDR, static(name="X100"), dynamic(), 1.0)
    assert (chip.family, chip.resource_type, chip.name) == (None, None, "unknown-6")


def test_card_drop_adds_40F84E00_once_and_keeps_identity() -> None:
    chip = chip_ok(ADDR, static(), dynamic(codes=["80E01801"]), 1.0)
    dropped = chip_dropped(chip, 2.0)
    again = chip_dropped(dropped, 3.0)
    assert codes_of(again) == ["80E01801", CARD_DROP_CODE]
    assert (again.state, again.healthy, again.phy_id) == (ChipState.CARD_DROP, False, 6)
    assert again.dynamic is not None and again.dynamic.health.code == -8012
    never_read = chip_dropped(chip_discovered(ADDR, static()), 1.0)
    assert codes_of(never_read) == [CARD_DROP_CODE]


def test_unknown_keeps_values_but_not_health() -> None:
    chip = chip_ok(ADDR, static(), dynamic(codes=["A"]), 1.0)
    unknown = chip_unknown(chip)
    assert (unknown.state, unknown.healthy, codes_of(unknown)) == (ChipState.UNKNOWN, None, ["A"])
    assert change_of(unknown) != change_of(chip)


def test_changed_is_a_difference_of_change_of() -> None:
    ok = chip_ok(ADDR, static(), dynamic(), 1.0)
    chips = [
        ok,
        chip_ok(ADDR, static(), dynamic(), 2.0),  # only the time differs: no change
        chip_ok(ADDR, static(), dynamic(health=2), 1.0),
        chip_ok(ADDR, static(), dynamic(network=1), 1.0),
        chip_ok(ADDR, static(), dynamic().model_copy(update={"boot_status": Reading[int].ok(3)}), 1.0),
        chip_unknown(ok),
        chip_dropped(ok, 1.0),
        chip_discovered(ADDR, static()),
    ]
    for a in chips:
        for b in chips:
            assert changed(a, b) == (change_of(a) != change_of(b))


def test_with_codes_keeps_a_chip_that_already_has_them() -> None:
    chip = chip_ok(ADDR, static(), dynamic(codes=["A", "B"]), 1.0)
    assert with_codes(chip, ["A", "B"]) is chip  # a poll that agrees: nothing rebuilt
    assert codes_of(with_codes(chip, ["B", "A"])) == ["B", "A"]
    unread = chip.model_copy(
        update={"dynamic": dynamic().model_copy(update={"error_codes": Reading[list[str]].error(-8012)})}
    )
    cleared = with_codes(unread, [])  # an unread list becomes an empty one, as before
    assert cleared.dynamic is not None and cleared.dynamic.error_codes == Reading[list[str]].ok([])
