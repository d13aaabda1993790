"""Drills: the bad day. Kubelet restarts, a killed exporter, a killed fault-manager in a storm,
an API server that conflicts, throttles, fails and stalls. Afterwards every view agrees, no
event is lost or doubled, no registration is doubled, and no process leaked memory or sockets.
"""

from __future__ import annotations

import asyncio
import signal
import sqlite3
from typing import Any

from tests.e2e.stack import CM_PATH, DEVICE_INFO, R, Stack, Usage, node_stack
from tests.support.waiting import until

RESTART_NPU = "8C1FA006"
ONCE_CODE = "80CB8009"  # a code the storm fires as `once` events
RSS_SLACK_MB = 15.0  # allocator noise, not a leak: a leak over 50 restarts or 10,000 events is far more


def assert_no_leak(before: dict[str, Usage], after: dict[str, Usage], *services: str) -> None:
    for name in services:
        b, a = before[name], after[name]
        assert a.fds <= b.fds + 2, f"{name} leaked file descriptors: {b.fds} -> {a.fds}"
        assert a.rss_mb - b.rss_mb < RSS_SLACK_MB, f"{name} grew {a.rss_mb - b.rss_mb:.1f} MB: {b} -> {a}"


async def test_fifty_kubelet_restarts() -> None:
    async with node_stack() as s:
        await s.fault(2, RESTART_NPU)  # a fault that must survive every restart
        await s.agree({s.names[2]})
        await s.kubelet.restart()
        await s.kubelet.wait_registered(R, timeout=5)
        before = s.usage()
        for _ in range(50):
            await s.kubelet.restart()
            reg = await s.kubelet.wait_registered(R, timeout=5)
            await s.kubelet.wait_for(R, lambda m: m.unhealthy == {s.names[2]}, instance=reg.instance, timeout=5)
        assert s.kubelet.instance >= 52
        for instance in range(1, s.kubelet.instance + 1):
            assert s.kubelet.registration_count(R, instance) == 1, f"instance {instance} saw a double registration"
        assert not s.kubelet.dropped_registrations
        sockets = sorted(p.name for p in (s.workdir / "dp").iterdir())
        assert sockets == ["Ascend910.sock", "kubelet.sock"], sockets
        await s.agree({s.names[2]})
        assert_no_leak(before, s.usage(), "plugin")
        assert await s.no_event_lost() == 1


async def test_exporter_killed_and_restarted() -> None:
    async with node_stack(plugin_args=("--exporter-grace", "30")) as s:
        await s.fault(2, RESTART_NPU)
        await s.agree({s.names[2]})
        await s.no_event_lost()
        await s.restart_exporter(signal.SIGKILL)
        # A new exporter run starts from a clean chip state (the sim's fault is gone with the
        # process): the fault-manager reconciles and every view follows the new run.
        await s.agree(set(), timeout=20)
        assert s.event_count() == 2, "the old run's fault and one synthetic recover for it"
        # Connections are re-made on the first restart; more restarts must not add to them.
        after_first = s.usage()
        for logic in (5, 6, 7):
            await s.fault(logic, RESTART_NPU)
            await s.agree({s.names[logic]})
            await s.no_event_lost()
            await s.restart_exporter(signal.SIGKILL)
            await s.agree(set(), timeout=20)
        await s.fault(4, RESTART_NPU)
        await s.agree({s.names[4]})
        assert await s.no_event_lost() == 5
        assert s.event_count("source = 'reconcile'") == 4
        assert s.kubelet.registration_count(R) == 1
        assert_no_leak(after_first, s.usage(), "fault-manager", "plugin")


