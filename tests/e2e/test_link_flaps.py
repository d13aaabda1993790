"""Drill: RoCE link flaps (81078603) against the reference's FaultFrequency and FaultDuration rules.

faultCustomization.json: 5 link-down events in 24 h -> ManuallySeparateNPU; a link down longer
than the 20 s FaultTimeout -> PreSeparateNPU, released 60 s (RecoverTimeout) after it comes back.
"""

from __future__ import annotations

import asyncio
import time

from tests.e2e.stack import SCALE, Stack, node_stack
from tests.support.waiting import until

LINK_DOWN = "81078603"


async def flap(s: Stack, logic_id: int, down_for_policy_s: float) -> None:
    await s.link(logic_id, up=False)
    await asyncio.sleep(down_for_policy_s / SCALE)
    await s.link(logic_id, up=True)


async def test_four_short_flaps_change_nothing_the_fifth_isolates() -> None:
    async with node_stack() as s:
        chip = s.names[3]
        await s.agree(set())
        for _ in range(4):
            await flap(s, 3, down_for_policy_s=4)  # well under the 20 s FaultTimeout
        await until(lambda: s.stored_events() == 8, 5, "the four flaps stored")
        await asyncio.sleep(30 / SCALE)  # policy time passes beyond any FaultTimeout
        views = await s.agree(set())
        verdict = (await s.verdicts())[chip]
        assert (verdict["fault_level"], verdict["schedulable"]) == ("NormalNPU", True), verdict
        info = s.device_info()
        assert info is not None and not info.manually_separated and chip not in info.network_unhealthy
        assert "UpgradeFaultReason" not in info.raw or chip not in info.raw["UpgradeFaultReason"]

        await flap(s, 3, down_for_policy_s=4)  # the fifth inside 24 h
        views = await s.agree({chip})
        verdict = (await s.verdicts())[chip]
        assert verdict["fault_level"] == "ManuallySeparateNPU", verdict
        info = s.device_info()
        assert info is not None and info.manually_separated == {chip}
        assert "FaultFrequency" in info.raw["UpgradeFaultReason"] and chip in info.raw["UpgradeFaultReason"]
        assert views["kubelet"] == {chip}
        assert await s.no_event_lost() == 10


async def test_a_long_link_down_pre_separates_until_it_has_been_up_a_while() -> None:
    async with node_stack() as s:
        chip = s.names[5]
        await s.agree(set())
        down_at = time.monotonic()
        await s.link(5, up=False)
        # Down, but not yet for the FaultTimeout: the harmless level, the chip still usable.
        first = await until(lambda: _first_level(s, chip), 5, "the link-down event")
        if first["fault_level"] == "PreSeparateNPU":  # a slow machine saw it late: never early, though
            assert time.monotonic() - down_at >= 20 / SCALE, "pre-separated before the 20 s FaultTimeout"
        else:
            assert (first["fault_level"], first["schedulable"]) == ("NotHandleFault", True), first
        await until(lambda: _level(s, chip, "PreSeparateNPU"), 60 / SCALE + 2, "PreSeparateNPU after the FaultTimeout")
        await s.agree({chip})  # no pod runs on it: not schedulable, Unhealthy to the kubelet
        info = s.device_info()
        assert info is not None
        assert [f["fault_level"] for f in info.faults if f["npu_name"] == chip] == ["PreSeparateNPU"]

        await s.link(5, up=True)
        await asyncio.sleep(30 / SCALE)
        assert await _level(s, chip, "PreSeparateNPU"), "held until the 60 s RecoverTimeout has passed"
        await until(lambda: _level(s, chip, "NormalNPU"), 60 / SCALE + 3, "released after RecoverTimeout")
        await s.agree(set())
        assert await s.no_event_lost() == 2


async def _first_level(s: Stack, chip: str) -> dict[str, object] | None:
    verdict = (await s.verdicts())[chip]
    return verdict if verdict["fault_level"] != "NormalNPU" else None


async def _level(s: Stack, chip: str, level: str) -> bool:
    return bool((await s.verdicts())[chip]["fault_level"] == level)
