"""The 950's UB/UBoE codes (issue 25 B and C): the pure rule `ub_codes`, with the tables of
fault_code_test.go / ascendcommon_test.go named after their Go tests, and the issue's rows."""

from __future__ import annotations

import pytest
from ascend_common.faults.codes import (
    UB_PORT_DOWN_CODE,
    UB_SEPARATE_CODE,
    UB_SUBHEALTH_CODE,
    UBOE_PORT_DOWN_CODE,
    UBOE_PRESEPARATE_CODE,
    UBOE_SUBHEALTH_CODE,
)
from ascend_common.schemas.exporter import UbPorts
from dcmi_exporter.node.snapshot import UbChipInput, ub_codes

CARD_DROP = "40F84E00"


def ports(ub: int = 0, bonding: int = 0) -> UbPorts:
    return UbPorts(ub_down=ub, bonding_down=bonding)


def one(chip: UbChipInput) -> list[str]:
    """The codes of `chip` beside a chip with no fault (alone, it would be "every chip")."""
    return ub_codes({0: chip, 1: UbChipInput(raw=frozenset())})[0]


# ---------------------------------------------------------------------- the issue's rows


def test_ub_codes_row_one_chip_of_eight_is_separated() -> None:
    chips = {i: UbChipInput(raw=frozenset({UB_PORT_DOWN_CODE} if i == 3 else set())) for i in range(8)}
    got = ub_codes(chips)
    assert got[3] == [UB_SEPARATE_CODE]
    assert all(got[i] == [] for i in range(8) if i != 3)


def test_ub_codes_row_all_eight_are_sub_health() -> None:
    chips = {i: UbChipInput(raw=frozenset({UB_PORT_DOWN_CODE})) for i in range(8)}
    assert ub_codes(chips) == {i: [UB_SUBHEALTH_CODE] for i in range(8)}


def test_partial_recovery_after_all_down_brings_separate_back() -> None:
    """Ours (fix 6): the reference never turns 020000002 back into 020001002."""
    held = frozenset({UB_PORT_DOWN_CODE, UB_SUBHEALTH_CODE})
    chips = {i: UbChipInput(raw=frozenset({UB_PORT_DOWN_CODE}), held=held) for i in range(7)}
    chips[7] = UbChipInput(raw=frozenset(), held=held, ports=ports(ub=0))
    got = ub_codes(chips)
    assert got[7] == []
    assert all(got[i] == [UB_SEPARATE_CODE] for i in range(7))


def test_ub_codes_row_recover_while_a_wired_port_is_down_keeps_the_codes() -> None:
    chip = UbChipInput(raw=frozenset(), held=frozenset({UB_PORT_DOWN_CODE, UB_SEPARATE_CODE}), ports=ports(ub=1))
    assert one(chip) == [UB_PORT_DOWN_CODE, UB_SEPARATE_CODE]


def test_recover_with_an_unreadable_snapshot_changes_nothing() -> None:
    """The reference `continue`s on a snapshot error: the recover is skipped."""
    chip = UbChipInput(raw=frozenset(), held=frozenset({UB_PORT_DOWN_CODE, UB_SEPARATE_CODE}), ports=None)
    assert one(chip) == [UB_PORT_DOWN_CODE, UB_SEPARATE_CODE]


@pytest.mark.parametrize(
    ("bonding", "precise"),
    [(1, [UBOE_SUBHEALTH_CODE]), (2, [UBOE_PRESEPARATE_CODE]), (0, []), (3, [])],
    ids=["1 down: network SubHealth", "2 down: network PreSeparateNPU", "0 down: code kept", "3 down: code kept"],
)
def test_uboe_row(bonding: int, precise: list[str]) -> None:
    """81078607 on board 0x25; 0 or > 2 ports down (fix 7): the library's code stays, nothing added."""
    assert one(UbChipInput(raw=frozenset({UBOE_PORT_DOWN_CODE}), ports=ports(bonding=bonding))) == precise


def test_lost_row_subscription_failed_and_a_wired_port_down_gives_one_synthetic_code() -> None:
    chip = UbChipInput(raw=frozenset(), ports=ports(ub=1), lost_ub=True)
    assert one(chip) == [UB_PORT_DOWN_CODE, UB_SEPARATE_CODE]


def test_lost_uboe_bonding_down_gives_the_uboe_code() -> None:
    chip = UbChipInput(raw=frozenset(), ports=ports(bonding=1), lost_uboe=True)
    assert one(chip) == [UBOE_PORT_DOWN_CODE, UBOE_SUBHEALTH_CODE]


def test_a_lost_ub_code_is_held_while_the_port_stays_down_and_goes_when_it_comes_up() -> None:
    first = one(UbChipInput(raw=frozenset(), ports=ports(ub=1), lost_ub=True))
    held = frozenset(first)
    assert one(UbChipInput(raw=frozenset(), held=held, ports=ports(ub=1))) == first
    assert one(UbChipInput(raw=frozenset(), held=held, ports=ports(ub=0))) == []


# ---------------------------------------------------------------------- fault_code_test.go


