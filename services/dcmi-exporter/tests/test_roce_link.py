"""Lost RoCE link-down events on the 910 (issue 26 item 2): the pure rule (`snapshot.roce_codes`, the
shared `lost_events` rule) with the reference's test tables, then the RoCE task over the sim and over a
fake hccn_tool; the task's clock is a ManualClock so the 5-minute limit can be crossed at once."""

from __future__ import annotations

import asyncio
import stat
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from ascend_common.chips import ChipAddress, ChipFamily, is_910_family
from ascend_common.clock import ManualClock
from ascend_common.faults.codes import LINK_DOWN_CODE, UBOE_PORT_DOWN_CODE, UBOE_PRESEPARATE_CODE, UBOE_SUBHEALTH_CODE
from ascend_common.schemas.exporter import (
    Chip,
    EventSource,
    EventType,
    FaultEventData,
    NodeInfo,
    SubscriptionState,
    UbPorts,
)
from ascend_common.schemas.reading import Reading
from dcmi_exporter.backends.dcmi.hccn import HccnRoceLink, HccnTool
from dcmi_exporter.backends.sim.backend import SimBackend
from dcmi_exporter.backends.sim.hang_probe import SimRoceLinkProbe
from dcmi_exporter.node.snapshot import (
    RoceChipInput,
    Snapshot,
    UbChipInput,
    chip_discovered,
    chip_ok,
    codes_of,
    placeholder_static,
    roce_codes,
    ub_codes,
)
from dcmi_exporter.runtime import Exporter
from dcmi_exporter.settings import ExporterSettings
from dcmi_exporter.tasks.lost_events import NETWORK_UNHEALTHY_S, QUERY_PERIOD_S, LostEventRule
from dcmi_exporter.tasks.roce import RoceLinkTask

from tests.support.exporter_inprocess import ready_exporter

LINK_DOWN = LINK_DOWN_CODE
CARD_DROP = "40F84E00"

# ---------------------------------------------------------------------- the rule, the reference's tables


@pytest.mark.parametrize(
    ("case", "chip", "want"),
    [
        # TestQueryNetworkStatusWithoutRoCEDev
        (
            "1-faultCodes not empty: returned as they are",
            RoceChipInput(frozenset({LINK_DOWN}), lost=True, link="DOWN"),
            [],
        ),
        ("3-link status normal", RoceChipInput(frozenset(), lost=True, link="UP"), []),
        # Case 4 (DOWN with 0 ports down) has no RoCE reading of ours: the reference itself derives 1 port
        # from DOWN (getRoceParameterPlaneStatus); its "not DOWN" side is a status the tool may print:
        ("4-link status abnormal but not DOWN", RoceChipInput(frozenset(), lost=True, link="Abnormal"), []),
        # TestHandleLostNetworkFaultEvents 02: the library lists it: the event is the library's, none of ours
        ("02-library lists LinkDown and CardDrop", RoceChipInput(frozenset({LINK_DOWN, CARD_DROP}), lost=True), []),
        # TestGenerateNetworkFaultEventsBasedOnFaultCacheChange
        ("network fault codes not empty", RoceChipInput(frozenset({LINK_DOWN}), lost=True, link="DOWN"), []),
        ("empty, get link status failed", RoceChipInput(frozenset(), lost=True, link=None), []),
        ("empty, device healthy but link down", RoceChipInput(frozenset(), lost=True, link="DOWN"), [LINK_DOWN]),
        ("empty, health matches link status", RoceChipInput(frozenset(), lost=True, link="UP"), []),
        # Ours: held while no read says otherwise, dropped once a read says UP, never raised without a lost check
        ("held, link still DOWN", RoceChipInput(frozenset(), held=True, link="DOWN"), [LINK_DOWN]),
        ("held, read failed since", RoceChipInput(frozenset(), held=True, link=None), [LINK_DOWN]),
        ("held, link UP again", RoceChipInput(frozenset(), held=True, link="UP"), []),
        ("no lost check, link DOWN", RoceChipInput(frozenset(), link="DOWN"), []),
        (
            "another parameter-plane code listed",
            RoceChipInput(frozenset({UBOE_PORT_DOWN_CODE}), lost=True, link="DOWN"),
            [],
        ),
        ("a chip code only", RoceChipInput(frozenset({"80E01801"}), lost=True, link="DOWN"), [LINK_DOWN]),
    ],
)
def test_query_parameter_plane_status_without_fault_code(case: str, chip: RoceChipInput, want: list[str]) -> None:
    assert roce_codes(chip) == want, case


