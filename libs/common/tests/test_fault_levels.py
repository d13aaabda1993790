"""FaultLevel ordering and the switch level enum (contract sections 6 and 7)."""

from __future__ import annotations

import pytest
from ascend_common.faults import FaultLevel, SwitchFaultLevel, most_serious, most_serious_switch

# Contract section 7, most serious first, as wire strings.
CONTRACT_ORDER = [
    "ManuallySeparateNPU",
    "SeparateNPU",
    "PreSeparateNPU",
    "RestartNPU",
    "FreeRestartNPU",
    "RestartBusiness",
    "RestartRequest",
    "SubHealthFault",
    "NotHandleFault",
    "NormalNPU",
]


def test_levels_are_the_contract_levels_in_order() -> None:
    assert [level.value for level in FaultLevel] == CONTRACT_ORDER


@pytest.mark.parametrize(
    ("more", "less"),
    [
        (CONTRACT_ORDER[i], CONTRACT_ORDER[j])
        for i in range(len(CONTRACT_ORDER))
        for j in range(i + 1, len(CONTRACT_ORDER))
    ],
)
def test_rank_follows_the_contract(more: str, less: str) -> None:
    a, b = FaultLevel(more), FaultLevel(less)
    assert a.rank > b.rank
    assert a > b
    assert a >= b
    assert b < a
    assert b <= a
    assert a.is_more_serious_than(b)
    assert not b.is_more_serious_than(a)
    assert most_serious([b, a, b]) is a


def test_normal_is_rank_zero_and_ranks_are_distinct() -> None:
    assert FaultLevel.NORMAL_NPU.rank == 0
    assert sorted(level.rank for level in FaultLevel) == list(range(len(FaultLevel)))


def test_comparison_is_by_rank_not_alphabet() -> None:
    # Alphabetically "NormalNPU" > "ManuallySeparateNPU"; by severity it is the other way round.
    assert FaultLevel.NORMAL_NPU < FaultLevel.MANUALLY_SEPARATE_NPU
    assert sorted([FaultLevel.SEPARATE_NPU, FaultLevel.NORMAL_NPU, FaultLevel.RESTART_NPU]) == [
        FaultLevel.NORMAL_NPU,
        FaultLevel.RESTART_NPU,
        FaultLevel.SEPARATE_NPU,
    ]
    assert max(FaultLevel) is FaultLevel.MANUALLY_SEPARATE_NPU
    assert min(FaultLevel) is FaultLevel.NORMAL_NPU


@pytest.mark.parametrize(
    ("left", "right", "expected"),
    [
        (FaultLevel.SUB_HEALTH_FAULT, "NotHandleFault", True),
        ("NotHandleFault", FaultLevel.SUB_HEALTH_FAULT, False),
        (FaultLevel.NORMAL_NPU, "SeparateNPU", False),
    ],
)
def test_comparison_with_a_level_name(left: str, right: str, expected: bool) -> None:
    assert (left > right) is expected


@pytest.mark.parametrize("other", ["Separate", "", "normalnpu"])
def test_comparison_with_a_non_level_string_is_an_error(other: str) -> None:
    with pytest.raises(TypeError):
        _ = FaultLevel.RESTART_NPU < other  # noqa: SIM300 - the level on the left is the point
    with pytest.raises(TypeError):
        _ = other > FaultLevel.RESTART_NPU


def test_equality_and_hash_stay_those_of_the_wire_string() -> None:
    as_text: str = FaultLevel.SEPARATE_NPU
    assert as_text == "SeparateNPU"
    assert {"SeparateNPU": 1}[FaultLevel.SEPARATE_NPU] == 1
    assert FaultLevel("PreSeparateNPU") is FaultLevel.PRE_SEPARATE_NPU


def test_most_serious_of_nothing_is_normal() -> None:
    assert most_serious([]) is FaultLevel.NORMAL_NPU
    assert most_serious(iter([FaultLevel.NOT_HANDLE_FAULT])) is FaultLevel.NOT_HANDLE_FAULT


@pytest.mark.parametrize(
    ("level", "value", "name", "status"),
    [
        (SwitchFaultLevel.NOT_HANDLE, 0, "NotHandle", "Healthy"),
        (SwitchFaultLevel.SUB_HEALTH, 1, "SubHealthFault", "SubHealthy"),
        (SwitchFaultLevel.RESTART_REQUEST, 2, "RestartRequest", "UnHealthy"),
        (SwitchFaultLevel.PRE_SEPARATE, 3, "PreSeparate", "PreSeparate"),
        (SwitchFaultLevel.SEPARATE, 4, "Separate", "UnHealthy"),
    ],
)
def test_switch_levels(level: SwitchFaultLevel, value: int, name: str, status: str) -> None:
    assert int(level) == value
    assert level.level_name == name
    assert level.node_status == status


@pytest.mark.parametrize(
    ("levels", "expected"),
    [
        ([], None),
        ([SwitchFaultLevel.NOT_HANDLE], SwitchFaultLevel.NOT_HANDLE),
        ([SwitchFaultLevel.SEPARATE, SwitchFaultLevel.SUB_HEALTH], SwitchFaultLevel.SEPARATE),
        ([SwitchFaultLevel.RESTART_REQUEST, SwitchFaultLevel.PRE_SEPARATE], SwitchFaultLevel.PRE_SEPARATE),
    ],
)
def test_most_serious_switch(levels: list[SwitchFaultLevel], expected: SwitchFaultLevel | None) -> None:
    assert most_serious_switch(levels) == expected
