"""Verdicts decide health; without the fault-manager the plugin only makes them worse."""

from __future__ import annotations

import asyncio
from pathlib import Path

from ascend_common.faults import FaultLevel
from ascend_common.schemas.verdict import ChipVerdict, VerdictReason

from tests.plugin.conftest import close_node, make_node
from tests.plugin.test_kubelet_flow import ALL, R, inject, phy_of
from tests.support.plugin import wait_ready
from tests.support.verdict_standin import VerdictStandIn
from tests.support.waiting import until


def verdict(logic: int, phy: int, ok: bool, level: FaultLevel = FaultLevel.NORMAL_NPU) -> ChipVerdict:
    return ChipVerdict(
        chip=f"Ascend910-{phy}", logic_id=logic, phy_id=phy, fault_level=level, schedulable=ok,
        reason=VerdictReason.MANUAL if not ok else VerdictReason.NORMAL, since=0.0,
        manually_separated=not ok,
    )  # fmt: skip


async def test_isolated_chip_stays_unhealthy_when_the_fault_manager_goes_away(workdir: Path) -> None:
    standin = VerdictStandIn(workdir / "fm.sock")
    standin.start()
    n = await make_node(workdir, "--fault-manager-socket", str(workdir / "fm.sock"))
    try:
        await wait_ready(n.plugin)
        phy = {logic: await phy_of(n, logic) for logic in range(8)}
        for logic in range(8):
            standin.set(verdict(logic, phy[logic], True))
        await n.kubelet.wait_for(R, lambda m: m.healthy == ALL)
        isolated = f"Ascend910-{phy[3]}"
        standin.set(verdict(3, phy[3], False, FaultLevel.MANUALLY_SEPARATE_NPU))
        await n.kubelet.wait_for(R, lambda m: m.unhealthy == {isolated})

        standin.stop()
        await until(
            lambda: "lost the fault-manager" in n.plugin.log_path.read_text(), what="the plugin to notice it is gone"
        )
        await asyncio.sleep(0.5)  # an absence, so a time: falling back to its last verdicts releases nothing
        last = n.kubelet.streams[R][-1]
        assert last.unhealthy == {isolated}, "the isolated chip is never released without the fault-manager"

        # Without the fault-manager the code-level policy can still make another chip worse.
        other = f"Ascend910-{phy[5]}"
        await inject(n, 5, "8C1FA006", "occur")
        await n.kubelet.wait_for(R, lambda m: m.unhealthy == {isolated, other})
        await inject(n, 5, "8C1FA006", "recover")
        await n.kubelet.wait_for(R, lambda m: m.unhealthy == {isolated})
    finally:
        standin.stop()
        await close_node(n)
