"""Drill: RoCE link flaps (81078603) against the reference's FaultDuration and FaultFrequency rules.

faultCustomization.json: a link down longer than the 20 s FaultTimeout -> PreSeparateNPU, held
until the link has been up for the 60 s RecoverTimeout; 5 such timeouts in 24 h ->
ManuallySeparateNPU. As in the reference, the link-down code and its FaultDuration act on the
network level only (`-NetworkUnhealthy`; the kubelet still sees the chip Healthy), and
FaultFrequency counts a link down when it times out, not when it occurs, so flaps shorter than the
FaultTimeout never add up to an isolation.
"""

from __future__ import annotations

import asyncio
import time

from tests.e2e.stack import SCALE, Stack, node_stack
from tests.support.waiting import until

LINK_DOWN = "81078603"


async def flap(s: Stack, logic_id: int, down_for_policy_s: float) -> None:
    await s.link(logic_id, up=False)
    await asyncio.sleep(down_for_policy_s / SCALE)  # the scenario: the link stays down this long
    await s.link(logic_id, up=True)


async def test_short_flaps_never_count_five_long_link_downs_isolate() -> None:
    async with node_stack() as s:
        chip = s.names[3]
        await s.agree(set(), network=set())
        for _ in range(5):
            await flap(s, 3, down_for_policy_s=4)  # well under the 20 s FaultTimeout
        await until(lambda: s.stored_events() == 10, 5, "the five flaps stored")
        await asyncio.sleep(30 / SCALE)  # policy time passes beyond any FaultTimeout
        await s.agree(set(), network=set())
        verdict = (await s.verdicts())[chip]
        assert (verdict["fault_level"], verdict["network_level"], verdict["manually_separated"]) == (
            "NormalNPU",
            "NormalNPU",
            False,
        ), verdict
        info = s.device_info()
        assert info is not None and not info.manually_separated
        assert "UpgradeFaultReason" not in info.raw or chip not in info.raw["UpgradeFaultReason"]

        # Four link downs past the FaultTimeout, each followed by more than RecoverTimeout up:
        # each pre-separates the chip's network (the chip itself stays usable), none isolates.
        for _ in range(4):
            await s.link(3, up=False)
            await until(lambda: _network(s, chip, "PreSeparateNPU"), 60 / SCALE + 2, "network PreSeparateNPU")
            await s.agree(set(), network={chip})
            await s.link(3, up=True)
            await until(lambda: _network(s, chip, "NormalNPU"), 90 / SCALE + 3, "network released")
        assert not (await s.verdicts())[chip]["manually_separated"]
        # The fifth timeout inside 24 h isolates the chip: every view holds it unusable.
        await s.link(3, up=False)
        views = await s.agree({chip}, timeout=60 / SCALE + 10, network={chip})
        verdict = (await s.verdicts())[chip]
        assert (verdict["fault_level"], verdict["manually_separated"]) == ("ManuallySeparateNPU", True), verdict
        info = s.device_info()
        assert info is not None and info.manually_separated == {chip}
        assert "FaultFrequency" in info.raw["UpgradeFaultReason"] and chip in info.raw["UpgradeFaultReason"]
        assert views["kubelet"] == {chip}
        await s.link(3, up=True)
        assert await s.no_event_lost() == 20


async def test_a_long_link_down_pre_separates_the_network_until_it_has_been_up_a_while() -> None:
    async with node_stack() as s:
        chip = s.names[5]
        await s.agree(set(), network=set())
        down_at = time.monotonic()
        await s.link(5, up=False)
        # Down, but not yet for the FaultTimeout: the harmless network level.
        first = await until(lambda: _first_network_level(s, chip), 5, "the link-down event")
        if first["network_level"] == "PreSeparateNPU":  # a slow machine saw it late: never early, though
            assert time.monotonic() - down_at >= 20 / SCALE, "pre-separated before the 20 s FaultTimeout"
        else:
            assert (first["network_level"], first["network_healthy"]) == ("NotHandleFault", True), first
        await until(
            lambda: _network(s, chip, "PreSeparateNPU"), 60 / SCALE + 2, "PreSeparateNPU after the FaultTimeout"
        )
        # The chip's network is unhealthy; the chip itself is still Healthy for the kubelet.
        await s.agree(set(), network={chip})
        verdict = (await s.verdicts())[chip]
        assert (verdict["fault_level"], verdict["schedulable"]) == ("NormalNPU", True), verdict

        await s.link(5, up=True)
        await asyncio.sleep(30 / SCALE)  # a time-window rule: half the RecoverTimeout passes
        assert await _network(s, chip, "PreSeparateNPU"), "held until the 60 s RecoverTimeout has passed"
        await until(lambda: _network(s, chip, "NormalNPU"), 60 / SCALE + 3, "released after RecoverTimeout")
        await s.agree(set(), network=set())
        assert await s.no_event_lost() == 2


async def _first_network_level(s: Stack, chip: str) -> dict[str, object] | None:
    verdict = (await s.verdicts())[chip]
    return verdict if verdict["network_level"] != "NormalNPU" else None


async def _network(s: Stack, chip: str, level: str) -> bool:
    return bool((await s.verdicts())[chip]["network_level"] == level)
