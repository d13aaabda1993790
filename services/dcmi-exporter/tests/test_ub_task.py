"""The UB/UBoE codes over the sim (issue 25's "UB codes", "UBoE" and "Lost" rows): the sim's
ports and driver events, the real poller, and the UB task's rounds run by hand; the task's clock
is a ManualClock so the 5-minute query limit can be crossed without waiting."""

from __future__ import annotations

import asyncio
import stat
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from ascend_common.clock import ManualClock, SystemClock
from ascend_common.faults.codes import (
    UB_PORT_DOWN_CODE,
    UB_SEPARATE_CODE,
    UB_SUBHEALTH_CODE,
    UBOE_PORT_DOWN_CODE,
    UBOE_PRESEPARATE_CODE,
    UBOE_SUBHEALTH_CODE,
)
from ascend_common.schemas.exporter import BOOT_STATUS_READY, Chip, EventSource, EventType, ResetChannel, UbPorts
from dcmi_exporter.backends.dcmi.hccn import HccnNetStats, HccnRoceLink, HccnTool, HccnUbPorts
from dcmi_exporter.backends.sim.backend import SimBackend
from dcmi_exporter.backends.sim.hang_probe import SimUbPortsProbe
from dcmi_exporter.backends.sim.scenario import ScenarioError, ScenarioRunner, apply_step, parse_scenario
from dcmi_exporter.node.snapshot import codes_of
from dcmi_exporter.runtime import Exporter
from dcmi_exporter.settings import ExporterSettings
from dcmi_exporter.tasks.ub import QUERY_PERIOD_S, UbCodesTask

from tests.support.exporter_inprocess import ready_exporter

CHIPS = 8


class CountingProbe(SimUbPortsProbe):
    def __init__(self, backend: SimBackend) -> None:
        super().__init__(backend)
        self.queries: list[int] = []

    async def ub_ports(self, chip: Chip) -> UbPorts:
        self.queries.append(chip.logic_id)
        return await super().ub_ports(chip)


@dataclass
class Rig:
    exp: Exporter
    sim: SimBackend
    task: UbCodesTask
    probe: CountingProbe
    clock: ManualClock

    def codes(self, logic: int) -> list[str]:
        return codes_of(self.exp.poller.snapshot.by_logic[logic])

    async def round(self) -> None:
        await asyncio.sleep(0.05)  # the sim's events hop to the loop first
        await self.task.tick()


async def rig_for(tmp_path: Path, profile: str = "a5-superpod-8", subscription: bool = True) -> AsyncIterator[Rig]:
    settings = ExporterSettings(socket=tmp_path / "sock", profile=profile, poll_period=0.2)
    sim = SimBackend(profile, subscription=subscription)
    async with ready_exporter(settings, sim) as exp:
        clock = ManualClock()
        probe = CountingProbe(sim)
        task = UbCodesTask(exp.poller, probe, 1.0, clock, exp.lifecycle.scope("ub-test"))
        yield Rig(exp, sim, task, probe, clock)


@pytest.fixture
async def rig(tmp_path: Path) -> AsyncIterator[Rig]:
    async for r in rig_for(tmp_path):
        yield r


@pytest.fixture
async def rig_no_subscription(tmp_path: Path) -> AsyncIterator[Rig]:
    async for r in rig_for(tmp_path, subscription=False):
        yield r


async def test_ub_codes_one_chip_separated_then_all_sub_health_then_partial_recovery(rig: Rig) -> None:
    await rig.round()  # the first round (nothing down): no codes
    assert all(rig.codes(i) == [] for i in range(CHIPS))
    rig.sim.set_ub_port(3, 0, 1, "UB", up=False)
    await rig.round()
    assert rig.codes(3) == [UB_PORT_DOWN_CODE, UB_SEPARATE_CODE]
    assert all(rig.codes(i) == [] for i in range(CHIPS) if i != 3)
    for logic in range(CHIPS):
        rig.sim.set_ub_port(logic, 0, 1, "UB", up=False)
    await rig.round()
    assert all(UB_SUBHEALTH_CODE in rig.codes(i) and UB_SEPARATE_CODE not in rig.codes(i) for i in range(CHIPS))
    rig.sim.set_ub_port(5, 0, 1, "UB", up=True)
    await rig.round()
    assert rig.codes(5) == []
    assert all(rig.codes(i) == [UB_PORT_DOWN_CODE, UB_SEPARATE_CODE] for i in range(CHIPS) if i != 5)
    stored = rig.exp.events.after(0) or []
    faults = [e.item.fault for e in stored if e.item.type is EventType.FAULT and e.item.fault is not None]
    separate = [f for f in faults if f.code == UB_SEPARATE_CODE]
    assert separate and all(f.source is EventSource.UB for f in separate)


