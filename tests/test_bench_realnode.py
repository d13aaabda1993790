"""bench.realnode's section in docs/benchmarks.md: written between its markers, kept by bench.run."""

from __future__ import annotations

from bench.realnode import BEGIN, END, kept_block, section, splice


def test_splice_appends_then_replaces_the_block() -> None:
    doc = "# Benchmarks\n\n## A\n"
    once = splice(doc, f"{BEGIN}\nold\n{END}")
    assert once == f"# Benchmarks\n\n## A\n\n{BEGIN}\nold\n{END}\n"
    twice = splice(once + "## After\n", f"{BEGIN}\nnew\n{END}")
    assert twice == f"# Benchmarks\n\n## A\n\n{BEGIN}\nnew\n{END}\n## After\n"


def test_bench_run_keeps_the_block_of_the_old_doc() -> None:
    old = splice("# Old\n", f"{BEGIN}\nfigures\n{END}")
    block = kept_block(old)
    assert block == f"{BEGIN}\nfigures\n{END}"
    assert kept_block("# no block\n") is None
    assert splice("# New run\n", block).endswith(f"{BEGIN}\nfigures\n{END}\n")


def test_section_shows_each_figure_or_says_it_was_not_measured() -> None:
    figures = {
        "fault_to_node_allocatable_s": {"value": {"p50": 0.9, "max": 1.1, "n": 10}, "at": "2026-12-01T11:00:00Z"},
        "cluster_up_s": {"value": 11.0, "at": "2026-12-01T10:59:00Z"},
    }
    text = section(figures, {"route": "debootstrap", "seconds": 33, "bytes": 349 * 2**20, "base_cached": True})
    assert "| fault injected -> node allocatable 8 -> 7 | p50 0.9 s, max 1.1 s (n=10) |" in text
    assert "| `cluster.sh up` to node Ready (binaries and certs cached) | 11.0 s |" in text
    assert "| plugin pod deleted -> new pod Ready | not measured |" in text
    assert "33 s, 349 MiB archive" in text
    assert "2026-12-01T10:59:00Z to 2026-12-01T11:00:00Z" in text
    assert text.startswith(BEGIN) and text.endswith(END)
