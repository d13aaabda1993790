"""The 8-chip node (910b-8): the fault path, the kubelet protocol, idle cost and ConfigMap writes.

Two stacks. The plugin alone (offline): its own path from a chip event to the kubelet (the
code-level policy decides), re-registration and plain Allocate. Then the whole stack as
deployed (exporter, fault-manager, plugin following the fault-manager's verdicts, both on the
fake API server with an empty node): the fault path through the fault-manager, idle CPU and
memory of the three services, and the device-info ConfigMap writes at steady state and in a
storm.
"""

from __future__ import annotations

import asyncio
import time

from bench import configmaps
from bench.apiserver import RemoteApiServer
from bench.figures import Figure, Section, faster, paced_timing, pct, timing, usage_figures
from bench.footprint import rss_target_mb, service_floor_mb
from bench.latency import allocate_latency, fault_latency, paced_with_floor, reregistration
from bench.pods import NODE
from bench.stack import R, Stack, StackConfig, idle_usage, stack

FAULT_REFERENCE = "1 s after an event, 5 s list-watch period when polled"
PACED_GAP_S = 0.05  # 20 calls a second


def fault_figures(label: str, samples: list[float]) -> list[Figure]:
    """p50 and p99 of fault -> kubelet, each against the reference's 1 s and 5 s."""
    figures = []
    for p, target in ((50, None), (99, 0.1)):
        figure = timing(label, samples, p, target, reference=FAULT_REFERENCE)
        value = pct(samples, p)
        figure.ratio = f"{faster(1.0, value)} than 1 s; {faster(5.0, value)} than 5 s"
        figures.append(figure)
    return figures


async def plugin_alone(fault_rounds: int, rereg_rounds: int, alloc_rounds: int) -> list[Figure]:
    async with stack(StackConfig()) as s:
        figures = fault_figures(
            "fault -> kubelet Unhealthy, plugin alone (code policy)", await fault_latency(s, fault_rounds)
        )
        rereg = await reregistration(s, rereg_rounds)
        figures.append(timing("kubelet restart -> registered", rereg, 99, 0.1))
        plain = await allocate_latency(s, R, sorted(s.chips), alloc_rounds)
        figures.append(timing("Allocate 8 chips, plain path, back to back", plain, 99, None))
        paced, empty = await paced_with_floor(s, R, sorted(s.chips), alloc_rounds // 5, PACED_GAP_S)
        figures.append(paced_timing("Allocate 8 chips, plain path, 20/s", paced, empty, None))
    return figures


async def whole_stack(fault_rounds: int, steady_s: float, storm_s: float) -> tuple[list[Figure], list[str]]:
    notes: list[str] = []
    with RemoteApiServer() as api:
        api.add_node(NODE)
        cfg = StackConfig(fault_manager=True, kube="api")
        async with stack(cfg, api.url) as s:
            samples = await fault_latency(s, fault_rounds)
            figures = fault_figures("fault -> kubelet Unhealthy, whole stack (fault-manager verdict)", samples)
            await asyncio.sleep(configmaps.SETTLE_S)  # the last round's ConfigMap write is out
            steady = await steady_window(s, api, steady_s)
            figures += steady
            storm, storm_notes = await configmaps.storm(s, api, storm_s)
            figures += storm
            notes += storm_notes
            notes.append(
                "ConfigMap reads at steady state (GETs; watches not counted): the writer watches the device-info"
                " ConfigMap by name for an administrator's edit of ManuallySeparateNPU, and reads it again only"
                " after a write conflicted or while its watch has not listed; pods and the Node are watched as"
                " client-go watches them (5-10 min server timeouts, bookmarks, resume), not polled."
            )
    return figures, notes


async def steady_window(s: Stack, api: RemoteApiServer, seconds: float) -> list[Figure]:
    """One window with nothing happening: idle CPU and memory of each service, ConfigMap traffic."""
    before = configmaps.Traffic.read(api)
    started = time.monotonic()
    usage = await idle_usage(s.processes(), seconds)
    traffic = configmaps.Traffic.read(api).since(before, time.monotonic() - started)
    figures: list[Figure] = []
    for name in ("dcmi-exporter", "fault-manager", "device-plugin"):
        figures += usage_figures(f"{name} (empty node)", usage[name], rss_target_mb(name), service_floor_mb(name))
    figures += configmaps.steady_figures(traffic)
    return figures


async def run(fault_rounds: int, rereg_rounds: int, alloc_rounds: int, steady_s: float, storm_s: float) -> Section:
    started = time.monotonic()
    section = Section("8-chip node (910b-8)", "`.venv/bin/python -m bench.run --only node`")
    section.figures += await plugin_alone(fault_rounds, rereg_rounds, alloc_rounds)
    figures, notes = await whole_stack(fault_rounds, steady_s, storm_s)
    section.figures += figures
    section.notes += [
        "Fault latency is on the event path (the simulator fires the library's fault-event callback): injection"
        " -> exporter event -> (fault-manager verdict ->) plugin -> ListAndWatch -> the fake kubelet's receipt."
        " Each round then recovers the chip and waits for it to show Healthy again.",
        "Re-registration counts from kubelet.sock being re-created (the fake kubelet listening at once) to the"
        " accepted Register call.",
        "Allocate is timed at the caller (gRPC round trip included). Paced calls (20/s) are slower than back-to-back"
        " ones on this machine because the processes sleep between calls and must be woken; the empty call"
        " (GetDevicePluginOptions) made half-way between two Allocates shows that cost alone.",
        *notes,
    ]
    section.seconds = time.monotonic() - started
    return section