async def test_recover_while_a_wired_port_is_down_keeps_the_codes_and_unwired_ports_do_not_count(rig: Rig) -> None:
    await rig.round()
    rig.sim.set_ub_port(3, 0, 1, "UB", up=False)
    rig.sim.set_ub_port(3, 0, 2, "UB", up=False, enabled=False)
    await rig.round()
    assert rig.codes(3) == [UB_PORT_DOWN_CODE, UB_SEPARATE_CODE]
    rig.sim.inject_fault(3, UB_PORT_DOWN_CODE, "recover")  # the driver recovers while port 1 is still down
    await rig.round()
    assert sorted(rig.codes(3)) == sorted([UB_PORT_DOWN_CODE, UB_SEPARATE_CODE])
    dynamic = rig.exp.poller.snapshot.by_logic[3].dynamic
    assert dynamic is not None and dynamic.ub_ports.value == UbPorts(ub_down=1, bonding_down=0)
    rig.sim.set_ub_port(3, 0, 1, "UB", up=True, event=False)  # only the unwired port is still down
    rig.clock.advance(QUERY_PERIOD_S)
    await rig.round()
    assert rig.codes(3) == []


@pytest.mark.parametrize(("down", "precise"), [(1, UBOE_SUBHEALTH_CODE), (2, UBOE_PRESEPARATE_CODE)])
async def test_uboe_bonding_ports_down(rig: Rig, down: int, precise: str) -> None:
    await rig.round()
    for port in range(down):
        rig.sim.set_ub_port(2, 1, port, "ETH", up=False)
    await rig.round()
    assert rig.codes(2) == [UBOE_PORT_DOWN_CODE, precise]
    for port in range(down):
        rig.sim.set_ub_port(2, 1, port, "ETH", up=True)
    await rig.round()
    assert rig.codes(2) == []


async def test_lost_event_subscription_failed_gives_one_synthetic_code_and_one_query_per_5_min(
    rig_no_subscription: Rig,
) -> None:
    rig = rig_no_subscription
    await rig.round()
    assert rig.probe.queries.count(4) == 1  # the first round reads every chip once
    rig.sim.set_ub_port(4, 0, 3, "UB", up=False, event=False)  # a lost event (and no subscription)
    await rig.round()
    assert rig.codes(4) == [], "within 5 min of the last query the port is not read again"
    assert rig.probe.queries.count(4) == 1
    rig.clock.advance(QUERY_PERIOD_S)
    await rig.round()
    assert rig.probe.queries.count(4) == 2
    assert rig.codes(4).count(UB_PORT_DOWN_CODE) == 1 and UB_SEPARATE_CODE in rig.codes(4)
    for _ in range(3):
        await rig.round()
    assert rig.probe.queries.count(4) == 2
    assert rig.codes(4).count(UB_PORT_DOWN_CODE) == 1


async def test_lost_uboe_is_looked_for_only_on_uboe_boards(rig_no_subscription: Rig) -> None:
    """a5-superpod-8's main board 0x03 has no UBoE device (withUBOEDevicesMainBoardID: 0x23/0x25/0x27):
    a lost bonding-port event stays lost, while a lost UB one is found."""
    rig = rig_no_subscription
    rig.sim.set_ub_port(1, 1, 0, "ETH", up=False, event=False)
    rig.sim.set_ub_port(6, 0, 1, "UB", up=False, event=False)
    await rig.round()
    assert rig.codes(1) == []
    assert rig.codes(6) == [UB_PORT_DOWN_CODE, UB_SEPARATE_CODE]


# ---------------------------------------------------------------------- over a fake hccn_tool

SEPARATOR = "+--------+--------+--------+----------+-------------+------------+"
HEADER = "| UdieID | PortID | Speed  | PortType | Link Status | Media Type |"