def test_query_network_status_without_roce_dev_case5_a5_all_ports_up() -> None:
    """TestQueryNetworkStatusWithoutRoCEDev case 5: an A5 with a UBoE device and no bonding port down
    raises nothing (the 950's parameter plane is the UB task's)."""
    chip = UbChipInput(raw=frozenset(), ports=UbPorts(ub_down=0, bonding_down=0), lost_ub=True, lost_uboe=True)
    assert ub_codes({0: chip}) == {0: []}
    assert not {UBOE_PORT_DOWN_CODE, UBOE_SUBHEALTH_CODE, UBOE_PRESEPARATE_CODE} & set(ub_codes({0: chip})[0])


@pytest.mark.parametrize(
    ("case", "family", "roce"),
    [
        # TestWithoutParameterPlane: which chips the RoCE task asks (the 950's plane is the UB task's)
        ("01-Ascend310 without parameter plane", ChipFamily.ASCEND310, False),
        ("02-Ascend310P without parameter plane", ChipFamily.ASCEND310P, False),
        ("03-Ascend310B without parameter plane", ChipFamily.ASCEND310B, False),
        ("04/05-Ascend910A5: its UBoE plane is the UB task's, never RoCE", ChipFamily.ASCEND950, False),
        ("06-Ascend910 with parameter plane", ChipFamily.ASCEND910, True),
        ("910B (Ascend910 run mode)", ChipFamily.ASCEND910B, True),
        ("A3 (Ascend910 run mode)", ChipFamily.ASCEND910A3, True),
    ],
)
def test_without_parameter_plane(case: str, family: ChipFamily, roce: bool) -> None:
    assert is_910_family(family) is roce, case


class _Poller:
    """The one thing LostEventRule asks the poller: its reset epochs."""

    def __init__(self) -> None:
        self.epochs: dict[int, int] = {}

    def reset_epoch(self, logic: int) -> int:
        return self.epochs.get(logic, 0)


def test_network_limiter_rate_limiting_and_multiple_devices() -> None:
    """The reference's limiter cases (initialization, rate limiting, multiple devices): one read per
    chip per 5 minutes, each chip its own; a change of the library's plane codes reads at once."""
    rule = LostEventRule(_Poller())  # type: ignore[arg-type]
    none: frozenset[str] = frozenset()
    assert rule.due(0, none, 0.0), "initialization: the first read is allowed"
    assert not rule.due(0, none, 1.0) and not rule.due(0, none, QUERY_PERIOD_S - 0.1), "rate limited"
    assert rule.due(1, none, 1.0), "another chip has its own limiter"
    assert rule.due(0, none, QUERY_PERIOD_S), "5 minutes on: allowed again"
    assert rule.due(0, frozenset({LINK_DOWN}), QUERY_PERIOD_S + 1), "the library's codes changed: an event"


def test_network_more_than_five_min() -> None:
    rule = LostEventRule(_Poller())  # type: ignore[arg-type]
    chip = chip_discovered(ChipAddress(0, 0, 0, 0), placeholder_static(-8005))
    bad = chip.model_copy(update={"network_healthy": False})
    assert not rule.network_bad_long(bad, 100.0)
    assert not rule.network_bad_long(bad, 100.0 + NETWORK_UNHEALTHY_S), "more than 5 minutes, not 5"
    assert rule.network_bad_long(bad, 100.1 + NETWORK_UNHEALTHY_S)
    assert not rule.network_bad_long(chip, 101.0 + NETWORK_UNHEALTHY_S), "healthy (or unknown): the time restarts"
    assert not rule.network_bad_long(bad, 102.0 + NETWORK_UNHEALTHY_S)


