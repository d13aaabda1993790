"""docs/benchmarks.md: the machine, the command, one table per scenario, the misses, the notes."""

from __future__ import annotations

import os
import platform
import time
from dataclasses import dataclass

import psutil

from bench.figures import Section
from bench.footprint import INTERPRETER, Floor, Footprint

SHOWN_MB = 0.5  # a package under this in every service is summed in "others"


@dataclass(frozen=True)
class Machine:
    """Where the figures were measured, and how busy the machine was around them."""

    cores: int
    ram_gib: float
    kernel: str
    cpu: str
    python: str

    @classmethod
    def here(cls) -> Machine:
        return cls(
            cores=os.cpu_count() or 0,
            ram_gib=psutil.virtual_memory().total / 2**30,
            kernel=f"{platform.system()} {platform.release()} ({platform.machine()})",
            cpu=cpu_model(),
            python=platform.python_version(),
        )

    def describe(self) -> str:
        return f"{self.cores} cores ({self.cpu}), {self.ram_gib:.0f} GiB, {self.kernel}, Python {self.python}"


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def load() -> str:
    one, five, _ = os.getloadavg()
    return f"{one:.2f} (1 min) / {five:.2f} (5 min)"


def table(section: Section) -> list[str]:
    lines = [
        "| figure | measured | target | reference | ratio to the reference | verdict |",
        "|---|---|---|---|---|---|",
    ]
    lines += [
        f"| {f.name} | {f.value} | {f.target} | {f.reference} | {f.ratio} | {f.verdict} |" for f in section.figures
    ]
    return lines


def misses(sections: list[Section]) -> list[str]:
    found = [(s, f) for s in sections for f in s.figures if f.verdict.startswith("MISSED")]
    if not found:
        return [NO_MISS]
    return [
        f"- {f.name} ({s.title}): {f.value}, target {f.target}. {f.verdict.removeprefix('MISSED').lstrip(': ')}"
        for s, f in found
    ]


def floor_table(floors: list[Floor]) -> list[str]:
    """The import floor of each service by package: the interpreter, then the packages that weigh
    at least SHOWN_MB somewhere (heaviest first), the rest summed, the total."""
    names = {p for f in floors for p, mb in f.by_package.items() if mb >= SHOWN_MB and p != INTERPRETER}
    rows = sorted(names, key=lambda p: -max(f.by_package.get(p, 0.0) for f in floors))
    lines = ["| package | " + " | ".join(f.service for f in floors) + " |", "|---|" + "---|" * len(floors)]
    for package in (INTERPRETER, *rows):
        cells = " | ".join(f"{f.by_package[package]:.1f}" if package in f.by_package else "-" for f in floors)
        lines.append(f"| {package} | {cells} |")
    others = [sum(mb for p, mb in f.by_package.items() if p != INTERPRETER and p not in names) for f in floors]
    lines.append("| others | " + " | ".join(f"{mb:.1f}" for mb in others) + " |")
    lines.append("| **import floor (MB)** | " + " | ".join(f"**{f.total_mb:.1f}**" for f in floors) + " |")
    return lines


@dataclass
class Run:
    command: str
    machine: Machine
    started: float  # time.time()
    seconds: float
    load_before: str
    load_after: str
    others_before: str  # what else was using the CPU when the run began
    others_after: str  # and when it ended


def section_block(section: Section) -> list[str]:
    """One scenario's heading, command, table and notes, ending with a blank line."""
    lines = [
        f"## {section.title}",
        "",
        f"Alone: {section.command} ({section.seconds:.0f} s in this run; load average {section.load} as it began).",
        "",
        *table(section),
        "",
    ]
    if section.notes:
        lines += [f"- {note}" for note in section.notes]
        lines.append("")
    return lines


NO_MISS = "None: every figure with a target met it."
KEPT_AFTER = "## Where the memory goes"  # a spliced section new to the doc goes before this


def splice_sections(doc: str, sections: list[Section], when: str) -> str:
    """`doc` (a rendered report) with each section's block replaced by a fresh one (inserted before
    the memory part when the doc has none) and that section's lines of the misses list redone; the
    rest of the doc is kept as it was. `when` says when the fresh figures were taken."""
    lines = doc.splitlines()
    for section in sections:
        block = section_block(section)
        block[2] += f" Taken {when}, apart from the rest of this report."
        heading = f"## {section.title}"
        if heading in lines:
            start = lines.index(heading)
            end = next((i for i in range(start + 1, len(lines)) if lines[i].startswith(("## ", "<!--"))), len(lines))
        else:
            start = end = lines.index(KEPT_AFTER) if KEPT_AFTER in lines else len(lines)
        lines[start:end] = block
        tag = f" ({section.title}): "
        mine = [m for m in misses([section]) if m.startswith("- ")]
        first, last = lines.index("## Misses") + 2, lines.index("## Misses") + 2
        while last < len(lines) and lines[last].strip():
            last += 1
        kept = [m for m in lines[first:last] if m != NO_MISS and tag not in m]
        lines[first:last] = (kept + mine) or [NO_MISS]
    return "\n".join(lines) + "\n"


def render(run: Run, sections: list[Section], memory: Footprint, general_notes: list[str]) -> str:
    when = time.strftime("%Y-%m-%d %H:%M", time.localtime(run.started))
    lines = [
        "# Benchmarks",
        "",
        f"Produced by `{run.command}` on {when}, in {run.seconds / 60:.1f} min.",
        "",
        f"Machine: {run.machine.describe()}.",
        f"Load average before the run {run.load_before}; after it {run.load_after}.",
        f"Other work on the machine as the run began: {run.others_before}; as it ended: {run.others_after}.",
        "",
        "Real processes on real Unix sockets: the sim exporter (1 s poll, the deployed default), the",
        "fault-manager (1 s --write-interval, the default), the device-plugin, the tests' fake kubelet",
        "(in the benchmark process: it is the caller of every timed call) and the tests' fake API server",
        "(in a process of its own). Latencies are taken at the caller; percentiles are nearest-rank.",
        "",
        "## Misses",
        "",
        *misses(sections),
        "",
    ]
    for section in sections:
        lines += section_block(section)
    lines += [
        "## Where the memory goes",
        "",
        *[f"- {note}." for note in memory.notes],
        "",
        "Import floor by package, as deployed (MB of resident memory each package's modules add while they"
        " load, in a fresh interpreter; ascend_common's adapters apart from its domain):",
        "",
        *floor_table(memory.floors),
        "",
    ]
    lines += ["## Notes", "", *[f"- {note}" for note in general_notes]]
    return "\n".join(lines) + "\n"