def dev_info(*rows: tuple[int, int, str, str]) -> str:
    lines = [f"| {u}      | {p}      | 200    | {k}      | {s}        | Optical    |" for u, p, k, s in rows]
    return "\n".join([SEPARATOR, HEADER, SEPARATOR, *lines, SEPARATOR]) + "\n"


def fake_hccn(tmp_path: Path) -> tuple[Path, Path]:
    """A hccn_tool printing `<state>/dev_info_<logic>` (all up when absent) and
    `<state>/port_<logic>_<udie>_<port>` (port_enable on when absent)."""
    state = tmp_path / "hccn"
    state.mkdir()
    path = tmp_path / "hccn_tool"
    up = dev_info((0, 1, "UB", "UP"), (1, 0, "ETH", "UP"))
    path.write_text(
        f"""#!/bin/sh
echo "$*" >> {state}/calls
case "$*" in
  "-g -dev_info -i "*) f={state}/dev_info_$4; if [ -e $f ]; then cat $f; else printf '%s' '{up}'; fi ;;
  "-g -port_info -i "*) f={state}/port_$4_$6_$8; if [ -e $f ]; then cat $f; else echo "port_enable : on"; fi ;;
  *) exit 2 ;;
esac
"""
    )
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path, state


@pytest.fixture
async def hccn_rig(tmp_path: Path) -> AsyncIterator[tuple[Rig, Path]]:
    tool, state = fake_hccn(tmp_path)
    async for r in rig_for(tmp_path):
        r.task.probe = HccnUbPorts(HccnTool(tool))
        yield r, state


async def test_over_hccn_tool_ub_codes_and_port_enable(hccn_rig: tuple[Rig, Path]) -> None:
    rig, state = hccn_rig
    await rig.round()
    (state / "dev_info_3").write_text(dev_info((0, 1, "UB", "DOWN"), (0, 2, "UB", "DOWN")))
    (state / "port_3_0_2").write_text("port_enable : off\n")
    rig.sim.inject_fault(3, UB_PORT_DOWN_CODE, "occur")
    await rig.round()
    assert rig.codes(3) == [UB_PORT_DOWN_CODE, UB_SEPARATE_CODE]
    rig.sim.inject_fault(3, UB_PORT_DOWN_CODE, "recover")  # port 1 (wired) is still DOWN
    await rig.round()
    assert sorted(rig.codes(3)) == sorted([UB_PORT_DOWN_CODE, UB_SEPARATE_CODE])
    # Only the unwired port 2 stays DOWN: not counted, the codes go at the next query.
    (state / "dev_info_3").write_text(dev_info((0, 1, "UB", "UP"), (0, 2, "UB", "DOWN")))
    rig.clock.advance(QUERY_PERIOD_S)
    await rig.round()
    assert rig.codes(3) == []
    calls = (state / "calls").read_text().splitlines()
    assert calls.count("-g -port_info -i 3 -u 0 -p 2") == 1, "port_enable is read once per port"


@pytest.mark.parametrize(("down", "precise"), [(1, UBOE_SUBHEALTH_CODE), (2, UBOE_PRESEPARATE_CODE), (3, None)])
async def test_over_hccn_tool_uboe(hccn_rig: tuple[Rig, Path], down: int, precise: str | None) -> None:
    rig, state = hccn_rig
    await rig.round()
    (state / "dev_info_2").write_text(dev_info(*((1, p, "ETH", "DOWN") for p in range(down))))
    rig.sim.inject_fault(2, UBOE_PORT_DOWN_CODE, "occur")
    await rig.round()
    assert rig.codes(2) == [UBOE_PORT_DOWN_CODE] + ([precise] if precise else [])  # 3 down: the code is kept


async def test_a_chip_that_stops_answering_still_counts_for_the_all_chips_rule(rig: Rig) -> None:
    await rig.round()
    for logic in range(CHIPS - 1):
        rig.sim.set_ub_port(logic, 0, 1, "UB", up=False)
    rig.sim.hang(CHIPS - 1, None)  # the last chip (no port down) stops answering
    try:
        while rig.exp.poller.snapshot.by_logic[CHIPS - 1].state.value == "ok":
            await asyncio.sleep(0.05)
        await rig.round()
        assert all(rig.codes(i) == [UB_PORT_DOWN_CODE, UB_SEPARATE_CODE] for i in range(CHIPS - 1))
    finally:
        rig.sim.release(CHIPS - 1)