def test_lost_first_round_after_a_reset_and_without_subscription() -> None:
    poller = _Poller()
    rule = LostEventRule(poller)  # type: ignore[arg-type]
    chip = chip_discovered(ChipAddress(0, 0, 3, 7), placeholder_static(-8005))
    assert rule.lost(chip, subscription_failed=False), "the first round (the reference's first flush)"
    assert not rule.lost(chip, subscription_failed=False)
    assert rule.lost(chip, subscription_failed=True), "no subscription: every round"
    poller.epochs[3] = 2  # two resets noticed between our rounds
    assert rule.lost(chip, subscription_failed=False), "after a reset"
    assert not rule.lost(chip, subscription_failed=False), "once per reset noticed"


def test_a_reset_reads_again_within_the_5_minutes() -> None:
    """Ours: the reference answers a post-reset check from its pre-reset cache within the 5 minutes."""
    poller = _Poller()
    rule = LostEventRule(poller)  # type: ignore[arg-type]
    chip = chip_discovered(ChipAddress(0, 0, 3, 7), placeholder_static(-8005))
    none: frozenset[str] = frozenset()
    assert rule.lost(chip, subscription_failed=False) and rule.due(3, none, 0.0)
    assert not rule.due(3, none, 10.0)
    poller.epochs[3] = 1
    assert rule.lost(chip, subscription_failed=False)
    assert rule.due(3, none, 20.0), "the reset: read now"
    assert not rule.due(3, none, 30.0), "one read per reset, then the 5 minutes again"


# ---------------------------------------------------------------------- the task over the sim


class CountingProbe(SimRoceLinkProbe):
    def __init__(self, backend: SimBackend) -> None:
        super().__init__(backend)
        self.queries: list[int] = []

    async def link_status(self, chip: Chip) -> str:
        self.queries.append(chip.logic_id)
        return await super().link_status(chip)


@dataclass
class Rig:
    exp: Exporter
    sim: SimBackend
    task: RoceLinkTask
    probe: CountingProbe
    clock: ManualClock

    def codes(self, logic: int) -> list[str]:
        return codes_of(self.exp.poller.snapshot.by_logic[logic])

    async def round(self) -> None:
        await asyncio.sleep(0.05)  # the sim's events hop to the loop first
        await self.task.tick()

    def roce_events(self) -> list[FaultEventData]:
        stored = self.exp.events.after(0) or []
        faults = [e.item.fault for e in stored if e.item.type is EventType.FAULT and e.item.fault is not None]
        return [f for f in faults if f.source is EventSource.ROCE]

    async def network_healthy(self, logic: int, healthy: bool) -> None:
        while self.exp.poller.snapshot.by_logic[logic].network_healthy is not healthy:
            await asyncio.sleep(0.05)


async def rig_for(tmp_path: Path, profile: str = "910b-8", subscription: bool = True) -> AsyncIterator[Rig]:
    settings = ExporterSettings(socket=tmp_path / "sock", profile=profile, poll_period=0.2)
    sim = SimBackend(profile, subscription=subscription)
    async with ready_exporter(settings, sim) as exp:
        clock = ManualClock()
        probe = CountingProbe(sim)
        task = RoceLinkTask(exp.poller, probe, 1.0, clock, exp.lifecycle.scope("roce-test"))
        yield Rig(exp, sim, task, probe, clock)


@pytest.fixture
async def rig(tmp_path: Path) -> AsyncIterator[Rig]:
    async for r in rig_for(tmp_path):
        yield r


@pytest.fixture
async def rig_no_subscription(tmp_path: Path) -> AsyncIterator[Rig]:
    async for r in rig_for(tmp_path, subscription=False):
        yield r


