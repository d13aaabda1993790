"""Dynamic vNPU mode: npu-core devices and their health (contract section 4)."""

from __future__ import annotations

import pytest
from ascend_common.chips import ChipFamily, ResourceType
from ascend_device_plugin.model.chip_pod import ChipInfo
from ascend_device_plugin.vnpu.cores import core_health, core_ids
from hypothesis import given
from hypothesis import strategies as st


def chip(phy: int, aicore: int = 8, *, healthy: bool = True) -> ChipInfo:
    return ChipInfo(
        logic_id=7 - phy,
        phy_id=phy,
        card_id=phy,
        name=f"Ascend910-{phy}",
        rtype=ResourceType.ASCEND910,
        family=ChipFamily.ASCEND910B,
        aicore=aicore,
        healthy=healthy,
    )


def unhealthy(health: dict[str, bool]) -> set[str]:
    return {core for core, ok in health.items() if not ok}


def cores(*numbers: int) -> set[str]:
    return {f"npu-core-{n}" for n in numbers}


def test_core_ids_count_from_zero_across_chips_in_phy_order() -> None:
    mapping = core_ids([chip(1, 3), chip(0, 3)])  # discovery order must not matter
    assert mapping == {
        "npu-core-0": 0,
        "npu-core-1": 0,
        "npu-core-2": 0,
        "npu-core-3": 1,
        "npu-core-4": 1,
        "npu-core-5": 1,
    }
    assert list(mapping) == [f"npu-core-{n}" for n in range(6)]
    assert core_ids([]) == {}


def test_all_healthy_chips_give_all_healthy_cores() -> None:
    health = core_health([chip(0), chip(1)], {"npu-core-0": 0})
    assert len(health) == 16
    assert all(health.values())


def test_cores_of_pods_on_the_unhealthy_chip_go_first_then_free_cores() -> None:
    chips = [chip(0, healthy=False), chip(1)]
    in_use = {"npu-core-0": 0, "npu-core-1": 0, "npu-core-2": 1}  # a pod on chip 0, a pod on chip 1
    health = core_health(chips, in_use)
    assert unhealthy(health) == cores(0, 1, 3, 4, 5, 6, 7, 8)
    assert health["npu-core-2"] is True  # in use on a healthy chip


def test_in_use_cores_are_not_bound_to_the_chip_that_contributed_them() -> None:
    # Core ids are anonymous: a pod may hold npu-core-12 while its vNPU lives on chip 0.
    chips = [chip(0, healthy=False), chip(1)]
    health = core_health(chips, {"npu-core-12": 0, "npu-core-13": 0})
    assert unhealthy(health) == cores(12, 13, 0, 1, 2, 3, 4, 5)


def test_free_cores_are_taken_in_natural_order() -> None:
    # Plain string order would pick npu-core-10 and npu-core-11 before npu-core-2.
    chips = [chip(0, 4), chip(1, 4), chip(2, 4, healthy=False)]
    assert unhealthy(core_health(chips, {})) == cores(0, 1, 2, 3)


def test_two_unhealthy_chips_mark_twice_the_cores() -> None:
    chips = [chip(0, healthy=False), chip(1), chip(2, healthy=False)]
    health = core_health(chips, {"npu-core-20": 2, "npu-core-5": 1})
    assert len(unhealthy(health)) == 16
    assert "npu-core-20" in unhealthy(health)
    assert health["npu-core-5"] is True


def test_unknown_core_ids_in_use_are_ignored() -> None:
    health = core_health([chip(0, healthy=False), chip(1)], {"npu-core-99": 0, "Ascend910-0": 0})
    assert set(health) == {f"npu-core-{n}" for n in range(16)}
    assert unhealthy(health) == cores(*range(8))


def test_more_in_use_cores_than_the_count_are_all_kept_unhealthy() -> None:
    # Inconsistent input (9 cores on an 8-core chip): never report a core of a broken chip healthy.
    in_use = {f"npu-core-{n}": 0 for n in range(9)}
    assert unhealthy(core_health([chip(0, healthy=False), chip(1)], in_use)) == cores(*range(9))


def test_too_few_free_cores_marks_every_free_one() -> None:
    # Inconsistent input (chip 1's pods hold 12 of 16 cores); the reference would mark none.
    in_use = {f"npu-core-{n}": 1 for n in range(12)}
    assert unhealthy(core_health([chip(0, healthy=False), chip(1)], in_use)) == cores(12, 13, 14, 15)


@st.composite
def nodes(draw: st.DrawFn) -> tuple[list[ChipInfo], dict[str, int]]:
    n = draw(st.integers(1, 8))
    aicore = draw(st.integers(1, 24))
    bad = draw(st.sets(st.integers(0, n - 1)))
    chips = [chip(p, aicore, healthy=p not in bad) for p in range(n)]
    all_cores = list(core_ids(chips))
    # A consistent allocation: each chip's pods hold at most `aicore` cores, anywhere in the id space.
    per_chip = [draw(st.integers(0, aicore)) for _ in range(n)]
    held = draw(st.permutations(all_cores))
    in_use: dict[str, int] = {}
    start = 0
    for phy, count in enumerate(per_chip):
        for core in held[start : start + count]:
            in_use[core] = phy
        start += count
    return chips, in_use


@given(nodes())
def test_exactly_u_times_aicore_cores_are_unhealthy(node: tuple[list[ChipInfo], dict[str, int]]) -> None:
    chips, in_use = node
    health = core_health(chips, in_use)
    bad_chips = {c.phy_id for c in chips if not c.healthy}
    assert set(health) == set(core_ids(chips))
    assert len(unhealthy(health)) == len(bad_chips) * chips[0].aicore
    assert {core for core, phy in in_use.items() if phy in bad_chips} <= unhealthy(health)


@pytest.mark.parametrize("bad", [0, 1, 2, 3])
def test_any_single_unhealthy_chip_of_four(bad: int) -> None:
    chips = [chip(p, 20, healthy=p != bad) for p in range(4)]
    assert len(unhealthy(core_health(chips, {}))) == 20
