"""Ports of the reference's Go tests of inference hot reset (-hotReset=0).

The reference tests methods of HwDevManager (pkg/server/manager_test.go: chipHotReset,
resetCommonInferCard, resetDuoCard) and the function setHealthyIfDuoCard
(pkg/device/ascendcommon_test.go), which read the mode, the card type and the Duo flag from
process globals and gomonkey patches. Ours are pure rules, each case passing those as arguments:
- the mode (-hotReset, main.go checkHotResetMode) -> FaultManagerSettings.reset_mode;
- isPodRemove -> planner.pod_on_group(group, pods) (None: no pod holds the group);
- checkNoProc and the idle period -> planner.why_not(group, ...);
- the group reset together (a Duo card, a chip alone on a 910B board without HCCS, an HCCS ring)
  -> ascend_common.reset_groups.group_of;
- a healthy chip skipped -> planner.candidates (only a level a reset heals);
- setHealthyIfDuoCard -> hotreset.duo (duo_card_mates, with_duo_rule) and the reactor that applies it.
Test names are the Go test's, then the convey case or table row.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from ascend_common.faults import (
    FaultLevel,
)
from ascend_common.pods import SlimPod
from ascend_common.reset_groups import group_of
from ascend_common.schemas.exporter import Chip, ChipList, ChipProcess
from ascend_common.schemas.reading import Reading
from ascend_common.schemas.verdict import ChipVerdict, VerdictReason
from fault_manager.hotreset import planner
from fault_manager.hotreset.duo import duo_card_mates, with_duo_rule
from fault_manager.reactor.inputs import Inbox, Snapshot
from fault_manager.reactor.published import Published
from fault_manager.reactor.reactor import Reactor
from fault_manager.settings import HOT_RESET_INFER, HOT_RESET_OFF, HOT_RESET_TRAIN, FaultManagerSettings
from pydantic import ValidationError

from tests.support.chips import exporter_chip
from tests.support.reactor import running_reactor

RESTART_NPU = "8C1FA006"
DUO = "Atlas 300I Duo"
IDLE = 60.0
MODES = "modes are -1 (off), 0 (inference) and 2"


def duo_node(codes: dict[int, list[str]] | None = None, product: str = DUO) -> list[Chip]:
    """Two Atlas 300I Duo cards (310P3, board 0x67): logic 0 and 1 on card 0, 2 and 3 on card 1."""
    codes = codes or {}
    return [
        exporter_chip(i, i, name="310P3", board=0x67, aicore=8, card_id=i // 2, product=product, codes=codes.get(i))
        for i in range(4)
    ]


def infer_910b_node(board: int) -> list[Chip]:
    return [exporter_chip(i, i, name="910B4", board=board, product="Atlas 300I A2") for i in range(4)]


def verdict(chip: Chip, schedulable: bool, level: FaultLevel = FaultLevel.NORMAL_NPU) -> ChipVerdict:
    return ChipVerdict(
        chip=chip.name, logic_id=chip.logic_id, phy_id=chip.phy_id, fault_level=level, schedulable=schedulable,
        reason=VerdictReason.NORMAL if schedulable else VerdictReason.FAULT_CODE, since=0.0,
    )  # fmt: skip


def pod_on(*names: str, name: str = "infer-0") -> SlimPod:
    return SlimPod(
        namespace="serving", name=name, uid=f"uid-{name}", phase="Running", node_name="node-a",
        annotations={"huawei.com/AscendReal": ",".join(names)}, labels={}, requests={}, deleting=False,
        created=0.0, resource_version="1",
    )  # fmt: skip


def with_processes(chip: Chip, pids: list[int]) -> Chip:
    assert chip.dynamic is not None
    procs = [ChipProcess(pid=p, memory_bytes=0) for p in pids]
    dyn = chip.dynamic.model_copy(update={"processes": Reading[list[ChipProcess]].ok(procs)})
    return chip.model_copy(update={"dynamic": dyn})


def may_reset(group: list[Chip], pods: list[SlimPod], now: float = 1000.0) -> str | None:
    """resetDuoCard / resetCommonInferCard's checks in order: isPodRemove, then checkNoProc (and the
    unified manager's idle period, here long past: every chip last busy at 0)."""
    return planner.pod_on_group(group, pods) or planner.why_not(group, now, set(), {}, 0.0, IDLE)


