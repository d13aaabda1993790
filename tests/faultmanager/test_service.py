"""The fault-manager as a real process: verdicts, the device-info ConfigMap, exactly-once history."""

from __future__ import annotations

import asyncio
import hashlib
import json
import signal
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import httpx
from fault_manager.store import Store

from tests.support.exporter import ExporterProc, auth, start_exporter
from tests.support.faultmanager import FaultManagerProc, start_fault_manager, wait_ready
from tests.support.waiting import until

RESTART_NPU = "8C1FA006"


async def sim(exporter: ExporterProc, path: str, body: dict[str, object]) -> httpx.Response:
    async with exporter.client() as client:
        r = await client.post(path, json=body, headers=auth("sim"))
        assert r.status_code in (200, 204), r.text
        return r


async def verdicts(fm: FaultManagerProc) -> dict[str, dict[str, object]]:
    async with fm.client() as client:
        body = (await client.get("/v1/verdicts")).json()
    return {v["chip"]: v for v in body["verdicts"]}


async def deviceinfo(fm: FaultManagerProc) -> dict[str, str]:
    async with fm.client() as client:
        objects = (await client.get("/v1/kube/objects")).json()
    [cm] = [o for o in objects if o["metadata"]["name"] == "mindx-dl-deviceinfo-node-a"]
    assert cm["metadata"]["namespace"] == "kube-system"
    assert cm["metadata"]["labels"] == {"mx-consumer-cim": "true"}
    return dict(cm["data"])


async def test_verdicts_and_configmap_follow_a_fault(tmp_path: Path) -> None:
    exporter = start_exporter(tmp_path / "exporter")
    fm = start_fault_manager(tmp_path / "fm", exporter)
    try:
        await wait_ready(fm)
        async with exporter.client() as client:
            chip2 = (await client.get("/v1/chips/2")).json()
        name = chip2["name"]

        async def all_normal() -> bool:
            v = await verdicts(fm)
            return len(v) == 8 and all(x["fault_level"] == "NormalNPU" and x["schedulable"] for x in v.values())

        await until(all_normal, what="8 NormalNPU verdicts")
        await sim(exporter, "/v1/sim/chips/2/faults", {"code": RESTART_NPU, "severity": 2})

        async def faulty() -> bool:
            return (await verdicts(fm))[name]["fault_level"] == "RestartNPU"

        await until(faulty, what=f"{name}'s RestartNPU verdict")
        v = (await verdicts(fm))[name]
        assert v["schedulable"] is False and v["codes"] == [RESTART_NPU]

        async def listed() -> bool:
            try:
                data = await deviceinfo(fm)
            except ValueError:
                return False
            return (
                name in json.loads(data["DeviceInfoCfg"])["DeviceInfo"]["DeviceList"]["huawei.com/Ascend910-Unhealthy"]
            )

        await until(listed, what=f"{name} in the ConfigMap's Unhealthy list")
        data = await deviceinfo(fm)
        cfg = json.loads(data["DeviceInfoCfg"])
        device_list = cfg["DeviceInfo"]["DeviceList"]
        assert device_list["huawei.com/Ascend910-Unhealthy"] == name
        assert name not in device_list["huawei.com/Ascend910"].split(",")
        [fault] = json.loads(device_list["huawei.com/Ascend910-Fault"])
        assert (fault["npu_name"], fault["fault_code"], fault["fault_level"]) == (name, RESTART_NPU, "RestartNPU")
        # CheckCode: sha256 of DeviceInfo exactly as written (Go's field order, no spaces).
        raw = data["DeviceInfoCfg"]
        device_info = raw[raw.index('{"DeviceList"') : raw.index(',"SuperPodID"')]
        assert cfg["CheckCode"] == hashlib.sha256(device_info.encode()).hexdigest()
        # A Kubernetes Event reports it (offline: as a file).
        events_file = tmp_path / "fm" / "state" / "kube" / "events.jsonl"

        async def reported() -> bool:
            return events_file.exists() and any(
                e["reason"] == "NPUFaultOccurred" and name in e["message"]
                for e in map(json.loads, events_file.read_text().splitlines())
            )

        await until(reported, what="the NPUFaultOccurred Event")
        # The fault's history is queryable.
        async with fm.client() as client:
            page = (await client.get("/v1/faults", params={"chip": name})).json()
        assert [(f["code"], f["assertion"]) for f in page["faults"]][:1] == [(RESTART_NPU, "occur")]
    finally:
        assert fm.stop() == 0, fm.log_path.read_text()[-2000:]
        exporter.stop()


