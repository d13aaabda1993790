"""One benchmark figure: what was measured, its target, the reference's period and the verdict."""

from __future__ import annotations

import os
from dataclasses import dataclass, field


@dataclass
class Figure:
    name: str
    value: str
    target: str = "-"
    reference: str = ""  # the reference's documented period for the same thing, when it has one
    ratio: str = ""  # measured against the reference (how many times faster, or the share of its rate)
    verdict: str = ""  # met / MISSED (with the reason) / empty when there is no target


@dataclass
class Section:
    """The figures of one scenario, with the notes that say how they were obtained."""

    title: str
    command: str  # how to reproduce just this part (bench.run runs them all)
    figures: list[Figure] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    seconds: float = 0.0  # wall time the scenario took
    load: str = ""  # the machine's load average as it began (other work skews the figures)


def pct(samples: list[float], p: float) -> float:
    """The nearest-rank percentile (p in 0..100) of `samples`."""
    ordered = sorted(samples)
    k = min(len(ordered) - 1, max(0, round(p / 100 * (len(ordered) - 1))))
    return ordered[k]


def ms(seconds: float) -> str:
    """Milliseconds below a second, seconds above."""
    return f"{seconds * 1000:.1f} ms" if seconds < 1 else f"{seconds:.2f} s"


def faster(reference_s: float, measured_s: float) -> str:
    """How many times faster than the reference's period (a ratio of the two durations)."""
    if measured_s <= 0:
        return "-"
    ratio = reference_s / measured_s
    return f"{ratio:,.0f}x faster" if ratio >= 10 else f"{ratio:.1f}x faster"


def verdict(met: bool, why_missed: str = "") -> str:
    return "met" if met else ("MISSED: " + why_missed if why_missed else "MISSED")


def timing(
    name: str,
    samples: list[float],
    p: int,
    target_s: float | None,
    *,
    reference: str = "",
    reference_s: float | None = None,
) -> Figure:
    """The p-th percentile of `samples` (seconds) as a figure against `target_s` (None: no target)."""
    value = pct(samples, p)
    return Figure(
        name=f"{name}, p{p} (n={len(samples)})",
        value=ms(value),
        target="-" if target_s is None else f"<= {target_s * 1000:g} ms",
        reference=reference,
        ratio=faster(reference_s, value) if reference_s is not None else "",
        verdict="" if target_s is None else verdict(value <= target_s),
    )


def paced_timing(name: str, samples: list[float], empty: list[float], target_s: float | None) -> Figure:
    """The p99 of paced calls, with the p99 of the empty calls made at the same pace beside it."""
    figure = timing(name, samples, 99, target_s)
    figure.value += f" (an empty call at this pace {ms(pct(empty, 99))})"
    return figure


@dataclass(frozen=True)
class Usage:
    """A process over an idle window: CPU (% of one core) and resident memory at the end."""

    cpu_pct: float
    rss_mb: float
    window_s: float

    @property
    def cpu_resolution_pct(self) -> float:
        """CPU times count in clock ticks, user and system apart: the error of `cpu_pct`."""
        return 2 / os.sysconf("SC_CLK_TCK") / self.window_s * 100


def usage_figures(label: str, usage: Usage, rss_target_mb: float, floor_mb: float | None) -> list[Figure]:
    """Idle CPU and resident memory of one service as two figures.

    `floor_mb`: what the service holds after its imports alone; a memory miss says how much of
    the resident memory that is.
    """
    cpu = max(0.0, usage.cpu_pct)  # a float difference of CPU times can come out as -0.0
    close = cpu - 1 < usage.cpu_resolution_pct
    cpu_why = f"by less than the measurement's resolution (+-{usage.cpu_resolution_pct:.2f} %)" if close else ""
    rss_why = "" if floor_mb is None else f"{floor_mb:.0f} MB of it is the code it loads (see Where the memory goes)"
    return [
        Figure(f"{label} idle CPU", f"{cpu:.2f} % of a core", "< 1 %", verdict=verdict(cpu < 1, cpu_why)),
        Figure(
            f"{label} resident memory",
            f"{usage.rss_mb:.0f} MB",
            f"<= {rss_target_mb:g} MB",
            verdict=verdict(usage.rss_mb <= rss_target_mb, rss_why),
        ),
    ]
