"""Benchmarks of the node stack; prints the report and writes docs/benchmarks.md.

    ./dev bench            (or: .venv/bin/python -m bench.run [--quick] [--only SECTION,... [--splice]] [--no-write])

Everything runs as real processes on real sockets (sim exporter, fault-manager, device-plugin)
against the tests' fake kubelet and fake API server, on this machine; then, after every service
has stopped, the fault-manager's history query over 1,000,000 events (bench/history.py). Each
figure is set beside its target from the architecture doc and, where the reference documents a
period for the same thing, the ratio to it. `--only` runs some sections and writes nothing; with
`--splice` it replaces just those sections' blocks in docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import time
from collections.abc import Awaitable, Callable

import psutil

from bench import admission, cache, coldstart, dra, fleet, history, node, scale, volcano
from bench.apiserver import ROOT
from bench.figures import Section
from bench.footprint import footprint, warm
from bench.plan import FULL, QUICK, Plan
from bench.realnode import kept_block, splice
from bench.report import Machine, Run, load, render, splice_sections

SECTIONS = ("node", "volcano", "scale", "cache", "coldstart", "admission", "dra", "fleet", "history")


def scenarios(plan: Plan) -> dict[str, Callable[[], Awaitable[Section]]]:
    """Every section, in the order of the report; history last, with no service running."""
    scale_rounds = max(50, plan.volcano_pods // 2)

    async def history_section() -> Section:
        return await asyncio.to_thread(history.section, plan.history_events)

    return {
        "node": lambda: node.run(plan.fault_rounds, plan.rereg_rounds, plan.alloc_rounds, plan.steady_s, plan.storm_s),
        "volcano": lambda: volcano.run(plan.volcano_pods),
        "scale": lambda: scale.run(plan.fault_rounds // 2, scale_rounds, plan.idle_s),
        "cache": lambda: cache.run(plan.cached_pods, scale_rounds, plan.idle_s),
        "coldstart": lambda: coldstart.run(plan.cold_starts),
        "admission": lambda: admission.run(plan.admission_rounds),
        "dra": lambda: dra.run(plan.fault_rounds),
        "fleet": lambda: fleet.run(
            plan.fleet_nodes,
            plan.fleet_steady_s,
            plan.fleet_kubelet_steady_s,
            plan.fleet_background_s,
            plan.fleet_flap_s,
        ),
        "history": history_section,
    }


def command_name(words: list[str]) -> str:
    """A short, one-line name for a command line: the program and its first two words, each cut short."""
    short = [" ".join(w.split())[:40] for w in words[:3]]
    return " ".join([os.path.basename(short[0]), *short[1:]])


def other_load(sample_s: float = 1.0) -> str:
    """CPU used by processes outside this run during a short sample (other jobs on a shared machine)."""
    mine = {os.getpid(), *(c.pid for c in psutil.Process().children(recursive=True))}
    procs = []
    for p in psutil.process_iter(["cmdline"]):
        if p.pid in mine:
            continue
        try:
            p.cpu_percent(None)
            procs.append(p)
        except psutil.Error:
            continue
    time.sleep(sample_s)
    busy: list[tuple[float, str]] = []
    for p in procs:
        try:
            used = p.cpu_percent(None)
            words = p.info["cmdline"] or [p.name()]
        except psutil.Error:
            continue
        if used >= 5:
            busy.append((used, command_name(words)))
    if not busy:
        return "none above 5 % of a core"
    busy.sort(reverse=True)
    top = "; ".join(f"{name} {used:.0f} %" for used, name in busy[:3])
    processes = "process" if len(busy) == 1 else "processes"
    return f"{sum(u for u, _ in busy):.0f} % of a core in {len(busy)} {processes} ({top})"


async def run_sections(plan: Plan, only: tuple[str, ...]) -> list[Section]:
    out = []
    for name, make in scenarios(plan).items():
        if name in only:
            print(f"bench: {name} ...", flush=True)
            began = load()
            section = await make()
            section.load = began
            print(f"bench: {name} done in {section.seconds:.0f} s", flush=True)
            out.append(section)
    return out


GENERAL_NOTES = [
    "The machine is small and shared: the stack under test (3 services), the fake API server, the"
    " benchmark process and, on a shared host, other jobs compete for its cores. A latency figure includes"
    " any wait for a core, so its tail moves by tens of percent between runs; the load averages above say"
    " how busy the machine was. Re-run on a quiet machine before reading a small difference.",
    "Paced calls (20/s, the Allocate target's setting) pay for waking the caller and the plugin from sleep,"
    " which back-to-back calls do not; under load that wake-up waits for a core. Every paced figure has an"
    " empty gRPC call (GetDevicePluginOptions, no work in the plugin) made at the same pace beside it, and"
    " the Volcano figures the plugin's own p99 (its Allocate histogram's bucket), to tell the machine's share"
    " from the plugin's.",
    "Idle CPU is the process's user+system time over the window divided by the window; resident memory is"
    " RSS at the end of it (it counts the shared libraries' pages too).",
    "The reference's periods give the ratios: it reacts to a fault 1 s after the event (its trigger tick)"
    " and up to 5 s later when polling (its list-watch period), and writes the device-info ConfigMap on"
    " the 1 s tick when something changed plus a refresh every 5 min.",
]


def main() -> None:
    parser = argparse.ArgumentParser(description="Benchmarks of the node stack (writes docs/benchmarks.md).")
    parser.add_argument("--quick", action="store_true", help="fewer rounds, shorter windows (a smoke run)")
    parser.add_argument("--no-write", action="store_true", help="print only; do not write docs/benchmarks.md")
    parser.add_argument(
        "--only", default="", help=f"comma-separated sections of {','.join(SECTIONS)} (no write unless --splice)"
    )
    parser.add_argument("--skip-history", action="store_true", help="leave out the history section")
    parser.add_argument(
        "--splice",
        action="store_true",
        help="with --only: replace those sections (and their misses) in docs/benchmarks.md, keep the rest",
    )
    args = parser.parse_args()
    only = tuple(s for s in args.only.split(",") if s) or SECTIONS
    if unknown := set(only) - set(SECTIONS):
        parser.error(f"unknown sections: {', '.join(sorted(unknown))}")
    if args.skip_history:
        only = tuple(s for s in only if s != "history")
    plan = QUICK if args.quick else FULL
    command = ".venv/bin/python -m bench.run" + (" --quick" if args.quick else "")
    command += f" --only {args.only}" if args.only else ""
    command += " --skip-history" if args.skip_history else ""
    command += " --splice" if args.splice else ""

    started, began = time.time(), time.monotonic()
    load_before, others = load(), other_load()
    warm()  # the import probes, before any timed scenario
    sections = asyncio.run(run_sections(plan, only))
    memory = footprint()
    seconds, load_after = time.monotonic() - began, load()
    report = Run(command, Machine.here(), started, seconds, load_before, load_after, others, other_load())
    text = render(report, sections, memory, GENERAL_NOTES)
    print(text)
    if args.splice and args.only and not args.no_write:
        doc = ROOT / "docs" / "benchmarks.md"
        when = time.strftime("%Y-%m-%d %H:%M", time.localtime(started)) + f" (load average {load_before})"
        doc.write_text(splice_sections(doc.read_text(), sections, when))
    if not args.no_write and not args.only:
        doc = ROOT / "docs" / "benchmarks.md"
        kept = kept_block(doc.read_text()) if doc.exists() else None  # bench.realnode's section
        doc.write_text(splice(text, kept) if kept else text)


if __name__ == "__main__":
    main()