async def test_subscription_failed_and_a_lost_link_down_give_one_81078603_and_one_read_per_5_min(
    rig_no_subscription: Rig,
) -> None:
    rig = rig_no_subscription
    await rig.round()
    assert rig.probe.queries.count(4) == 1, "the first round reads every chip once"
    rig.sim.set_network(4, healthy=False, event=False)  # a lost event (and no subscription)
    await rig.round()
    assert rig.codes(4) == [], "within 5 min of the last read the link is not read again"
    rig.clock.advance(QUERY_PERIOD_S)
    await rig.round()
    assert rig.probe.queries.count(4) == 2
    assert rig.codes(4) == [LINK_DOWN]
    [occur] = rig.roce_events()
    assert (occur.code, occur.assertion.value, occur.source) == (LINK_DOWN, "occur", EventSource.ROCE)
    for _ in range(3):  # a second poll within 5 min adds nothing
        await rig.round()
    assert rig.probe.queries.count(4) == 2
    assert rig.codes(4) == [LINK_DOWN] and len(rig.roce_events()) == 1
    await asyncio.sleep(0.5)  # polls of the library (every 0.2 s) list no such code: the exporter keeps it
    assert rig.codes(4) == [LINK_DOWN]
    rig.sim.set_network(4, healthy=True, event=False)
    await rig.round()
    assert rig.codes(4) == [LINK_DOWN], "held until the next read, 5 min after the last"
    rig.clock.advance(QUERY_PERIOD_S)
    await rig.round()
    assert rig.codes(4) == []
    assert [e.assertion.value for e in rig.roce_events()] == ["occur", "recover"]
    assert all(rig.codes(i) == [] for i in range(8) if i != 4)


async def test_at_the_first_round_a_lost_link_down_is_found(rig: Rig) -> None:
    rig.sim.set_network(2, healthy=False, event=False)
    await rig.round()
    assert rig.codes(2) == [LINK_DOWN]
    assert all(rig.codes(i) == [] for i in range(8) if i != 2)
    rig.sim.set_network(6, healthy=False, event=False)
    rig.clock.advance(QUERY_PERIOD_S)
    await rig.round()
    assert rig.codes(6) == [], "a live subscription, past the first round, no reset: not looked for"


async def test_network_unhealthy_over_5_min_makes_the_link_looked_for(rig: Rig) -> None:
    await rig.round()
    rig.sim.set_network(1, healthy=False, event=False)  # network health reads 1, no code, no event
    await rig.network_healthy(1, False)
    await rig.round()
    assert rig.codes(1) == [], "unhealthy for less than 5 min: not yet"
    rig.clock.advance(NETWORK_UNHEALTHY_S + 1)
    await rig.round()
    assert rig.codes(1) == [LINK_DOWN]


async def test_after_a_reset_a_lost_link_down_is_found(rig: Rig) -> None:
    await rig.round()
    rig.sim.set_network(3, healthy=False, event=False)
    rig.clock.advance(QUERY_PERIOD_S)
    await rig.round()
    assert rig.codes(3) == []
    rig.sim.inject_fault(3, "8C2FA009", "once", severity=0)  # the driver: reset finished
    await rig.round()
    assert rig.codes(3) == [LINK_DOWN]


async def test_the_librarys_own_code_is_never_doubled(rig_no_subscription: Rig) -> None:
    rig = rig_no_subscription
    rig.sim.set_network(5, healthy=False)  # the library lists 81078603 itself
    while LINK_DOWN not in rig.codes(5):
        await asyncio.sleep(0.05)
    await rig.round()
    rig.clock.advance(QUERY_PERIOD_S)
    await rig.round()
    assert rig.codes(5) == [LINK_DOWN] and rig.roce_events() == []
    assert 5 not in rig.probe.queries, "the library lists a parameter-plane code: the link is not asked"


async def test_the_drivers_recover_event_ends_ours_at_once(rig: Rig) -> None:
    rig.sim.set_network(0, healthy=False, event=False)
    await rig.round()  # the first round finds it
    assert rig.codes(0) == [LINK_DOWN]
    rig.sim.inject_fault(0, LINK_DOWN, "recover")  # the link is back and the driver says so
    rig.sim.set_network(0, healthy=True, event=False)
    await rig.round()
    await asyncio.sleep(0.5)  # polls (every 0.2 s) do not bring it back
    assert rig.codes(0) == [], "the driver's recover ends it before our next read"
    await rig.round()
    assert rig.codes(0) == []


async def test_an_unreadable_link_raises_nothing(rig_no_subscription: Rig, monkeypatch: pytest.MonkeyPatch) -> None:
    """Ours: the reference counts a failed `-link -g` as DOWN; a broken tool would then mark every chip."""
    rig = rig_no_subscription

    async def broken(_chip: Chip) -> str:
        raise ValueError("no hccn_tool")

    monkeypatch.setattr(rig.probe, "link_status", broken)
    rig.sim.set_network(2, healthy=False, event=False)
    await rig.round()
    assert all(rig.codes(i) == [] for i in range(8))


