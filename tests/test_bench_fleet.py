"""bench.fleet end to end at a tiny size (2 node stacks, windows of seconds) on the real kube-apiserver
the cluster tier builds: every scenario runs and reports, and nothing it started is left running.
The targets are the benchmark's to judge, not this test's. Skipped, with the reason, where the
Kubernetes binaries (or etcd, openssl) are absent, as the cluster tier is on a machine that cannot
run it."""

from __future__ import annotations

import asyncio

import psutil
import pytest

from bench.fleet import figures, measure
from bench.kubeapi import Request, cannot_run, parse_audit, parse_request_total
from bench.plan import QUICK
from bench.run import SECTIONS, scenarios

N = 2


def descendants() -> set[int]:
    return {p.pid for p in psutil.Process().children(recursive=True)}


@pytest.mark.slow
@pytest.mark.timeout(170)
def test_a_tiny_fleet_runs_every_scenario_and_leaves_nothing_running() -> None:
    if (reason := cannot_run()) is not None:
        pytest.skip(f"the fleet benchmark cannot run here: {reason}")
    before = descendants()
    try:
        results = asyncio.run(
            measure(N, {"apiserver": 5.0, "kubelet": 4.0}, background_s=3.0, flap_s=2.0, settle_s=1.0)
        )
    finally:
        left = descendants() - before
        alive = [p for p in left if psutil.pid_exists(p) and psutil.Process(p).status() != psutil.STATUS_ZOMBIE]
        assert not alive, f"processes left running: {alive}"

    assert set(results.steady) == {"apiserver", "kubelet"}
    assert results.storm is not None and results.restart is not None
    # Every node's ConfigMap showed the fault and the recovery, and every node came back after the restart
    # (how fast is the benchmark's to judge).
    assert set(results.storm.fault_shown) == set(range(N))
    assert set(results.storm.recovery_shown) == set(range(N))
    assert set(results.restart.synced) == set(range(N))
    # Pods from the kubelet: the services never read pods on the API server.
    kubelet = results.steady["kubelet"]
    assert not [r for r in kubelet.since_start if r.resource == "pods" and r.verb in ("get", "list", "watch")]
    apiserver = results.steady["apiserver"]
    assert any(r.resource == "pods" and r.verb == "watch" for r in apiserver.since_start)

    figs, notes = figures(results)
    names = [f.name for f in figs]
    for wanted in (
        "[apiserver pods] steady state, requests per minute per node",
        "[kubelet pods] pod reads on the API server",
        "storm: ConfigMap writes per minute per node",
        "API server restart: every node back in sync",
        "API server restart: the fleet's lists spread in time",
        "10,000 nodes, apiserver pods: requests per second",
        "10,000 nodes, kubelet pods: watches open",
    ):
        assert any(n.startswith(wanted) for n in names), (wanted, names)
    judged = [f for f in figs if f.target != "-"]
    assert judged and all(f.verdict == "met" or f.verdict.startswith("MISSED") for f in judged if f.verdict)
    assert any("audit log" in note for note in notes)


def test_the_runner_has_the_section() -> None:
    assert "fleet" in SECTIONS
    assert "fleet" in scenarios(QUICK)


def test_the_audit_log_counts_a_request_once_when_received() -> None:
    """A watch's stages (received, started, complete) are one request, at the time it was received."""
    received = (
        '{"auditID":"a","stage":"RequestReceived","verb":"watch","user":{"username":"fleet-dp-3"},'
        '"requestURI":"/api/v1/pods?fieldSelector=spec.nodeName%3Dn3&timeoutSeconds=437&watch=true",'
        '"objectRef":{"resource":"pods"},"requestReceivedTimestamp":"2026-12-06T10:00:00.000000Z",'
        '"stageTimestamp":"2026-12-06T10:00:00.000000Z"}'
    )
    complete = received.replace("RequestReceived", "ResponseComplete").replace(
        '"stageTimestamp":"2026-12-06T10:00:00.000000Z"',
        '"stageTimestamp":"2026-12-06T10:07:17.000000Z","responseStatus":{"code":200}',
    )
    [r] = parse_audit([received, complete])
    assert r == Request(
        at=r.at, user="fleet-dp-3", verb="watch", resource="pods",
        stream="/api/v1/pods?fieldSelector=spec.nodeName=n3", timeout_s=437, code=200,
    )  # fmt: skip
    assert parse_audit([complete])[0].at == r.at  # its first stage may sit before a read's offset


def test_request_total_is_summed_over_all_but_verb_and_resource() -> None:
    text = (
        'apiserver_request_total{code="200",component="apiserver",resource="pods",verb="LIST",version="v1"} 3\n'
        'apiserver_request_total{code="410",component="apiserver",resource="pods",verb="LIST",version="v1"} 2\n'
        'apiserver_request_duration_seconds_count{resource="pods",verb="LIST"} 9\n'
        'apiserver_longrunning_gauge{resource="pods",verb="WATCH",scope="cluster"} 4\n'
    )
    assert parse_request_total(text) == {("LIST", "pods"): 5}
    assert parse_request_total(text, "apiserver_longrunning_gauge") == {("WATCH", "pods"): 4}