async def test_fault_manager_killed_during_a_storm_of_10000_events() -> None:
    async with node_stack() as s:
        await s.agree(set())
        before = s.usage()
        # Frozen while the storm is emitted, killed while it works through it, restarted from SQLite.
        s.fm.proc.send_signal(signal.SIGSTOP)
        r = await s.sim("POST", "/v1/sim/chips/1/bursts", {"code": ONCE_CODE, "count": 10_000, "mode": "once"})
        assert r.json() == {"events": 10_000}
        await s.fault(4, RESTART_NPU)  # a lasting fault behind the storm
        s.fm.proc.send_signal(signal.SIGCONT)
        await until(lambda: s.event_count() > 0, 20, "ingestion under way")
        stored_at_kill = s.event_count()
        await s.restart_fault_manager(signal.SIGKILL)
        assert await s.no_event_lost(timeout=60) == 10_001
        await s.agree({s.names[4]})
        assert stored_at_kill < 10_001, "the kill landed mid-storm"
        # The chip of the storm is still usable: `once` events leave nothing active behind.
        verdict = (await s.verdicts())[s.names[1]]
        assert verdict["schedulable"] and verdict["codes"] == [], verdict
        assert s.kubelet.registration_count(R) == 1
        # The exporter held 10,000 events for replay, the plugin followed the storm and the restart.
        assert_no_leak(before, s.usage(), "plugin")
        assert s.usage()["exporter"].fds <= before["exporter"].fds + 2
        # Killed mid-write, the SQLite file is intact.
        with sqlite3.connect(f"file:{s.fm.db}?mode=ro", uri=True) as conn:
            assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"


async def test_api_server_conflicts_throttles_fails_and_stalls() -> None:
    async with node_stack() as s:
        await s.agree(set())
        before = s.usage()
        writes = s.configmap_writes()
        # A bad stretch: conflicts, throttling and server errors on the ConfigMaps...
        s.api.fail_next(3, 409, path_prefix=CM_PATH, method="PUT")
        s.api.fail_next(2, 429, path_prefix=CM_PATH, retry_after=1)
        s.api.fail_next(3, 500, path_prefix=CM_PATH)
        await s.fault(3, RESTART_NPU)
        # ...while an administrator isolates chip 6 by hand.
        _admin_separate(s, s.names[6])

        def failed_with() -> set[int]:
            return {r.status for r in s.api.requests if r.path.startswith(CM_PATH) and r.status >= 400}

        await until(lambda: {409, 429, 500} <= failed_with(), 20, "every injected failure met")
        # Then answers too slow to wait for, then no server at all.
        s.api.delay(12.0)
        await s.fault(3, RESTART_NPU, "recover")
        await s.fault(7, RESTART_NPU)
        await asyncio.sleep(3.0)  # the scenario: this long a stretch of slow answers
        s.api.delay(0)
        s.api.set_down(True)
        await asyncio.sleep(1.0)  # the scenario: this long an outage
        s.api.set_down(False)

        await s.agree({s.names[6], s.names[7]}, timeout=30)
        info = s.device_info()
        assert info is not None
        assert info.manually_separated == {s.names[6]}, "the admin's edit survived the bad stretch"
        # Every Unhealthy chip has a CardUnhealthy entry (reference getDeviceFaults); the isolated one has no code.
        assert {f["npu_name"]: f["fault_code"] for f in info.faults} == {s.names[6]: "", s.names[7]: RESTART_NPU}
        assert s.configmap_writes() > writes
        assert s.fm.proc.poll() is None and s.plugin.proc.poll() is None, "nobody crashed"
        assert_no_leak(before, s.usage(), "fault-manager", "plugin")
        assert await s.no_event_lost() == 3
        assert s.kubelet.registration_count(R) == 1


def _admin_separate(s: Stack, chip: str) -> None:
    """kubectl edit: add the chip to ManuallySeparateNPU (bypasses the failure rules, as etcd would)."""

    def add(obj: dict[str, Any]) -> None:
        data = obj["data"]
        data["ManuallySeparateNPU"] = ",".join(filter(None, [data.get("ManuallySeparateNPU", ""), chip]))

    s.api.modify("configmaps", DEVICE_INFO, "kube-system", add)
