"""Affinity groups and GetPreferredAllocation (contract section 2, architecture: keep inside a ring / NUMA)."""

from __future__ import annotations

import pytest
from ascend_common.chips import ChipFamily, ResourceType
from ascend_device_plugin.model.chip_pod import ChipInfo
from ascend_device_plugin.placement.preferred import preferred_allocation
from ascend_device_plugin.placement.topology import affinity_groups, device_groups
from hypothesis import given
from hypothesis import strategies as st

R910 = ResourceType.ASCEND910


def chip(
    phy: int,
    family: ChipFamily,
    *,
    card: int | None = None,
    partner: int | None = None,
    numa: int | None = None,
) -> ChipInfo:
    return ChipInfo(
        logic_id=7 - phy,  # logic order differs from phy order: groups must use phy ids
        phy_id=phy,
        card_id=phy if card is None else card,
        name=f"Ascend910-{phy}",
        rtype=R910,
        family=family,
        aicore=32,
        healthy=True,
        numa_node=numa,
        partner_card=partner,
    )


def ids(*phys: int) -> list[str]:
    return [f"Ascend910-{p}" for p in phys]


A910_8 = [chip(p, ChipFamily.ASCEND910) for p in range(8)]
RINGS = device_groups(ids(*range(8)), affinity_groups(A910_8))


def test_910a_rings_are_phy_div_4() -> None:
    assert affinity_groups(A910_8) == {p: f"ring-{p // 4}" for p in range(8)}


def test_a3_groups_are_card_pairs_seen_from_either_card() -> None:
    chips = [
        chip(0, ChipFamily.ASCEND910A3, card=0, partner=1),
        chip(1, ChipFamily.ASCEND910A3, card=0, partner=1),
        chip(2, ChipFamily.ASCEND910A3, card=1, partner=0),
        chip(3, ChipFamily.ASCEND910A3, card=1, partner=0),
        chip(4, ChipFamily.ASCEND910A3, card=2, partner=None),
    ]
    assert affinity_groups(chips) == {0: "cards-0-1", 1: "cards-0-1", 2: "cards-0-1", 3: "cards-0-1", 4: "cards-2"}


def test_other_families_group_by_numa_else_whole_node() -> None:
    chips = [
        chip(0, ChipFamily.ASCEND910B, numa=0),
        chip(1, ChipFamily.ASCEND910B, numa=1),
        chip(2, ChipFamily.ASCEND910B),
    ]
    assert affinity_groups(chips) == {0: "numa-0", 1: "numa-1", 2: "node"}


def test_device_groups_maps_physical_and_vnpu_ids_and_skips_others() -> None:
    groups = {0: "ring-0", 5: "ring-1"}
    mapping = device_groups(["Ascend910-0", "Ascend910-2c-100-5", "npu-core-1", "Ascend910-7"], groups)
    assert mapping == {"Ascend910-0": "ring-0", "Ascend910-2c-100-5": "ring-1"}


# Contract acceptance examples: 910a-8 (rings 0-3 and 4-7) with Ascend910-1 taken.
AVAILABLE = ids(0, 2, 3, 4, 5, 6, 7)


def test_acceptance_size_4_takes_the_whole_free_ring() -> None:
    assert preferred_allocation(AVAILABLE, [], 4, RINGS) == ids(4, 5, 6, 7)


def test_acceptance_size_2_with_must_include_stays_in_its_ring() -> None:
    answer = preferred_allocation(AVAILABLE, ["Ascend910-2"], 2, RINGS)
    assert "Ascend910-2" in answer
    assert set(answer) <= set(ids(0, 2, 3))
    assert answer == ids(0, 2)


def test_acceptance_size_1_packs_into_the_ring_with_fewer_free_chips() -> None:
    assert preferred_allocation(AVAILABLE, [], 1, RINGS) == ids(0)


