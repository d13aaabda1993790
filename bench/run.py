"""Benchmarks of the node stack; prints a table and writes docs/benchmarks.md.

    ./dev bench            (or: .venv/bin/python -m bench.run [--quick] [--skip-history])

Everything runs as real processes on real sockets (sim exporter, device-plugin) against the
test doubles of the kubelet and the API server, on this machine. Then, as a separate step in
this process, the fault-manager's per-chip history query over 1,000,000 events (bench/history.py;
100,000 with --quick). Targets come from the architecture doc; the reference's documented
periods give the ratios.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import platform
import statistics
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import psutil

from bench import history
from tests.support.exporter import ExporterProc, auth, start_exporter
from tests.support.fake_apiserver import FakeApiServer, write_kubeconfig
from tests.support.fake_kubelet import FakeKubelet, StreamMessage, short_tmp_dir
from tests.support.plugin import PluginProc, start_plugin, wait_ready

ROOT = Path(__file__).resolve().parents[1]
R = "huawei.com/Ascend910"
ALL = {f"Ascend910-{i}" for i in range(8)}


@dataclass
class Figure:
    name: str
    value: str
    target: str
    reference: str = ""
    verdict: str = ""


def pct(samples: list[float], p: float) -> float:
    ordered = sorted(samples)
    k = min(len(ordered) - 1, max(0, round(p / 100 * (len(ordered) - 1))))
    return ordered[k]


def ms(seconds: float) -> str:
    return f"{seconds * 1000:.1f} ms"


@dataclass
class Stack:
    workdir: Path
    exporter: ExporterProc
    kubelet: FakeKubelet
    plugin: PluginProc


@contextlib.asynccontextmanager
async def stack(
    *plugin_args: str, kube: str = "offline", apiserver: FakeApiServer | None = None
) -> AsyncIterator[Stack]:
    with short_tmp_dir("bench-") as workdir:
        exporter = start_exporter(workdir / "exporter", "--poll-period", "1.0", "--call-timeout", "2.0")
        plugin_dir = workdir / "dp"
        plugin_dir.mkdir()
        kubelet = FakeKubelet(plugin_dir, workdir / "podres")
        await kubelet.start()
        args = list(plugin_args)
        if apiserver is not None:
            cfg = write_kubeconfig(workdir / "kubeconfig", apiserver.url)
            args += ["--kubeconfig", str(cfg)]
        plugin = start_plugin(workdir, exporter, plugin_dir, *args, kube=kube)
        try:
            await wait_ready(plugin)
            await kubelet.wait_for(R, lambda m: set(m.devices) == ALL)
            yield Stack(workdir, exporter, kubelet, plugin)
        finally:
            plugin.stop()
            await kubelet.stop()
            exporter.stop()


async def fault_latency(s: Stack, rounds: int) -> list[float]:
    """Sim fault injected (subscription path) -> the kubelet's stream shows the chip Unhealthy."""
    transport = httpx.AsyncHTTPTransport(uds=str(s.exporter.socket))
    samples = []
    async with httpx.AsyncClient(transport=transport, base_url="http://x") as client:
        phy = (await client.get("/v1/chips/0")).json()["phy_id"]
        chip = f"Ascend910-{phy}"
        for _ in range(rounds):
            for assertion, want_unhealthy in (("occur", True), ("recover", False)):
                seen = len(s.kubelet.streams[R])
                started = time.monotonic()
                await client.post("/v1/sim/chips/0/faults", json={"code": "8C1FA006", "assertion": assertion},
                                  headers=auth("sim"))  # fmt: skip

                def reached(m: StreamMessage, want: bool = want_unhealthy) -> bool:
                    return (chip in m.unhealthy) == want

                msg = await s.kubelet.wait_for(R, reached, after=seen)
                if want_unhealthy:
                    samples.append(msg.at - started)
            await asyncio.sleep(0.02)
    return samples


async def reregistration(s: Stack, rounds: int) -> list[float]:
    samples = []
    for _ in range(rounds):
        started = time.monotonic()
        await s.kubelet.restart(listen_delay=0.0)
        reg = await s.kubelet.wait_registered(R, timeout=5)
        samples.append(reg.at - started)
        await s.kubelet.wait_for(R, lambda m: set(m.devices) == ALL, instance=s.kubelet.instance)
    return samples


async def allocate_latency(s: Stack, rounds: int, gap: float = 0.0) -> list[float]:
    """Allocate latency at the caller; `gap` paces the calls as pod admissions are paced."""
    samples = []
    ids = sorted(ALL)
    for _ in range(rounds):
        started = time.perf_counter()
        await s.kubelet.allocate(R, [ids])
        samples.append(time.perf_counter() - started)
        if gap:
            await asyncio.sleep(gap)
    return samples


