"""The device-info ConfigMap's API traffic, counted on the fake API server.

Contract section 6: write when anything changed, at most once a second, and refresh at least
every 5 min. The reference writes on its 1 s trigger tick whenever something changed and
refreshes every 5 min, so its rates are at most 60 writes a minute in a storm and 0.2 a minute
at steady state. Rates here are per wall-clock minute.

The storm: sim bursts on the event path, one chip after another, alternating an odd burst (ends
with the fault occurring) and an even one (ends recovered), so every burst changes a verdict.
8C1FA006 (RestartNPU) has no FaultFrequency or FaultDuration rule in the packaged policy, so
no chip is isolated part-way and every change stays visible.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass

from bench.apiserver import RemoteApiServer
from bench.figures import Figure, verdict
from bench.stack import Stack
from tests.support.exporter import auth

CM_PATH = "/api/v1/namespaces/kube-system/configmaps"
SETTLE_S = 2.0  # longer than the 1 s write interval: a pending write has gone out
WRITE_CAP_PER_MIN = 60.0  # at most once a second (contract section 6)
REFRESH_S = 300.0  # the fault-manager's --refresh-period default, the reference's 5 min
REFERENCE_STORM_PER_MIN = 60.0  # one write per 1 s trigger tick with a change
REFERENCE_STEADY_PER_MIN = 60.0 / REFRESH_S
STORM_CODE = "8C1FA006"
STORM_TICK_S = 0.5  # a burst every half second
STORM_BURST = 100  # events per burst (+1 for the odd ones)


@dataclass(frozen=True)
class Traffic:
    """ConfigMap requests under kube-system: writes (PUT + POST) and reads (GET, not watches)."""

    writes: int
    reads: int
    seconds: float = 0.0

    @classmethod
    def read(cls, api: RemoteApiServer) -> Traffic:
        writes = api.count("PUT", CM_PATH) + api.count("POST", CM_PATH)
        return cls(writes, api.count("GET", CM_PATH, watch=False))

    def since(self, before: Traffic, seconds: float) -> Traffic:
        return Traffic(self.writes - before.writes, self.reads - before.reads, seconds)

    def per_min(self, count: int) -> float:
        return count / self.seconds * 60 if self.seconds > 0 else 0.0


def steady_figures(t: Traffic) -> list[Figure]:
    # At most the one refresh that may fall in the window (it comes every REFRESH_S).
    allowed = 1 + int(t.seconds // REFRESH_S)
    rate = t.per_min(t.writes)
    return [
        Figure(
            f"device-info ConfigMap writes, steady state ({t.seconds:.0f} s window)",
            f"{t.writes} ({rate:.1f} /min)",
            f"only the refresh: <= {allowed} in the window",
            f"{REFERENCE_STEADY_PER_MIN:g} /min (5 min refresh)",
            f"1.0 in the long run: the same {REFRESH_S:g} s refresh, and no write without a change",
            verdict(t.writes <= allowed, "wrote without a change"),
        ),
        Figure("kube-system ConfigMap reads, steady state (no target)", f"{t.per_min(t.reads):.1f} /min"),
    ]


async def burst(stack: Stack, logic_id: int, count: int) -> int:
    async with stack.exporter.client() as client:
        r = await client.post(
            f"/v1/sim/chips/{logic_id}/bursts",
            json={"code": STORM_CODE, "count": count, "mode": "flap", "severity": 2},
            headers=auth("sim"),
        )
        r.raise_for_status()
        return int(r.json().get("sent", count))


async def storm(stack: Stack, api: RemoteApiServer, seconds: float) -> tuple[list[Figure], list[str]]:
    """Bursts for `seconds`; ConfigMap writes counted from the first burst to SETTLE_S after the last."""
    chips = len(stack.chips)
    occurring = [False] * chips
    before = Traffic.read(api)
    started = time.monotonic()
    events = bursts = 0
    while time.monotonic() - started < seconds:
        chip = bursts % chips
        # An odd flap ends occurring, an even one recovered: every burst flips the chip.
        count = STORM_BURST if occurring[chip] else STORM_BURST + 1
        events += await burst(stack, chip, count)
        occurring[chip] = not occurring[chip]
        bursts += 1
        await asyncio.sleep(STORM_TICK_S)
    storm_s = time.monotonic() - started
    await asyncio.sleep(SETTLE_S)  # the write of the last change goes out within the write interval
    t = Traffic.read(api).since(before, time.monotonic() - started)
    rate = t.per_min(t.writes)
    figure = Figure(
        f"device-info ConfigMap writes during a storm ({events:,} events in {storm_s:.0f} s)",
        f"{t.writes} in {t.seconds:.0f} s ({rate:.1f} /min)",
        f"<= {WRITE_CAP_PER_MIN:g} /min (once a second)",
        f"{REFERENCE_STORM_PER_MIN:g} /min (1 s trigger tick)",
        f"{rate / REFERENCE_STORM_PER_MIN:.2f} of the reference's rate",
        # Once a second over the counted window, and the first write may come at its very start.
        verdict(t.writes <= int(t.seconds) + 1, "more than one write a second"),
    )
    notes = [
        f"Storm: {bursts} sim bursts of {STORM_BURST}-{STORM_BURST + 1} flapping {STORM_CODE} events, one every"
        f" {STORM_TICK_S:g} s, round-robin over the {chips} chips ({events:,} events); every burst changes a"
        f" verdict, so the writer always has a change waiting and only its 1 s --write-interval limits it."
    ]
    return [figure], notes
