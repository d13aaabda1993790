"""What a PodCache holding 10,000 pods costs in its own process: resident memory before and after
its first list, the peak while it lists (sampled every 5 ms), and how long the list took.

The fake API server runs in a process of its own (bench.apiserver), so only the cache is measured.

    .venv/bin/python -m bench.podcache_memory [PODS]
"""

from __future__ import annotations

import asyncio
import gc
import sys
import threading
import time

import psutil
from ascend_common.adapters.kube.config import build_api_client
from ascend_common.adapters.kube.pod_watch import PodCache

from bench.apiserver import RemoteApiServer
from bench.pods import NODE, filler_pods

CHIPS = [f"Ascend910-{i}" for i in range(16)]


def rss_mb() -> float:
    return float(psutil.Process().memory_info().rss) / 2**20


async def measure(pods: int) -> str:
    with RemoteApiServer() as server:
        server.add_node(NODE)
        server.add_pods(filler_pods(pods, CHIPS))
        api = await build_api_client(url=server.url)
        try:
            gc.collect()
            before = rss_mb()
            peak = [before]
            done = threading.Event()

            def sample() -> None:  # a thread, so that it samples while the loop is busy slimming pages
                while not done.is_set():
                    peak[0] = max(peak[0], rss_mb())
                    time.sleep(0.005)

            sampler = threading.Thread(target=sample, daemon=True)
            sampler.start()
            cache = PodCache(api, NODE)
            started = time.monotonic()
            await cache.start()
            if not await cache.wait_synced(120):
                raise RuntimeError("the pod cache did not list within 120 s")
            took = time.monotonic() - started
            await asyncio.sleep(1.0)
            done.set()
            sampler.join()
            after = rss_mb()
            await cache.stop()
        finally:
            await api.close()  # type: ignore[no-untyped-call]
    return (
        f"{len(cache):,} pods cached in {took:.2f} s: resident {before:.1f} MB before, {after:.1f} MB after"
        f" (+{after - before:.1f} MB), peak while listing +{peak[0] - before:.1f} MB"
    )


if __name__ == "__main__":
    print(asyncio.run(measure(int(sys.argv[1]) if len(sys.argv) > 1 else 10_000)))