async def test_after_a_reset_a_lost_ub_event_is_looked_for(rig: Rig) -> None:
    await rig.round()  # the first round reads every chip: all up
    rig.sim.set_ub_port(2, 0, 1, "UB", up=False, event=False)  # the driver's event is lost
    rig.clock.advance(QUERY_PERIOD_S)
    await rig.round()
    assert rig.codes(2) == [], "with a live subscription and no reset, nothing asks the ports"
    addr = rig.exp.poller.address(2)
    assert addr is not None
    rig.sim.reset(addr, ResetChannel.INBAND)

    def boot(logic: int) -> int | None:
        dynamic = rig.exp.poller.snapshot.by_logic[logic].dynamic
        return dynamic.boot_status.value if dynamic is not None else None

    while boot(2) == BOOT_STATUS_READY:  # the poller sees the reset begin
        await asyncio.sleep(0.05)
    await rig.round()
    assert rig.codes(2) == []
    while boot(2) != BOOT_STATUS_READY:
        await asyncio.sleep(0.1)
    await rig.round()
    assert rig.codes(2) == [UB_PORT_DOWN_CODE, UB_SEPARATE_CODE]


@pytest.fixture
async def rig_850(tmp_path: Path) -> AsyncIterator[Rig]:
    async for r in rig_for(tmp_path, profile="a5-8"):  # an Atlas 850 server: main board 0x25, a UBoE device
        yield r


async def test_lost_uboe_on_a_uboe_board_is_looked_for_after_5_min_of_unhealthy_network(rig_850: Rig) -> None:
    rig = rig_850
    assert rig.exp.poller.snapshot.by_logic[1].static.main_board_id.value == 0x25
    await rig.round()
    rig.sim.set_ub_port(1, 1, 0, "ETH", up=False, event=False)  # the UBoE event is lost
    rig.sim.set_network(1, healthy=False)
    while rig.exp.poller.snapshot.by_logic[1].network_healthy is not False:
        await asyncio.sleep(0.05)
    await rig.round()
    assert UBOE_PORT_DOWN_CODE not in rig.codes(1), "unhealthy for less than 5 min: not yet"
    rig.clock.advance(QUERY_PERIOD_S + 1)
    await rig.round()
    assert [c for c in rig.codes(1) if c in (UBOE_PORT_DOWN_CODE, UBOE_SUBHEALTH_CODE)] == [
        UBOE_PORT_DOWN_CODE,
        UBOE_SUBHEALTH_CODE,
    ]


# ---------------------------------------------------------------------- scenario steps


def test_scenario_ub_port_steps_set_the_ports_and_do_not_fit_a_910() -> None:
    scenario = parse_scenario(
        "name: ub\nsteps:\n"
        "  - {at: 0, action: ub_port_down, chip: 3, port: 1}\n"
        "  - {at: 0, action: ub_port_down, chip: 3, port: 2, enabled: false}\n"
        "  - {at: 0, action: ub_port_down, chip: 3, udie: 1, port: 4, kind: ETH, event: false}\n"
        "  - {at: 1, action: ub_port_up, chip: 3, port: 1}\n"
    )
    sim = SimBackend("a5-superpod-8")
    ScenarioRunner(sim, scenario)  # fits
    events: list[object] = []
    sim.set_sink(events.append)
    for step in scenario.steps[:3]:
        apply_step(sim, step)
    assert sim.ub_ports(3) == UbPorts(ub_down=1, bonding_down=1)
    assert len(events) == 1, "one UB event; the ETH one is lost"
    apply_step(sim, scenario.steps[3])
    assert sim.ub_ports(3) == UbPorts(ub_down=0, bonding_down=1)
    with pytest.raises(ScenarioError, match="no UB ports"):
        ScenarioRunner(SimBackend("910b-8"), scenario)
    with pytest.raises(ScenarioError):
        parse_scenario("name: bad\nsteps:\n  - {at: 0, action: ub_port_down, chip: 0, port: 64}\n")


