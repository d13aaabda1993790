"""Per-chip fault history at scale: the architecture's target is p99 <= 20 ms at 1,000,000 events.

    .venv/bin/python -m bench.history [--events N] [--queries N]

Fills a temporary SQLite file through `store.events.append` (batches, 16 chips), reopens it so
SQLite's page cache starts cold, then times `store.events.page` calls the way the REST API makes them
(chip + time range, newest first, limit 100, plus keyset next pages) and prints p50/p99 and a
markdown table row in the format of docs/benchmarks.md. Not part of the test suite; `bench.run`
calls `measure` for its history figure.
"""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from fault_manager.store import FaultEventRow, Store

from bench.figures import Section, pct, timing

TARGET_P99_MS = 20.0
CHIPS = [f"Ascend910-{i}" for i in range(16)]
CODES = ["80E01801", "8C1FA006", "81078603", "80CB8009", "40F84E00", "110001024"]
BASE_MS = 1_767_225_600_000  # 2026-01-01T00:00:00Z
STEP_MS = 2_000  # one event every 2 s node-wide: 1,000,000 events span about 23 days


def batches(total: int, size: int, rng: random.Random) -> Iterator[list[FaultEventRow]]:
    """The events in batches, generated lazily so the benchmark's own memory stays flat."""
    for start in range(0, total, size):
        batch = []
        for seq in range(start + 1, min(total, start + size) + 1):
            phy = rng.randrange(len(CHIPS))
            raised = BASE_MS + seq * STEP_MS + rng.randrange(STEP_MS)
            batch.append(
                FaultEventRow(
                    event_id=f"bench-{seq}",
                    chip=CHIPS[phy],
                    logic_id=phy,
                    phy_id=phy,
                    code=rng.choice(CODES),
                    assertion="occur" if seq % 2 else "recover",
                    severity=rng.choice([None, 1, 2, 3]),
                    source=rng.choice(["subscription", "poll"]),
                    raised_at_ms=raised,
                    recorded_at_ms=raised + 5,
                )
            )
        yield batch


def fill(store: Store, total: int, batch_size: int, rng: random.Random) -> float:
    started = time.perf_counter()
    for batch in batches(total, batch_size, rng):
        store.events.append(batch)
    return time.perf_counter() - started


