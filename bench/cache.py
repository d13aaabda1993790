"""10,000 pods in the node cache: memory and idle CPU of each service, and the Volcano path.

The fake API server holds the pods before the stack starts (all bound to node-a, mostly
ordinary Running workloads, see bench/pods.py), so the plugin and the fault-manager each list
all of them at start-up and then watch them, as after a restart on a full node.
"""

from __future__ import annotations

import time

from bench.apiserver import RemoteApiServer
from bench.configmaps import Traffic
from bench.figures import Figure, Section, usage_figures
from bench.footprint import rss_target_mb, service_floor_mb
from bench.pods import NODE, VolcanoQueue, filler_pods, wait_pod_caches
from bench.stack import Stack, StackConfig, idle_usage, stack, usage_during
from bench.volcano import ASYNCHRONOUS_BEFORE, CHIPS, PACED_GAP_S, PROFILE, TARGET_S, volcano_latency

CONFIG = StackConfig(profile=PROFILE, fault_manager=True, kube="api", plugin_args=("--volcano-type",))


async def churn(s: Stack, api: RemoteApiServer, queue: VolcanoQueue, rounds: int, pods: int) -> list[Figure]:
    """Volcano allocations at 20/s with their pod events (a patch, a pod gone, a pod added each):
    Allocate latency, and what the services spend meanwhile (CPU, ConfigMap reads)."""
    before = Traffic.read(api)
    volcano, usage = await usage_during(s.processes(), volcano_latency(s, "Ascend910", queue, rounds, PACED_GAP_S))
    window = next(iter(usage.values())).window_s
    traffic = Traffic.read(api).since(before, window)
    figures = [volcano.figure(f"Allocate 8 chips, Volcano path, {pods:,} pods cached, 20/s", TARGET_S)]
    for name in ("fault-manager", "device-plugin"):
        figures.append(Figure(f"{name} CPU meanwhile (no target)", f"{usage[name].cpu_pct:.1f} % of a core"))
    reads = f"{traffic.per_min(traffic.reads):.0f} /min"
    figures.append(Figure("kube-system ConfigMap reads meanwhile (no target)", reads))
    return figures


async def run(pods: int, rounds: int, idle_s: float) -> Section:
    started = time.monotonic()
    section = Section(f"{pods:,} pods in the node cache ({PROFILE})", "`.venv/bin/python -m bench.run --only cache`")
    with RemoteApiServer(history=rounds * 8 + 100) as api:
        api.add_node(NODE)
        queue = VolcanoQueue(api, CHIPS)
        api.add_pods(filler_pods(pods - queue.ahead, CHIPS))
        queue.prime()
        loaded = time.monotonic()
        async with stack(CONFIG, api.url) as s:
            await wait_pod_caches(api, 2)
            synced = time.monotonic()
            usage = await idle_usage(s.processes(), idle_s)
            for name in ("dcmi-exporter", "fault-manager", "device-plugin"):
                target = rss_target_mb(name, pods_cached=True)
                label = f"{name} ({pods:,} pods)"
                section.figures += usage_figures(label, usage[name], target, service_floor_mb(name))
            section.figures += await churn(s, api, queue, rounds, pods)
    section.notes.append(
        f"{pods - queue.ahead:,} Running pods of ordinary workloads (one in ten holding a chip) and {queue.ahead}"
        f" pending Volcano pods (kept that many as they are served, see the Volcano section); from the first"
        f" process start, {synced - loaded:.1f} s until both caches had listed them. Idle figures over {idle_s:g} s"
        " from then. While the Volcano pods are served, each call brings four pod events (its two patches:"
        " marked taken, then the allocation report; the previous pod gone; a new one scheduled); the"
        " fault-manager re-checks the device-info ConfigMap for them at most once per --write-interval (1 s)."
    )
    section.notes.append(ASYNCHRONOUS_BEFORE)
    section.seconds = time.monotonic() - started
    return section