# --- main.go checkHotResetMode: the flag's values ----------------------------------------------------


@pytest.mark.parametrize(
    ("args", "mode"),
    [
        pytest.param({}, HOT_RESET_OFF, id="default: HotResetClose"),
        pytest.param({"hot_reset_mode": -1}, HOT_RESET_OFF, id="HotResetClose"),
        pytest.param({"hot_reset_mode": 0}, HOT_RESET_INFER, id="HotResetInfer"),
        pytest.param({"hot_reset_mode": 2}, HOT_RESET_TRAIN, id="HotResetTrainOffLine"),
        pytest.param({"hot_reset": True}, HOT_RESET_TRAIN, id="ours: --hot-reset is mode 2"),
        pytest.param({"hot_reset": True, "hot_reset_mode": 2}, HOT_RESET_TRAIN, id="ours: both, agreeing"),
    ],
)
def test_checkHotResetMode_valid(args: dict[str, object], mode: int) -> None:
    assert FaultManagerSettings(**args).reset_mode == mode  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        pytest.param({"hot_reset_mode": 1}, MODES, id="hot reset mode param invalid: 1"),
        pytest.param({"hot_reset_mode": -2}, MODES, id="hot reset mode param invalid: -2"),
        pytest.param(
            {"hot_reset": True, "hot_reset_mode": 0}, "contradicts --hot-reset-mode 0", id="ours: both, disagreeing"
        ),
    ],
)  # fmt: skip
def test_checkHotResetMode_invalid(args: dict[str, object], message: str) -> None:
    with pytest.raises(ValidationError, match=re.escape(message)):
        FaultManagerSettings(**args)  # type: ignore[arg-type]


# --- TestSetHealthyIfDuoCard: 4 convey cases ------------------------------------------------------


def test_SetHealthyIfDuoCard_01_not_contain_atlas_300IDuo_should_not_update_groupDevice() -> None:
    chips = duo_node(product="Atlas 300V Pro")
    assert duo_card_mates(chips) == {}
    own = {chips[0].name: verdict(chips[0], True), chips[1].name: verdict(chips[1], False)}
    assert with_duo_rule(own[chips[0].name], duo_card_mates(chips), own) == own[chips[0].name]


def test_SetHealthyIfDuoCard_02_HotReset_is_not_infer_should_not_update_groupDevice() -> None:
    # The rule is on only in mode 0: the fault-manager gives the reactor duo_rule = (mode == 0).
    assert FaultManagerSettings(hot_reset_mode=HOT_RESET_TRAIN).reset_mode != HOT_RESET_INFER


def test_SetHealthyIfDuoCard_03_not_found_devices_should_not_update_groupDevice() -> None:
    assert duo_card_mates([]) == {}
    # A node whose Duo product type comes with no 310P chip (groupDevice[Ascend310P] absent).
    assert duo_card_mates([exporter_chip(0, 0, product=DUO)]) == {}


def test_SetHealthyIfDuoCard_04_update_unhealthy_card_status_should_update_groupDevice() -> None:
    chips = duo_node()
    mates = duo_card_mates(chips)
    assert mates == {chips[0].name: (chips[1].name,), chips[1].name: (chips[0].name,),
                     chips[2].name: (chips[3].name,), chips[3].name: (chips[2].name,)}  # fmt: skip
    own = {
        chips[0].name: verdict(chips[0], True),
        chips[1].name: verdict(chips[1], False, FaultLevel.RESTART_NPU),
        chips[2].name: verdict(chips[2], True),
        chips[3].name: verdict(chips[3], True),
    }
    published = {name: with_duo_rule(v, mates, own) for name, v in own.items()}
    assert published[chips[0].name].schedulable is False
    assert published[chips[0].name].reason is VerdictReason.DUO_CARD
    assert published[chips[0].name].fault_level is FaultLevel.NORMAL_NPU  # only the health changes
    assert published[chips[1].name] == own[chips[1].name]
    assert published[chips[2].name] == own[chips[2].name] and published[chips[3].name] == own[chips[3].name]