def query_latencies(store: Store, total: int, queries: int, rng: random.Random) -> dict[str, list[float]]:
    """Time `queries` history calls: a third each latest page, a time range, and a keyset next page."""
    span_ms = total * STEP_MS
    shapes: dict[str, list[float]] = {"latest": [], "range": [], "next page": []}
    for i in range(queries):
        chip = rng.choice(CHIPS)
        shape = ("latest", "range", "next page")[i % 3]
        since = until = before = None
        if shape == "range":
            since = BASE_MS + rng.randrange(span_ms)
            until = since + rng.choice([600_000, 3_600_000, 86_400_000, 7 * 86_400_000])
        elif shape == "next page":
            # A cursor somewhere in the chip's history, as a client paging back would hold.
            anchor = store.events.page(chip, until_ms=BASE_MS + rng.randrange(span_ms // 10, span_ms), limit=1)
            before = anchor[0].id if anchor else None
        started = time.perf_counter()
        rows = store.events.page(chip, since_ms=since, until_ms=until, limit=100, before_id=before)
        shapes[shape].append(time.perf_counter() - started)
        if shape != "range" and len(rows) != 100:
            raise SystemExit(f"expected a full page for {chip} ({shape}), got {len(rows)} rows")
    return shapes


@dataclass
class HistoryResult:
    """One run of the history benchmark; latencies in seconds, per query shape."""

    events: int
    batch: int
    fill_s: float
    size_mb: float
    shapes: dict[str, list[float]]

    @property
    def samples(self) -> list[float]:
        return [s for values in self.shapes.values() for s in values]

    def p(self, p: float) -> float:
        return pct(self.samples, p)


def min_events() -> int:
    """The fewest events that still give every chip full pages of 100 (latest and next page).

    A next-page cursor sits at least a tenth into the span, so a tenth of a chip's events must
    fill a page, with a margin for the random spread of chips: 20 pages' worth per chip.
    """
    return 100 * len(CHIPS) * 20


def measure(events: int = 1_000_000, queries: int = 1_000, batch: int = 5_000, seed: int = 7) -> HistoryResult:
    """Fill a temporary store with `events` events and time `queries` history calls on it."""
    if events < min_events():
        raise ValueError(f"events must be at least {min_events()} (full pages on every chip)")
    rng = random.Random(seed)
    with tempfile.TemporaryDirectory(prefix="fm-history-") as tmp:
        path = Path(tmp) / "faults.db"
        with Store(path) as store:
            fill_s = fill(store, events, batch, rng)
            stored = store.events.count()
        size_mb = sum(p.stat().st_size for p in Path(tmp).iterdir()) / 1e6
        # A fresh Store: SQLite's page cache starts empty (the OS cache stays warm, as on a node).
        with Store(path) as store:
            shapes = query_latencies(store, events, queries, rng)
    return HistoryResult(stored, batch, fill_s, size_mb, shapes)


def describe(result: HistoryResult) -> list[str]:
    """Human-readable lines: the fill, and p50/p99 per query shape."""
    lines = [
        f"filled {result.events:,} events in {result.fill_s:.1f} s ({result.events / result.fill_s:,.0f}/s, "
        f"batches of {result.batch:,}), file {result.size_mb:.0f} MB"
    ]
    for shape, values in result.shapes.items():
        lines.append(
            f"{shape}: n={len(values)} p50 {pct(values, 50) * 1000:.2f} ms, p99 {pct(values, 99) * 1000:.2f} ms"
        )
    return lines


def section(events: int) -> Section:
    """The history figure as a report section (bench.run runs it after every service has stopped)."""
    started = time.monotonic()
    result = measure(events=events)
    name = f"history query at {events:,} events"
    if events < 1_000_000:
        name += " (the target is for 1,000,000)"
    out = Section("Fault history (fault-manager store)", f"`.venv/bin/python -m bench.history --events {events}`")
    out.figures.append(timing(name, result.samples, 99, TARGET_P99_MS / 1000))
    out.notes.append(
        f"`store.events.page` on a temporary SQLite file filled through `store.events.append` ({len(CHIPS)} chips,"
        f" one event every {STEP_MS // 1000} s node-wide), reopened so SQLite's page cache starts cold; 1,000"
        " queries, a third each latest page (limit 100), time range, keyset next page. No service runs meanwhile."
    )
    out.notes += describe(result)
    out.seconds = time.monotonic() - started
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--queries", type=int, default=1_000)
    parser.add_argument("--batch", type=int, default=5_000, help="events per append_events call")
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args(argv)
    if args.events < min_events():
        parser.error(f"--events must be at least {min_events()} (full pages on every chip)")
    result = measure(args.events, args.queries, args.batch, args.seed)
    for line in describe(result):
        print(f"  {line}", file=sys.stderr)
    p50, p99 = result.p(50) * 1000, result.p(99) * 1000
    print(f"history p50 {p50:.2f} ms, p99 {p99:.2f} ms over {len(result.samples):,} queries")
    verdict = "met" if p99 <= TARGET_P99_MS else "MISSED"
    print(
        f"| fault-manager per-chip history ({result.events:,} events, {len(CHIPS)} chips, limit 100), p50 / p99 "
        f"| {p50:.2f} ms / {p99:.2f} ms | p99 <= {TARGET_P99_MS:.0f} ms |  | {verdict} |"
    )
    return 0 if p99 <= TARGET_P99_MS else 1


if __name__ == "__main__":
    sys.exit(main())
