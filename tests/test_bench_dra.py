"""bench.dra runs end to end with a tiny N (the target is the benchmark's to judge, not this test's),
and its figures put fault -> slice and fault -> Unhealthy on the health stream against the 100 ms p99 target."""

from __future__ import annotations

import asyncio

from bench.dra import TARGET_S, figures, taint_figures
from bench.dra import run as dra_run
from bench.plan import QUICK
from bench.run import SECTIONS, scenarios


def test_the_section_runs_and_reports_both_directions() -> None:
    section = asyncio.run(dra_run(2, fault_manager=False))
    names = [f.name for f in section.figures]
    assert names == [
        "fault on chip 3 -> ResourceSlice without it, plugin alone (code policy), p50 (n=2)",
        "fault on chip 3 -> ResourceSlice without it, plugin alone (code policy), p99 (n=2)",
        "recovery -> ResourceSlice with chip 3 again, plugin alone (code policy), p50 (n=2)",
        "recovery -> ResourceSlice with chip 3 again, plugin alone (code policy), p99 (n=2)",
        "fault on chip 3 -> Unhealthy on the kubelet's health stream, plugin alone (code policy), p50 (n=2)",
        "fault on chip 3 -> Unhealthy on the kubelet's health stream, plugin alone (code policy), p99 (n=2)",
        "recovery -> Healthy on the kubelet's health stream, plugin alone (code policy), p50 (n=2)",
        "recovery -> Healthy on the kubelet's health stream, plugin alone (code policy), p99 (n=2)",
        "fault on chip 3 -> ResourceSlice with it tainted, taints kept (1.36), plugin alone (code policy), p50 (n=2)",
        "fault on chip 3 -> ResourceSlice with it tainted, taints kept (1.36), plugin alone (code policy), p99 (n=2)",
        "recovery -> chip 3's taint gone, taints kept (1.36), plugin alone (code policy), p50 (n=2)",
        "recovery -> chip 3's taint gone, taints kept (1.36), plugin alone (code policy), p99 (n=2)",
    ]
    for figure in section.figures:
        assert figure.value.endswith((" ms", " s")), figure
    # fault -> removed, fault -> Unhealthy on the health stream, fault -> tainted, recovery -> taint gone
    for judged in (1, 5, 9, 11):
        assert section.figures[judged].target == "<= 100 ms"
        assert section.figures[judged].verdict in ("met", "MISSED")
    assert "no health stream" in section.figures[5].reference
    assert [f.target for f in section.figures[6:8]] == ["-", "-"]
    assert "written as resource.k8s.io/v1." in section.notes[1]
    assert section.seconds > 0


def test_figures_judge_the_fault_p99_only() -> None:
    faults = [0.004] * 98 + [0.2, 0.2]
    recoveries = [0.003] * 100
    p50, p99, r50, r99 = figures("x", faults, recoveries)
    assert (p50.value, p50.target, p50.verdict) == ("4.0 ms", "-", "")
    assert (p99.value, p99.target, p99.verdict) == ("200.0 ms", f"<= {TARGET_S * 1000:g} ms", "MISSED")
    assert "reference's DRA driver publishes no health" in p99.reference
    assert (r50.value, r99.value, r99.verdict) == ("3.0 ms", "3.0 ms", "")


def test_the_runner_has_the_section() -> None:
    assert "dra" in SECTIONS
    assert "dra" in scenarios(QUICK)


def test_taint_figures_judge_both_p99s() -> None:
    faults = [0.004] * 98 + [0.2, 0.2]
    recoveries = [0.003] * 98 + [0.05, 0.05]
    p50, p99, r50, r99 = taint_figures("x", faults, recoveries)
    assert (p50.target, p99.target, r50.target, r99.target) == ("-", "<= 100 ms", "-", "<= 100 ms")
    assert (p99.value, p99.verdict) == ("200.0 ms", "MISSED")
    assert (r99.value, r99.verdict) == ("50.0 ms", "met")