@pytest.fixture
async def running(tmp_path: Path) -> AsyncIterator[tuple[Reactor, Inbox, Published]]:
    async with running_reactor(tmp_path, duo_rule=True) as rig:
        yield rig


async def test_SetHealthyIfDuoCard_04_through_the_reactor_the_cardmate_follows_and_comes_back(
    running: tuple[Reactor, Inbox, Published],
) -> None:
    _, inbox, published = running
    inbox.put(Snapshot(ChipList(last_event_id="run-1", chips=duo_node({1: [RESTART_NPU]})), switch_faults=None))
    async with asyncio.timeout(5):
        await published.inventory.wait()
    names = [c.name for c in duo_node()]

    async def settled(want: dict[str, bool]) -> dict[str, ChipVerdict]:
        async with asyncio.timeout(5):
            while {n: v.schedulable for n, v in published.verdicts().items()} != want:
                await asyncio.sleep(0.01)
        return published.verdicts()

    seen = await settled({names[0]: False, names[1]: False, names[2]: True, names[3]: True})
    assert seen[names[0]].reason is VerdictReason.DUO_CARD and seen[names[0]].codes == []
    # The fault recovers: its cardmate is schedulable again with it, without an event of its own.
    inbox.put(Snapshot(ChipList(last_event_id="run-1", chips=duo_node()), switch_faults=None))
    seen = await settled(dict.fromkeys(names, True))
    assert all(v.reason is VerdictReason.NORMAL for v in seen.values())


# --- TestChipHotReset: 3 of 4 convey cases ---------------------------------------------------------
# "When device is virtual, skip it": the exporter lists vNPUs inside their chip, never as chips, so
# hot reset never sees one; no case to port.


def test_ChipHotReset_When_HotReset_mode_is_not_Infer_log_debug_and_return() -> None:
    assert FaultManagerSettings(hot_reset_mode=HOT_RESET_TRAIN).reset_mode != HOT_RESET_INFER
    assert FaultManagerSettings().reset_mode == HOT_RESET_OFF


def test_ChipHotReset_When_device_is_Atlas300IDuo_call_resetDuoCard() -> None:
    chips = duo_node()
    assert [c.logic_id for c in group_of(chips[1], chips)] == [0, 1]
    assert [c.logic_id for c in group_of(chips[2], chips)] == [2, 3]


def test_ChipHotReset_When_normal_infer_device_call_resetCommonInferCard() -> None:
    chips = infer_910b_node(0x28)  # the sim's 910b-infer-4: Atlas 300I A2
    assert [c.logic_id for c in group_of(chips[2], chips)] == [2]


# --- TestResetDuoCard: 1 convey case --------------------------------------------------------------


def test_ResetDuoCard_When_duo_card_not_removable_skip_reset() -> None:
    chips = duo_node()
    group = group_of(chips[0], chips)
    # A pod on the healthy chip of the card keeps the card from a reset (isDuoRemove).
    reason = may_reset(group, [pod_on(chips[1].name)])
    assert reason is not None and f"pod serving/infer-0 uses {chips[1].name}" in reason


# --- TestChipHotResetFor300IDuo: 2 table rows ----------------------------------------------------
# The Go test counts ResetFailedTimes (1 before): unchanged when nothing is reset, 0 after a reset
# that succeeded. Ours: whether the card may be reset now, and which chips go together.


@pytest.mark.parametrize(
    ("pod_moved", "reset"),
    [
        pytest.param(False, False, id="01-pod not move, should not reset chip"),
        pytest.param(True, True, id="02-reset chip"),
    ],
)
def test_ChipHotResetFor300IDuo(pod_moved: bool, reset: bool) -> None:
    chips = duo_node({1: [RESTART_NPU]})  # card 0: logic 0 Healthy, logic 1 Unhealthy
    own = [verdict(chips[0], True), verdict(chips[1], False, FaultLevel.RESTART_NPU)]
    assert planner.candidates(own, set()) == [chips[1].name]
    group = group_of(chips[1], chips)
    assert [c.logic_id for c in group] == [0, 1]
    pods = [] if pod_moved else [pod_on(chips[1].name)]
    assert (may_reset(group, pods) is None) is reset