async def volcano_latency(rounds: int, gap: float) -> list[float]:
    """`rounds` pending pods annotated by "Volcano"; each Allocate serves (and patches) one of them."""
    with FakeApiServer(history=rounds * 4 + 100) as api:
        api.add_node("node-a")
        for i in range(rounds):
            api.add_pod(f"p{i:05d}", "ml", phase="Pending", requests={R: 8},
                        annotations={R: ",".join(sorted(ALL)), "predicate-time": str(1000 + i)})  # fmt: skip
        async with stack("--volcano-type", kube="api", apiserver=api) as s:
            await asyncio.sleep(2.0)  # the pod cache is warm
            return await allocate_latency(s, rounds, gap)


COLD_START_TIMEOUT_S = 30.0


async def cold_start() -> float | None:
    """Exporter and plugin started from nothing -> the kubelet's first full ListAndWatch.

    None: no full ListAndWatch within COLD_START_TIMEOUT_S (counted and reported, not retried).
    """
    with short_tmp_dir("cold-") as workdir:
        plugin_dir = workdir / "dp"
        plugin_dir.mkdir()
        kubelet = FakeKubelet(plugin_dir, workdir / "podres")
        await kubelet.start()
        started = time.monotonic()
        exporter = start_exporter(workdir / "exporter", wait_ready=False)
        plugin = start_plugin(workdir, exporter, plugin_dir)
        try:
            msg = await kubelet.wait_for(R, lambda m: set(m.devices) == ALL, timeout=COLD_START_TIMEOUT_S)
            return msg.at - started
        except TimeoutError:
            return None
        finally:
            plugin.stop()
            await kubelet.stop()
            exporter.stop()


async def idle_usage(s: Stack, seconds: float) -> dict[str, tuple[float, float]]:
    """(CPU % of one core, RSS MB) per service over an idle window."""
    procs = {
        "dcmi-exporter": psutil.Process(s.exporter.proc.pid),
        "device-plugin": psutil.Process(s.plugin.proc.pid),
    }
    before = {k: p.cpu_times() for k, p in procs.items()}
    await asyncio.sleep(seconds)
    out = {}
    for k, p in procs.items():
        t0, t1 = before[k], p.cpu_times()
        cpu = (t1.user + t1.system - t0.user - t0.system) / seconds * 100
        out[k] = (cpu, p.memory_info().rss / 2**20)
    return out


def timing(name: str, samples: list[float], p: int, target_s: float | None, reference: str = "") -> Figure:
    value = pct(samples, p)
    verdict = "" if target_s is None else ("met" if value <= target_s else "MISSED")
    target = "-" if target_s is None else f"<= {target_s * 1000:g} ms"
    return Figure(f"{name}, p{p}", ms(value), target, reference, verdict)


async def main(quick: bool) -> list[Figure]:
    n = 20 if quick else 200
    figures: list[Figure] = []
    async with stack() as s:
        lat = await fault_latency(s, n)
        p50 = timing("fault -> kubelet Unhealthy", lat, 50, None, "1 s after an event")
        p50.verdict = f"{1 / pct(lat, 50):.0f}x faster than 1 s"
        figures += [p50, timing("fault -> kubelet Unhealthy", lat, 99, 0.1, "1 s event / 5 s polled")]
        rereg = await reregistration(s, 20 if quick else 50)
        figures.append(timing("kubelet restart -> registered", rereg, 99, 0.1, "only when its stream breaks"))
        figures.append(timing("Allocate 8 chips, plain", await allocate_latency(s, 100 if quick else 1000), 99, None))
        usage = await idle_usage(s, 5 if quick else 20)
        for name, (cpu, rss) in usage.items():
            figures.append(
                Figure(f"{name} idle CPU", f"{cpu:.2f} % of a core", "< 1 %", "", "met" if cpu < 1 else "MISSED")
            )
            figures.append(
                Figure(f"{name} resident memory", f"{rss:.0f} MB", "<= 80 MB", "", "met" if rss <= 80 else "MISSED")
            )
    rounds = 100 if quick else 500
    vol = await volcano_latency(rounds, gap=0.05)
    figures.append(timing(f"Allocate 8 chips, Volcano path, warm cache ({rounds} pods), 20/s", vol, 99, 0.005))
    burst = timing(
        f"Allocate 8 chips, Volcano path, {rounds} back to back", await volcano_latency(rounds, 0.0), 99, None
    )
    burst.verdict = "each patch's watch event competes with the next call"
    figures.append(burst)
    figures.append(cold_start_figure([await cold_start() for _ in range(3 if quick else 5)]))
    return figures