@pytest.mark.parametrize(
    ("name", "chip", "want"),
    [
        (
            "A950 card type occur, should add precise fault code",
            UbChipInput(raw=frozenset({UB_PORT_DOWN_CODE})),
            [UB_SEPARATE_CODE],
        ),
        (
            "A950 card type recover, should remove precise fault codes when no port down",
            UbChipInput(raw=frozenset(), held=frozenset({UB_PORT_DOWN_CODE, UB_SEPARATE_CODE}), ports=ports(ub=0)),
            [],
        ),
        (
            "A950 card type recover with port still down, should re-occur precise fault",
            UbChipInput(raw=frozenset(), held=frozenset({UB_PORT_DOWN_CODE, UB_SEPARATE_CODE}), ports=ports(ub=1)),
            [UB_PORT_DOWN_CODE, UB_SEPARATE_CODE],
        ),
    ],
)
def test_set_hyper_plane_new_fault_and_cache_once_recover_fault(name: str, chip: UbChipInput, want: list[str]) -> None:
    assert one(chip) == want, name


@pytest.mark.parametrize(
    ("name", "chip", "want"),
    [
        (
            "A950 card type, a950 parameter plane fault steps should be applied",
            UbChipInput(raw=frozenset({UBOE_PORT_DOWN_CODE}), ports=ports(bonding=1)),
            [UBOE_SUBHEALTH_CODE],
        ),
        (
            "A950 card type recover, should remove precise fault codes when no port down",
            UbChipInput(
                raw=frozenset(),
                held=frozenset({UBOE_PORT_DOWN_CODE, UBOE_PRESEPARATE_CODE, UBOE_SUBHEALTH_CODE}),
                ports=ports(bonding=0),
            ),
            [],
        ),
        (
            "A950 card type recover with port still down, should re-occur precise fault",
            UbChipInput(
                raw=frozenset(),
                held=frozenset({UBOE_PORT_DOWN_CODE, UBOE_PRESEPARATE_CODE, UBOE_SUBHEALTH_CODE}),
                ports=ports(bonding=1),
            ),
            [UBOE_PORT_DOWN_CODE, UBOE_SUBHEALTH_CODE],
        ),
    ],
)
def test_set_network_new_fault_and_cache_once_recover_fault(name: str, chip: UbChipInput, want: list[str]) -> None:
    assert one(chip) == want, name


def test_a950_hyper_plane_new_overall_fault_modify_needs_every_chip() -> None:
    chips = {i: UbChipInput(raw=frozenset({UB_PORT_DOWN_CODE})) for i in range(4)}
    assert ub_codes(chips) == {i: [UB_SUBHEALTH_CODE] for i in range(4)}
    chips[2] = UbChipInput(raw=frozenset())
    assert ub_codes(chips) == {0: [UB_SEPARATE_CODE], 1: [UB_SEPARATE_CODE], 2: [], 3: [UB_SEPARATE_CODE]}


def test_no_chips_no_codes() -> None:
    assert ub_codes({}) == {}


# ---------------------------------------------------------------------- ascendcommon_test.go


def test_handle_lost_hyper_plane_fault_events_02_library_lists_the_code() -> None:
    """The library lists 81B18603 (and a card drop): no snapshot matters, the code is the library's."""
    chip = UbChipInput(raw=frozenset({UB_PORT_DOWN_CODE, CARD_DROP}), ports=None, lost_ub=True)
    assert ub_codes({1: chip, 2: UbChipInput(raw=frozenset())})[1] == [UB_SEPARATE_CODE]


@pytest.mark.parametrize(
    ("name", "chip", "want"),
    [
        ("no lost check: nothing from the ports", UbChipInput(raw=frozenset(), ports=ports(ub=2, bonding=1)), []),
        ("lost check, all ports up", UbChipInput(raw=frozenset(), ports=ports(), lost_ub=True, lost_uboe=True), []),
        ("lost check, snapshot failed", UbChipInput(raw=frozenset(), ports=None, lost_ub=True, lost_uboe=True), []),
    ],
)
def test_query_plane_status_without_fault_code(name: str, chip: UbChipInput, want: list[str]) -> None:
    assert one(chip) == want, name


# ---------------------------------------------------------------------- the levels they come out at


def test_the_default_policy_gives_the_levels_the_issue_names() -> None:
    """What the fault-manager makes of our codes with the packaged tables (faultCode.json)."""
    from ascend_common.faults import FaultLevel, chip_level, chip_network_level
    from ascend_common.faults.table import default_fault_code_table

    table = default_fault_code_table()

    def level(*codes: str) -> FaultLevel:
        return chip_level(table, [(c, None) for c in codes])

    def network(*codes: str) -> FaultLevel:
        return chip_network_level(table, [(c, None) for c in codes])

    assert level(UB_PORT_DOWN_CODE) is FaultLevel.NOT_HANDLE_FAULT  # the library's code alone: the gap
    assert level(UB_PORT_DOWN_CODE, UB_SEPARATE_CODE) is FaultLevel.SEPARATE_NPU
    assert level(UB_PORT_DOWN_CODE, UB_SUBHEALTH_CODE) is FaultLevel.SUB_HEALTH_FAULT
    assert network(UBOE_PORT_DOWN_CODE, UBOE_SUBHEALTH_CODE) is FaultLevel.SUB_HEALTH_FAULT
    assert network(UBOE_PORT_DOWN_CODE, UBOE_PRESEPARATE_CODE) is FaultLevel.PRE_SEPARATE_NPU
    assert (
        level(UBOE_PORT_DOWN_CODE, UBOE_PRESEPARATE_CODE) is FaultLevel.NORMAL_NPU
    )  # network codes act on the network only
