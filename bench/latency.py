"""Latency probes against a running stack: fault -> kubelet, kubelet restart -> registered, Allocate."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence

from bench.stack import R, Stack, sim_fault
from tests.support.fake_kubelet import StreamMessage

FAULT_CODE = "8C1FA006"  # a chip fault that makes the chip unschedulable (code policy and fault-manager)
ROUND_TIMEOUT_S = 10.0


def on_chip(device_id: str, phy: int) -> bool:
    """Whether a physical (`Ascend910-3`) or vNPU (`Ascend910-6c.1cpu.16g-103-3`) id lives on chip `phy`."""
    return device_id.rsplit("-", 1)[-1] == str(phy)


async def fault_latency(s: Stack, rounds: int, resource: str = R, logic_id: int = 0) -> list[float]:
    """Sim fault injected on the event path -> the kubelet's stream of `resource` shows the chip's
    devices Unhealthy. Each round recovers the chip (and waits for Healthy) before the next."""
    samples = []
    async with s.exporter.client() as client:
        phy = int((await client.get(f"/v1/chips/{logic_id}")).json()["phy_id"])
        for _ in range(rounds):
            for assertion, want_unhealthy in (("occur", True), ("recover", False)):
                seen = len(s.kubelet.streams[resource])
                started = time.monotonic()
                await sim_fault(client, logic_id, FAULT_CODE, assertion)

                def reached(m: StreamMessage, want: bool = want_unhealthy) -> bool:
                    ours = [i for i in m.devices if on_chip(i, phy)]
                    return bool(ours) and all((i in m.unhealthy) == want for i in ours)

                msg = await s.kubelet.wait_for(resource, reached, after=seen, timeout=ROUND_TIMEOUT_S)
                if want_unhealthy:
                    samples.append(msg.at - started)
            await asyncio.sleep(0.02)
    return samples


async def reregistration(s: Stack, rounds: int) -> list[float]:
    """kubelet.sock re-created (a kubelet restart) -> the plugin's accepted Register call."""
    samples = []
    for _ in range(rounds):
        started = time.monotonic()
        await s.kubelet.restart(listen_delay=0.0)
        reg = await s.kubelet.wait_registered(R, timeout=ROUND_TIMEOUT_S)
        samples.append(reg.at - started)
        await s.kubelet.wait_for(R, lambda m: set(m.devices) == s.chips, instance=s.kubelet.instance)
    return samples


async def allocate_latency(
    s: Stack, resource: str, ids: Sequence[str], rounds: int, after: Callable[[int], None] | None = None
) -> list[float]:
    """Allocate calls back to back, timed at the caller (gRPC round trip included); `after(i)`
    runs once call i has returned, untimed (e.g. the served pod's successor is scheduled)."""
    samples = []
    for i in range(rounds):
        started = time.perf_counter()
        await s.kubelet.allocate(resource, [list(ids)])
        samples.append(time.perf_counter() - started)
        if after is not None:
            after(i)
    return samples


async def empty_call(s: Stack, resource: str) -> float:
    """One GetDevicePluginOptions call: the plugin does nothing but answer (the transport's floor)."""
    started = time.perf_counter()
    await s.kubelet.options(resource)
    return time.perf_counter() - started


async def paced_with_floor(
    s: Stack,
    resource: str,
    ids: Sequence[str],
    rounds: int,
    gap: float,
    before: Callable[[int], None] | None = None,
    after: Callable[[int], None] | None = None,
) -> tuple[list[float], list[float]]:
    """Allocate every `gap` seconds, with an empty call half-way between two: (Allocate, empty call)
    latencies. The empty call shows what any call costs at this pace on this machine right now
    (processes woken from sleep, cores shared), so the Allocate's own share can be told apart.
    `before(i)` runs ahead of Allocate i and `after(i)` once it has returned, both untimed."""
    samples, empty = [], []
    for i in range(rounds):
        if before is not None:
            before(i)
        started = time.perf_counter()
        await s.kubelet.allocate(resource, [list(ids)])
        samples.append(time.perf_counter() - started)
        if after is not None:
            after(i)
        await asyncio.sleep(gap / 2)
        empty.append(await empty_call(s, resource))
        await asyncio.sleep(gap / 2)
    return samples, empty