@pytest.mark.parametrize(
    ("available", "must", "size", "expected"),
    [
        (ids(*range(8)), [], 8, ids(*range(8))),  # no group fits: spill over both rings
        (ids(*range(8)), [], 5, ids(0, 1, 2, 3, 4)),  # spill: most free first, ties by key
        (ids(0, 1, 4, 5, 6), ["Ascend910-0"], 4, ids(0, 4, 5, 6)),  # must-include's ring too small
        (ids(*range(8)), ids(0, 4), 3, ids(0, 1, 4)),  # must-includes span rings: spill
        (ids(0, 1, 4, 5), [], 2, ids(0, 1)),  # equal free counts: group key order
        (ids(0, 1, 4, 5, 6), [], 2, ids(0, 1)),  # fewest free fitting group
        (ids(0, 1, 4, 5, 6), [], 3, ids(4, 5, 6)),  # ring-0 too small
        (ids(0, 1, 2, 4, 5, 6), ["Ascend910-6"], 2, ids(4, 6)),  # must-include decides the group
        (ids(3, 2, 1, 0), ["Ascend910-3"], 4, ids(0, 1, 2, 3)),  # input order does not matter
        (ids(0, 1), ids(0, 1), 2, ids(0, 1)),  # must-includes fill the request
    ],
)
def test_preferred_allocation_table(available: list[str], must: list[str], size: int, expected: list[str]) -> None:
    assert preferred_allocation(available, must, size, RINGS) == expected


def test_within_a_group_devices_are_taken_in_natural_order() -> None:
    groups = {"Ascend910-10": "numa-0", "Ascend910-2": "numa-0", "Ascend910-9": "numa-0", "Ascend910-1": "numa-1"}
    assert preferred_allocation(list(groups), [], 2, groups) == ["Ascend910-2", "Ascend910-9"]


def test_group_keys_tie_in_natural_order() -> None:
    groups = {"Ascend910-0": "numa-10", "Ascend910-1": "numa-2"}
    assert preferred_allocation(list(groups), [], 1, groups) == ["Ascend910-1"]


def test_ids_without_a_group_share_one_catch_all_group() -> None:
    groups = {"Ascend910-0": "ring-0", "Ascend910-1": "ring-0", "Ascend910-2": "ring-0"}
    available = [*groups, "Ascend910-8", "Ascend910-9"]
    assert preferred_allocation(available, [], 2, groups) == ["Ascend910-8", "Ascend910-9"]


@pytest.mark.parametrize(
    ("available", "must", "size", "message"),
    [
        (AVAILABLE, [], 0, "must be positive"),
        (AVAILABLE, [], -1, "must be positive"),
        (AVAILABLE, [], 8, "exceeds the 7 available"),
        (AVAILABLE, ["Ascend910-1"], 2, "'Ascend910-1' is not available"),
        (AVAILABLE, ["Ascend910-9"], 2, "'Ascend910-9' is not available"),
        (AVAILABLE, ids(0, 2, 3), 2, "exceed the allocation size 2"),
        ([], [], 1, "exceeds the 0 available"),
    ],
)
def test_preferred_allocation_rejects_bad_requests(
    available: list[str], must: list[str], size: int, message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        preferred_allocation(available, must, size, RINGS)


@st.composite
def requests(draw: st.DrawFn) -> tuple[list[str], list[str], int, dict[str, str]]:
    n_groups = draw(st.integers(1, 4))
    group_size = draw(st.integers(1, 8))
    group_of = {f"Ascend910-{g * group_size + i}": f"numa-{g}" for g in range(n_groups) for i in range(group_size)}
    available = draw(st.lists(st.sampled_from(sorted(group_of)), min_size=1, unique=True))
    size = draw(st.integers(1, len(available)))
    must = draw(st.lists(st.sampled_from(available), unique=True, max_size=size))
    return available, must, size, group_of


@given(requests())
def test_preferred_allocation_properties(request: tuple[list[str], list[str], int, dict[str, str]]) -> None:
    available, must, size, group_of = request
    answer = preferred_allocation(available, must, size, group_of)
    assert len(answer) == size == len(set(answer))
    assert set(answer) <= set(available)
    assert set(must) <= set(answer)
    free: dict[str, int] = {}
    for device in available:
        free[group_of[device]] = free.get(group_of[device], 0) + 1
    must_groups = {group_of[d] for d in must}
    fitting = [g for g, n in free.items() if n >= size and must_groups <= {g}]
    if fitting:
        used = {group_of[d] for d in answer}
        assert len(used) == 1, "a request that fits one group stays in one group"
        assert free[used.pop()] == min(free[g] for g in fitting), "packing: the fitting group with fewest free"