# --- TestResetCommonInferCard: the cases of a rule of ours -------------------------------------------
# The nil-receiver and empty-AllDevs cases guard Go pointers; the A3 case is the A3 ring's
# (test_reference_hot_reset_rings in libs/common); GetServerBoardId failing is the 910B board rule's
# (reset_groups: the lowest known board id).


@pytest.mark.parametrize(
    "board",
    [
        pytest.param(0x3C, id="When boardId is A800IA2NoneHccsBoardId, call ResetWithoutHccsServer"),
        pytest.param(0x33, id="When boardId is A800IA2NoneHccsBoardIdOld, call ResetWithoutHccsServer"),
        pytest.param(0x28, id="When boardId is A300IA2BoardId, call ResetWithoutHccsServer"),
        pytest.param(0x29, id="When boardId is A300IA2GB64BoardId, call ResetWithoutHccsServer"),
    ],
)
def test_ResetCommonInferCard_without_hccs_one_card_at_a_time(board: int) -> None:
    chips = infer_910b_node(board)
    assert all([c.logic_id for c in group_of(chip, chips)] == [chip.logic_id] for chip in chips)


def test_ResetCommonInferCard_When_boardId_is_not_NoneHccsBoardId_call_ResetHccsServer() -> None:
    chips = [exporter_chip(i, i) for i in range(8)]  # board 0x22: HCCS, all 8 at once
    assert [c.logic_id for c in group_of(chips[5], chips)] == list(range(8))


def test_ResetCommonInferCard_When_card_type_is_not_A3_or_910B_and_device_is_healthy_should_skip_reset() -> None:
    chip = exporter_chip(0, 0, name="310P3", board=0x64, product="Atlas 300I Pro")
    assert planner.candidates([verdict(chip, True)], set()) == []


def test_ResetCommonInferCard_When_not_A3_or_910B_and_isPodRemove_returns_false_should_skip_reset() -> None:
    chip = exporter_chip(0, 0, name="310P3", board=0x64, product="Atlas 300I Pro")
    reason = may_reset([chip], [pod_on(chip.name)])
    assert reason is not None and "pod serving/infer-0" in reason


def test_ResetCommonInferCard_When_not_A3_or_910B_and_checkNoProc_returns_false_should_skip_reset() -> None:
    chip = with_processes(exporter_chip(0, 0, name="310P3", board=0x64, product="Atlas 300I Pro"), [4242])
    assert may_reset([chip], []) == f"processes run on {chip.name}"


def test_ResetCommonInferCard_When_card_type_is_not_A3_or_910B_and_all_checks_pass_should_call_hotReset() -> None:
    chip = exporter_chip(0, 0, name="310P3", board=0x64, product="Atlas 300I Pro", codes=[RESTART_NPU])
    assert planner.candidates([verdict(chip, False, FaultLevel.RESTART_NPU)], set()) == [chip.name]
    assert [c.name for c in group_of(chip, [chip])] == [chip.name]
    assert may_reset([chip], [pod_on("Ascend310P-9")]) is None  # a pod on another chip holds nothing of it


# --- beyond the Go cases: the idle period of the unified manager --------------------------------------


def test_a_group_a_pod_left_waits_the_idle_period_from_then() -> None:
    chip = exporter_chip(0, 0, name="310P3", board=0x64, product="Atlas 300I Pro")
    # Last seen busy (held) at t=950: at t=1000 it has been idle 50 s of the 60 s needed.
    reason = planner.why_not([chip], 1000.0, set(), {chip.name: 950.0}, 0.0, IDLE)
    assert reason == "idle for 50.0 s of the 60.0 s needed"
    assert planner.why_not([chip], 1010.0, set(), {chip.name: 950.0}, 0.0, IDLE) is None
