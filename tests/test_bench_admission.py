"""bench.admission without Debian's kubernetes source tree (skipped, saying how to provide it), its figures, and
bench.report.splice_sections, which `bench.run --only admission --splice` writes the doc with."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

import bench.admission
from bench.admission import DEVICE_MANAGER, TREE_ENV, Measured, Pacing, figures, kubernetes_tree, share
from bench.admission import run as admission_run
from bench.figures import Figure, Section
from bench.report import NO_MISS, splice_sections


def test_without_the_tree_the_section_is_skipped_and_names_the_variable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(TREE_ENV, str(tmp_path))
    tree, why = kubernetes_tree()
    assert tree is None
    assert f"{TREE_ENV}={tmp_path}" in why and "build-kubernetes.sh" in why

    section = asyncio.run(admission_run(rounds=5))
    assert section.figures == []
    assert section.notes == [f"Skipped: {why}."]


def test_a_tree_with_the_device_manager_is_found(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    stub = tmp_path / DEVICE_MANAGER
    stub.parent.mkdir(parents=True)
    stub.write_text("package devicemanager\n")
    monkeypatch.setenv(TREE_ENV, str(tmp_path))
    go = tmp_path / "go-1.19" / "go"
    monkeypatch.setattr(bench.admission, "GO", go)
    assert kubernetes_tree() == (None, f"no {go}: build-kubernetes.sh installs Debian's golang-1.19-go")
    go.parent.mkdir()
    go.write_text("")
    assert kubernetes_tree() == (tmp_path, "")


def test_figures_set_our_percentiles_beside_the_stubs_and_judge_the_p99_ratio() -> None:
    ours = [0.002] * 98 + [0.006, 0.006]
    stub = [0.001] * 98 + [0.005, 0.005]
    calls = {"Allocate": ([0.0006] * 10, [0.0002] * 10)}
    p50, p99, allocate = figures(Pacing("20/s", 0.05), Measured(ours, stub, calls))
    assert (p50.value, p50.reference, p50.ratio, p50.verdict) == (
        "2.0 ms", "stub plugin p50 1.0 ms (n=100)", "2.00x the stub's", ""
    )  # fmt: skip
    assert (p99.value, p99.ratio, p99.target) == ("6.0 ms", "1.20x the stub's", "<= 1.5x the stub's")
    assert p99.verdict == "met"
    assert allocate.value == "0.6 ms, 0.6 ms" and allocate.ratio == "3.00x, 3.00x"

    slow = figures(Pacing("back to back", 0.0), Measured([0.008] * 100, stub, {}))[1]
    assert slow.verdict.startswith("MISSED") and slow.ratio == "1.60x the stub's"


def test_share_splits_our_excess_into_the_transport_and_our_work() -> None:
    calls = {
        "GetDevicePluginOptions": ([0.0005] * 9, [0.0001] * 9),
        "GetPreferredAllocation": ([0.0006] * 9, [0.0001] * 9),
        "Allocate": ([0.0007] * 9, [0.0001] * 9),
    }
    text = share(Pacing("20/s", 0.05), Measured([0.0023] * 9, [0.0012] * 9, calls))
    assert text == (
        "20/s: our admission p50 is 1.10 ms above the stub's; two empty calls account for 0.80 ms of it"
        " (each 0.40 ms above the stub's), our two methods' work beyond an empty call for 0.30 ms"
        " (the p50 of each method alone less the empty call's)."
    )


DOC = """# Benchmarks

## Misses

- x p99 (Old section): 9 ms, target <= 5 ms. slow
- y p99 (Admission): 4 ms, target <= 1.5x the stub's. old

## Old section

Alone: `old` (1 s in this run; load average 0 as it began).

| figure | measured | target | reference | ratio to the reference | verdict |
|---|---|---|---|---|---|
| x p99 | 9 ms | <= 5 ms |  |  | MISSED: slow |

## Where the memory goes

- kept
"""


def _section(title: str, verdict: str) -> Section:
    return Section(title, "`cmd`", [Figure("y p99", "1 ms", "<= 2 ms", verdict=verdict)], notes=["a note"])


def test_splice_inserts_a_new_section_before_the_memory_part_and_redoes_its_misses() -> None:
    doc = splice_sections(DOC, [_section("Admission", "met")], "today")
    assert "- y p99 (Admission)" not in doc  # its old miss is gone, the other section's kept
    assert "- x p99 (Old section): 9 ms" in doc
    head, _, tail = doc.partition("## Admission\n")
    assert "## Old section" in head and tail.index("| y p99 | 1 ms |") < tail.index("## Where the memory goes")
    assert "Alone: `cmd` (0 s in this run; load average  as it began). Taken today" in tail
    assert "- a note\n" in tail and tail.endswith("- kept\n")


def test_splice_replaces_an_existing_section_and_lists_its_miss() -> None:
    once = splice_sections(DOC, [_section("Old section", "MISSED: still")], "today")
    assert once.count("## Old section") == 1 and "| x p99 |" not in once
    assert "- y p99 (Old section): 1 ms, target <= 2 ms. still" in once
    assert "- y p99 (Admission): 4 ms" in once  # another section's miss stays
    met = splice_sections(
        splice_sections(once, [_section("Old section", "met")], "later"), [_section("Admission", "met")], "later"
    )
    misses = met.partition("## Misses\n\n")[2].partition("\n\n")[0]
    assert misses == NO_MISS