async def test_sigkill_during_a_burst_loses_and_doubles_nothing(tmp_path: Path) -> None:
    exporter = start_exporter(tmp_path / "exporter")
    fm = start_fault_manager(tmp_path / "fm", exporter)
    try:
        await wait_ready(fm)
        # Frozen while the burst is emitted, then killed a moment after it resumes: mid-ingestion.
        fm.proc.send_signal(signal.SIGSTOP)
        await sim(exporter, "/v1/sim/chips/1/bursts", {"code": "80CB8009", "count": 1000, "mode": "once"})
        fm.proc.send_signal(signal.SIGCONT)
        await until(lambda: asyncio.to_thread(_count, fm.db), what="the first batch stored", interval=0.001)
        fm.stop(signal.SIGKILL)
        stored_at_kill = await asyncio.to_thread(_count, fm.db)
        fm = start_fault_manager(tmp_path / "fm", exporter, db=fm.db)
        await wait_ready(fm)

        async def all_stored() -> bool:
            return await asyncio.to_thread(_count, fm.db) >= 1000

        await until(all_stored, 15, "the 1000 events stored")
        await asyncio.sleep(0.5)  # an absence, so a time: nothing more arrives, none doubled
        assert await asyncio.to_thread(_count, fm.db) == 1000, f"{stored_at_kill} were stored when it was killed"
        print("stored at kill:", stored_at_kill)
        v = await verdicts(fm)
        assert len(v) == 8 and all(x["schedulable"] for x in v.values())
    finally:
        fm.stop()
        exporter.stop()


def _count(db: Path) -> int:
    store = Store(db)
    try:
        return store.events.count()
    finally:
        store.close()


async def test_unchanged_configmap_is_rewritten_only_by_the_refresh(tmp_path: Path) -> None:
    exporter = start_exporter(tmp_path / "exporter")
    fm = start_fault_manager(tmp_path / "fm", exporter, "--refresh-period", "2")
    try:
        await wait_ready(fm)

        async def version() -> int:
            async with fm.client() as client:
                objects = (await client.get("/v1/kube/objects")).json()
            return max((int(o["metadata"]["resourceVersion"]) for o in objects if o["kind"] == "ConfigMap"), default=0)

        first = await until(version, what="the first ConfigMap write")
        await asyncio.sleep(1.0)  # an absence, so a time: half the refresh period
        assert await version() == first, "nothing changed: nothing written"

        async def rewritten() -> bool:
            return await version() != first

        await until(rewritten, what="the refresh's write")
        assert await version() == first + 1, "the refresh rewrote it once"
    finally:
        fm.stop()
        exporter.stop()


async def test_a_duration_escalation_is_reported_while_it_holds(tmp_path: Path) -> None:
    exporter = start_exporter(tmp_path / "exporter")
    fm = start_fault_manager(tmp_path / "fm", exporter, "--time-scale", "20")
    try:
        await wait_ready(fm)
        async with exporter.client() as client:
            name = (await client.get("/v1/chips/5")).json()["name"]

        async def reasons() -> dict[str, Any]:
            try:
                return dict(json.loads((await deviceinfo(fm))["UpgradeFaultReason"]))
            except (ValueError, KeyError):
                return {}

        # Link down for 25 s of policy time (1.25 s here): PreSeparateNPU by FaultDuration.
        await sim(exporter, "/v1/sim/chips/5/faults", {"code": "81078603", "severity": 1})
        await until(lambda: _has(reasons, name), what=f"{name}'s UpgradeFaultReason")
        [reason] = (await reasons())[name]
        assert (reason["upgrade_type"], reason["fault_level"]) == ("FaultDuration", "PreSeparateNPU")
        # Recovered, and 60 s of policy later (3 s here) the escalation and its reason are gone.
        await sim(exporter, "/v1/sim/chips/5/faults", {"code": "81078603", "assertion": "recover", "severity": 1})

        async def gone() -> bool:
            return name not in await reasons() and (await verdicts(fm))[name]["fault_level"] == "NormalNPU"

        await until(gone, what=f"{name}'s escalation and its reason gone")
    finally:
        fm.stop()
        exporter.stop()


async def _has(reasons: Callable[[], Awaitable[dict[str, Any]]], name: str) -> bool:
    return name in await reasons()


async def test_a_fault_raised_before_the_first_start_counts_once(tmp_path: Path) -> None:
    """A new database meets a fault the exporter's run already holds: the replay brings its event and
    the snapshot taken before the replay holds its code. Reconciling that snapshot before the replay
    has reached it would synthesise a second occurrence, and the packaged FaultFrequency rule of
    80E01801 (2 in 24 h -> ManuallySeparateNPU) would isolate a chip that faulted once."""
    exporter = start_exporter(tmp_path / "exporter")
    fm: FaultManagerProc | None = None
    try:
        async with exporter.client() as client:
            name = (await client.get("/v1/chips/2")).json()["name"]
        await sim(exporter, "/v1/sim/chips/2/faults", {"code": "80E01801", "severity": 2})
        fm = start_fault_manager(tmp_path / "fm", exporter)
        await wait_ready(fm)
        db = fm.db

        async def replayed() -> bool:
            history = await asyncio.to_thread(_history, db, name)
            return any(row.source != "reconcile" for row in history)

        await until(replayed, timeout=15)
        await asyncio.sleep(0.5)  # a window: a second occurrence queued behind the replayed one would land in it
        occurrences = [r for r in await asyncio.to_thread(_history, db, name) if r.assertion != "recover"]
        assert [(r.code, r.source) for r in occurrences] == [("80E01801", "subscription")], occurrences
        verdict = (await verdicts(fm))[name]
        assert verdict["fault_level"] != "ManuallySeparateNPU", verdict
    finally:
        if fm is not None:
            fm.stop()
        exporter.stop()


def _history(db: Path, chip: str) -> list[Any]:
    store = Store(db)
    try:
        return list(store.events.of_chip(chip))
    finally:
        store.close()