def test_on_the_dcmi_backend_hang_detection_and_ub_codes_share_one_hccn_tool_runner(tmp_path: Path) -> None:
    from dcmi_exporter.backends.dcmi.hang_probe import DcmiHangProbe
    from dcmi_exporter.runtime import make_probes

    settings = ExporterSettings(socket=tmp_path / "sock", backend="dcmi", hccn_tool=tmp_path / "hccn_tool")
    hang, ub, roce, net_stats = make_probes(settings, SimBackend("a5-8"))  # the backend is not used on this path
    assert isinstance(hang, DcmiHangProbe) and isinstance(ub, HccnUbPorts) and isinstance(roce, HccnRoceLink)
    assert isinstance(net_stats, HccnNetStats)
    assert hang._traffic.tool is ub.tool
    assert roce.tool is ub.tool, "the RoCE link shares the runner too: one timeout, one concurrency limit"
    assert net_stats.tool is ub.tool, "and the RoCE counters of the metrics"
    assert ub.tool.path == tmp_path / "hccn_tool"


# ---------------------------------------------------------------------- a reset between two rounds


async def _lost_port_and_no_look(rig: Rig, logic: int) -> None:
    await rig.round()  # the first round reads every chip: all up
    rig.sim.set_ub_port(logic, 0, 1, "UB", up=False, event=False)  # the driver's event is lost
    rig.clock.advance(QUERY_PERIOD_S)
    await rig.round()
    assert rig.codes(logic) == [], "with a live subscription and no reset, nothing asks the ports"


def _boot(rig: Rig, logic: int) -> int | None:
    dynamic = rig.exp.poller.snapshot.by_logic[logic].dynamic
    return dynamic.boot_status.value if dynamic is not None else None


async def test_a_reset_begun_and_ended_between_two_rounds_is_not_missed(rig: Rig) -> None:
    """Issue 25 C: the poller saw the chip booting, but no UB round did; the next round still looks."""
    await _lost_port_and_no_look(rig, 5)
    addr = rig.exp.poller.address(5)
    assert addr is not None
    rig.sim.reset(addr, ResetChannel.INBAND)
    while _boot(rig, 5) == BOOT_STATUS_READY:
        await asyncio.sleep(0.05)
    while _boot(rig, 5) != BOOT_STATUS_READY:
        await asyncio.sleep(0.1)
    await rig.round()
    assert rig.codes(5) == [UB_PORT_DOWN_CODE, UB_SEPARATE_CODE]
    await rig.round()
    assert rig.probe.queries.count(5) == 2, "one read at the first round, one after the reset, no more"


async def test_a_reset_job_the_poller_never_saw_booting_is_not_missed(tmp_path: Path) -> None:
    """A reset job whose chip is back before any poll read it booting (sim time 100x faster than the
    polls): the job's own boot-status reads tell the poller, and the next round looks."""
    settings = ExporterSettings(
        socket=tmp_path / "sock", profile="a5-superpod-8", poll_period=5.0, reset_poll_period=0.05
    )
    sim = SimBackend("a5-superpod-8", clock=SystemClock(time_scale=100))
    async with ready_exporter(settings, sim) as exp:
        clock = ManualClock()
        probe = CountingProbe(sim)
        task = UbCodesTask(exp.poller, probe, 1.0, clock, exp.lifecycle.scope("ub-test"))
        rig = Rig(exp, sim, task, probe, clock)
        await _lost_port_and_no_look(rig, 6)
        epoch = exp.poller.reset_epoch(6)
        job = await exp.jobs.start(6, "inband")
        while (done := exp.jobs.get(job.id)) is not None and done.state.value in ("pending", "running"):
            await asyncio.sleep(0.02)
        assert done is not None and done.state.value == "succeeded", done
        assert _boot(rig, 6) == BOOT_STATUS_READY, "no poll saw the chip booting"
        assert exp.poller.reset_epoch(6) > epoch
        await rig.round()
        assert rig.codes(6) == [UB_PORT_DOWN_CODE, UB_SEPARATE_CODE]


async def test_the_drivers_reset_finished_event_makes_the_next_round_look(rig: Rig) -> None:
    """8C2FA009 (ResetFinishFaultCode) from the subscription: the reference's SetDeviceInit."""
    await _lost_port_and_no_look(rig, 1)
    rig.sim.inject_fault(1, "8C2FA009", "once", severity=0)
    await rig.round()
    assert rig.codes(1) == [UB_PORT_DOWN_CODE, UB_SEPARATE_CODE]
