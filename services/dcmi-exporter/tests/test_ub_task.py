"""The UB/UBoE codes over the sim (issue 25's "UB codes", "UBoE" and "Lost" rows): the sim's
ports and driver events, the real poller, and the UB task's rounds run by hand; the task's clock
is a ManualClock so the 5-minute query limit can be crossed without waiting."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from ascend_common.clock import ManualClock, SystemClock
from ascend_common.schemas.exporter import Chip, EventSource, EventType, UbPorts
from ascend_common.tokens import TokenTable
from dcmi_exporter.backends.sim.backend import SimBackend
from dcmi_exporter.backends.sim.hang_probe import SimUbPortsProbe
from dcmi_exporter.runtime import Exporter
from dcmi_exporter.settings import ExporterSettings
from dcmi_exporter.snapshot import (
    UB_DOWN_CODE,
    UB_SEPARATE_CODE,
    UB_SUBHEALTH_CODE,
    UBOE_DOWN_CODE,
    UBOE_PRESEPARATE_CODE,
    UBOE_SUBHEALTH_CODE,
    codes_of,
)
from dcmi_exporter.ub_task import QUERY_PERIOD_S, UbCodesTask

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
    exp = Exporter(settings, sim, SystemClock(), TokenTable())
    clock = ManualClock()
    probe = CountingProbe(sim)
    task = UbCodesTask(exp.poller, probe, 1.0, clock, exp.lifecycle.scope("ub-test"))
    await exp.start()
    try:
        while not exp.poller.snapshot.node.ready:
            await asyncio.sleep(0.02)
        yield Rig(exp, sim, task, probe, clock)
    finally:
        await exp.stop()


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
    assert rig.codes(3) == [UB_DOWN_CODE, UB_SEPARATE_CODE]
    assert all(rig.codes(i) == [] for i in range(CHIPS) if i != 3)
    for logic in range(CHIPS):
        rig.sim.set_ub_port(logic, 0, 1, "UB", up=False)
    await rig.round()
    assert all(UB_SUBHEALTH_CODE in rig.codes(i) and UB_SEPARATE_CODE not in rig.codes(i) for i in range(CHIPS))
    rig.sim.set_ub_port(5, 0, 1, "UB", up=True)
    await rig.round()
    assert rig.codes(5) == []
    assert all(rig.codes(i) == [UB_DOWN_CODE, UB_SEPARATE_CODE] for i in range(CHIPS) if i != 5)
    stored = rig.exp.events.after(0) or []
    faults = [e.item.fault for e in stored if e.item.type is EventType.FAULT and e.item.fault is not None]
    separate = [f for f in faults if f.code == UB_SEPARATE_CODE]
    assert separate and all(f.source is EventSource.UB for f in separate)


async def test_recover_while_a_wired_port_is_down_keeps_the_codes_and_unwired_ports_do_not_count(rig: Rig) -> None:
    await rig.round()
    rig.sim.set_ub_port(3, 0, 1, "UB", up=False)
    rig.sim.set_ub_port(3, 0, 2, "UB", up=False, enabled=False)
    await rig.round()
    assert rig.codes(3) == [UB_DOWN_CODE, UB_SEPARATE_CODE]
    rig.sim.inject_fault(3, UB_DOWN_CODE, "recover")  # the driver recovers while port 1 is still down
    await rig.round()
    assert sorted(rig.codes(3)) == sorted([UB_DOWN_CODE, UB_SEPARATE_CODE])
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
    assert rig.codes(2) == [UBOE_DOWN_CODE, precise]
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
    assert rig.codes(4).count(UB_DOWN_CODE) == 1 and UB_SEPARATE_CODE in rig.codes(4)
    for _ in range(3):
        await rig.round()
    assert rig.probe.queries.count(4) == 2
    assert rig.codes(4).count(UB_DOWN_CODE) == 1