def cold_start_figure(results: list[float | None]) -> Figure:
    """Median of the starts that listed; any start that never listed is a miss, stated in the row."""
    listed = [r for r in results if r is not None]
    failed = len(results) - len(listed)
    value = ms(statistics.median(listed)) if listed else "-"
    if failed:
        value += f"; {failed} of {len(results)} starts never listed within {COLD_START_TIMEOUT_S:g} s"
    met = not failed and statistics.median(listed) <= 3
    return Figure("cold start -> first ListAndWatch (median)", value, "<= 3 s", "", "met" if met else "MISSED")


def history_figure(quick: bool) -> tuple[Figure, list[str]]:
    """The fault-manager's history query (bench/history.py), and its details for the notes."""
    events = 100_000 if quick else 1_000_000
    result = history.measure(events=events)
    name = f"history query at {events:,} events"
    if quick:
        name += " (--quick: the target is for 1,000,000)"
    figure = timing(name, result.samples, 99, history.TARGET_P99_MS / 1000)
    return figure, history.describe(result)


def render(figures: list[Figure], command: str, history_notes: list[str] | None = None) -> str:
    cpu = platform.processor() or platform.machine()
    lines = [
        "# Benchmarks",
        "",
        f"Produced by `{command}` on {time.strftime('%Y-%m-%d')}, {os.cpu_count()} cores, "
        f"{psutil.virtual_memory().total / 2**30:.0f} GiB, {platform.system()} {platform.release()} ({cpu}), "
        f"Python {platform.python_version()}. Real processes on real Unix sockets: sim exporter (910b-8, "
        "1 s poll), device-plugin, the tests' fake kubelet and fake API server in the benchmark process.",
        "The history figure is `bench/history.py` run in the benchmark process (no service running).",
        "",
        "| figure | measured | target | reference | verdict |",
        "|---|---|---|---|---|",
    ]
    lines += [f"| {f.name} | {f.value} | {f.target} | {f.reference} | {f.verdict} |" for f in figures]
    lines += [
        "",
        "Notes:",
        "- Fault latency is measured on the event path (the simulator emits the library's fault-event",
        "  callback): injection -> exporter event -> plugin re-reads the chip -> ListAndWatch -> the fake",
        "  kubelet's receipt. The reference reacts 1 s after an event and up to 5 s when polling.",
        "- Re-registration counts from the kubelet socket being re-created to the accepted Register call;",
        "  the fake kubelet listens at once (listen_delay 0) in this figure.",
        "- Allocate latency is measured at the caller (the fake kubelet) and includes the gRPC round trip;",
        "  on the Volcano path the pod patch is sent after the answer, its watch event then competes with later calls.",
        "- Cold start starts the exporter and the plugin together (the plugin does not wait for the exporter);",
        f"  a start whose kubelet sees no full ListAndWatch within {COLD_START_TIMEOUT_S:g} s is counted in the row"
        " as a miss, not retried.",
    ]
    if history_notes is not None:
        lines += [
            "- History: `Store.history` calls on a temporary SQLite file filled through `Store.append_events`",
            f"  ({len(history.CHIPS)} chips, one event every {history.STEP_MS // 1000} s node-wide), then reopened"
            " so SQLite's page cache",
            "  starts cold; 1,000 queries, a third each latest page (limit 100), time range, keyset next page:",
        ]
        lines += [f"  {line}." for line in history_notes]
        lines.append("- Not yet measured (issue 6): 112 devices, 10,000 cached pods, ConfigMap writes.")
    else:
        lines.append(
            "- Not yet measured (issue 6): 112 devices, 10,000 cached pods, ConfigMap writes;"
            " history skipped (--skip-history)."
        )
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true", help="fewer rounds (a smoke run)")
    parser.add_argument("--no-write", action="store_true", help="print only; do not write docs/benchmarks.md")
    parser.add_argument("--skip-history", action="store_true", help="leave out the fault-manager history step")
    args = parser.parse_args()
    figures = asyncio.run(main(args.quick))
    history_notes: list[str] | None = None
    if not args.skip_history:
        # A separate step, after every service process of the first part has stopped.
        figure, history_notes = history_figure(args.quick)
        figures.append(figure)
    command = ".venv/bin/python -m bench.run" + (" --quick" if args.quick else "")
    command += " --skip-history" if args.skip_history else ""
    text = render(figures, command, history_notes)
    print(text)
    if not args.no_write:
        (ROOT / "docs" / "benchmarks.md").write_text(text)