async def test_no_roce_reads_on_a_950_or_310(tmp_path: Path) -> None:
    for profile in ("a5-superpod-8", "310p-4"):
        async for rig in rig_for(tmp_path / profile, profile=profile, subscription=False):
            await rig.round()
            assert rig.probe.queries == [], profile


# ---------------------------------------------------------------------- over a fake hccn_tool


def fake_hccn(tmp_path: Path) -> tuple[Path, Path]:
    """A hccn_tool answering `-i <phy> -link -g` with `<state>/link_<phy>` (UP when absent)."""
    state = tmp_path / "hccn"
    state.mkdir()
    path = tmp_path / "hccn_tool"
    path.write_text(
        f"""#!/bin/sh
echo "$*" >> {state}/calls
case "$*" in
  "-i "*" -link -g") f={state}/link_$2
    if [ -e $f ]; then echo "link status: $(cat $f)"; else echo "link status: UP"; fi ;;
  *) exit 2 ;;
esac
"""
    )
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path, state


async def test_over_hccn_tool_the_link_of_the_chips_phy_id(tmp_path: Path) -> None:
    tool, state = fake_hccn(tmp_path)
    async for rig in rig_for(tmp_path, subscription=False):
        rig.task.probe = HccnRoceLink(HccnTool(tool))
        chip = rig.exp.poller.snapshot.by_logic[3]
        assert chip.phy_id != 3, "910b-8 numbers phy ids apart from logic ids"
        (state / f"link_{chip.phy_id}").write_text("DOWN")
        await rig.round()
        assert rig.codes(3) == [LINK_DOWN]
        assert all(rig.codes(i) == [] for i in range(8) if i != 3)
        await rig.round()
        calls = (state / "calls").read_text().splitlines()
        assert calls.count(f"-i {chip.phy_id} -link -g") == 1, "one read per chip per 5 minutes"
        assert len(calls) == 8


# ---------------------------------------------------------------------- codes unreadable


class _StubPoller:
    """A poller holding one 910B chip whose error-code list cannot be read, and no subscription."""

    def __init__(self, chip: Chip) -> None:
        self.snapshot = Snapshot.build(_node(SubscriptionState.POLLING), {chip.logic_id: chip})
        self.raised: list[FaultEventData] = []

    def derived(self, _logic: int) -> tuple[str, ...]:
        return ()

    def reset_epoch(self, _logic: int) -> int:
        return 0

    def set_derived(self, _logic: int, fault: FaultEventData) -> None:
        self.raised.append(fault)


def _node(subscription: SubscriptionState) -> NodeInfo:
    return NodeInfo(
        backend="sim",
        profile="910b-8",
        run_id="r",
        dcmi_version=Reading[str].ok("x"),
        card_count=0,
        chip_count=0,
        chips_by_state={},
        subscription=subscription,
        poll_period_s=1.0,
        started_at=0.0,
        updated_at=0.0,
        last_event_id=None,
        ready=True,
    )


async def test_handle_lost_network_fault_events_01_codes_unreadable_changes_nothing() -> None:
    """TestHandleLostNetworkFaultEvents 01: GetDeviceAllErrorCode fails -> no event. Ours: a chip whose
    code list is unreadable is neither asked nor changed (whether the library lists the code is unknown)."""
    sim = SimBackend("910b-8")
    addr = sim.discover()[1]
    dynamic = sim.read_dynamic(addr).model_copy(update={"error_codes": Reading[list[str]].error(-8005)})
    chip = chip_ok(addr, sim.read_static(addr), dynamic, 0.0)
    sim.set_network(1, healthy=False, event=False)
    poller = _StubPoller(chip)
    probe = CountingProbe(sim)
    task = RoceLinkTask(poller, probe, 1.0, ManualClock(), None)  # type: ignore[arg-type]
    await task.tick()
    assert probe.queries == [] and poller.raised == []
    readable = chip.model_copy(update={"dynamic": sim.read_dynamic(addr)})
    poller.snapshot = Snapshot.build(poller.snapshot.node, {1: readable})
    await task.tick()
    assert probe.queries == [1] and [f.code for f in poller.raised] == [LINK_DOWN], "the same chip, readable"
