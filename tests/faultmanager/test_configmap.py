"""The device-info ConfigMap in a cluster (the fake API server): writes, conflicts, admin edits, restarts."""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from fault_manager.store import Store

from tests.faultmanager.test_service import sim, verdicts
from tests.support.exporter import ExporterProc, start_exporter
from tests.support.fake_apiserver import FakeApiServer, write_kubeconfig
from tests.support.fake_kubelet_pods import FakeKubeletPods, make_cert, pod_requests, pod_source_args
from tests.support.faultmanager import FaultManagerProc, start_fault_manager, wait_ready
from tests.support.waiting import until

HBM = "80E01801"  # FaultFrequency: 2 occurrences in 24 h -> ManuallySeparateNPU
CM = "mindx-dl-deviceinfo-node-a"
CM_PATH = "/api/v1/namespaces/kube-system/configmaps"


def _release_events(api: FakeApiServer) -> list[dict[str, Any]]:
    return [e for e in api.objects("events") if e.get("reason") == "EventReleaseUpgradeFault"]


def configmap(api: FakeApiServer) -> dict[str, str]:
    obj = api.get_object("configmaps", CM, "kube-system")
    return dict(obj["data"]) if obj else {}


@contextlib.asynccontextmanager
async def writing_over(
    tmp_path: Path, profile: str
) -> AsyncIterator[tuple[FakeApiServer, ExporterProc, FaultManagerProc]]:
    """The fault-manager (--kube api, a fake API server) over a sim exporter of `profile`, once it has written its
    first device-info ConfigMap; both processes stopped after."""
    with FakeApiServer() as api:
        exporter = start_exporter(tmp_path / "exporter", profile=profile)
        cfg = write_kubeconfig(tmp_path / "kubeconfig", api.url)
        fm = start_fault_manager(tmp_path / "fm", exporter, "--kubeconfig", str(cfg), kube="api")
        try:
            await wait_ready(fm)
            await until(lambda: "DeviceInfoCfg" in configmap(api), what="the first ConfigMap write")
            yield api, exporter, fm
        finally:
            fm.stop()
            exporter.stop()


def versions_written(api: FakeApiServer) -> list[dict[str, Any]]:
    """Every version of the device-info ConfigMap the API server stored, oldest first."""
    return [
        r.body
        for r in list(api.requests)
        if r.method in ("POST", "PUT") and r.path.startswith(CM_PATH) and r.status < 300
        and r.body["metadata"]["name"] == CM
    ]  # fmt: skip


async def first_write(api: FakeApiServer, before: int) -> None:
    """Until a fault-manager started after `before` versions were stored has written its own: it has
    read its history and the ConfigMap and published what it makes of them."""
    await until(lambda: len(versions_written(api)) > before, what="the new fault-manager's first ConfigMap write")


async def test_configmap_isolation_admin_release_and_restart(tmp_path: Path) -> None:
    with FakeApiServer() as api:
        exporter = start_exporter(tmp_path / "exporter")
        cfg = write_kubeconfig(tmp_path / "kubeconfig", api.url)
        args = ("--kubeconfig", str(cfg))
        fm: FaultManagerProc = start_fault_manager(tmp_path / "fm", exporter, *args, kube="api")
        try:
            await wait_ready(fm)
            await until(lambda: "DeviceInfoCfg" in configmap(api), what="the first ConfigMap write")
            obj = api.get_object("configmaps", CM, "kube-system")
            assert obj is not None and obj["metadata"]["labels"] == {"mx-consumer-cim": "true"}
            assert set(configmap(api)) >= {"DeviceInfoCfg", "ManuallySeparateNPU", "UpgradeFaultReason", "Description"}

            # Nothing changed: nothing is rewritten (the 5-minute refresh is far away). An absence, so a time.
            writes = api.count("PUT", CM_PATH) + api.count("POST", CM_PATH)
            await asyncio.sleep(3.0)
            assert api.count("PUT", CM_PATH) + api.count("POST", CM_PATH) == writes

            # Two HBM faults in a day isolate the chip; the first write meets a 409 and is retried.
            async with exporter.client() as client:
                name = (await client.get("/v1/chips/3")).json()["name"]
            api.fail_next(1, 409, path_prefix=CM_PATH, method="PUT")
            for assertion in ("occur", "recover", "occur", "recover"):
                await sim(exporter, "/v1/sim/chips/3/faults", {"code": HBM, "assertion": assertion})
            await until(lambda: configmap(api).get("ManuallySeparateNPU") == name, what=f"{name} isolated")
            assert any(r.method == "PUT" and r.path.startswith(CM_PATH) and r.status == 409 for r in api.requests)
            # The reason goes out in the same write as the isolation, its code lower-case as the policy spells it.
            reasons = json.loads(configmap(api)["UpgradeFaultReason"])
            assert [(r["fault_code"], r["fault_level"], r["upgrade_type"]) for r in reasons[name]] == [
                ("80e01801", "ManuallySeparateNPU", "FaultFrequency")
            ]
            device_list = json.loads(configmap(api)["DeviceInfoCfg"])["DeviceInfo"]["DeviceList"]
            [card] = [f for f in json.loads(device_list["huawei.com/Ascend910-Fault"]) if f["npu_name"] == name]
            assert (card["fault_type"], card["fault_level"], card["fault_code"]) == (
                "CardUnhealthy",
                "ManuallySeparateNPU",
                "80E01801",
            ), card
            assert (await verdicts(fm))[name]["manually_separated"] is True
            assert name in await asyncio.to_thread(_manual, fm.db)
            await until(lambda: any(e.get("reason") == "NPUIsolated" for e in api.objects("events")), what="the Event")

            # A restart keeps the isolation and its reason.
            assert fm.stop() == 0
            fm = start_fault_manager(tmp_path / "fm", exporter, *args, kube="api", db=fm.db)
            await wait_ready(fm)
            await until(
                lambda: name in {c for c, v in _sync_verdicts(fm).items() if v["manually_separated"]},
                what=f"{name} still isolated after the restart",
            )
            assert configmap(api)["ManuallySeparateNPU"] == name

            # The administrator removes the chip from the ConfigMap: released, and one new HBM fault
            # does not isolate it again.
            api.modify("configmaps", CM, "kube-system", lambda o: o["data"].update(ManuallySeparateNPU=""))
            await until(lambda: not _sync_verdicts(fm)[name]["manually_separated"], 15, f"{name} released")
            assert name not in await asyncio.to_thread(_manual, fm.db)
            # The removed reason is announced as the reference does (WriteUpgradeReasonRemoveEvent).
            await until(lambda: _release_events(api), what="the EventReleaseUpgradeFault Event")
            [event] = _release_events(api)
            assert re.fullmatch(r".+\.EventReleaseUpgradeFault\.\d{13}", event["metadata"]["name"]), event
            assert (event["type"], event["action"], event["involvedObject"]["kind"]) == (
                "Normal",
                "EventReleaseUpgradeFault",
                "pod",
            )
            assert event["involvedObject"]["namespace"] == "kube-system"
            assert json.loads(event["message"]) == {name: [{**reasons[name][0]}]}
            assert json.loads(configmap(api)["UpgradeFaultReason"]) == {}
            # A restart after the release does not count the occurrences before it again (found by the
            # cluster tier: a rolling update re-isolated a chip an administrator had released).
            assert fm.stop() == 0
            before = len(versions_written(api))
            fm = start_fault_manager(tmp_path / "fm", exporter, *args, kube="api", db=fm.db)
            await wait_ready(fm)
            await first_write(api, before)
            assert _sync_verdicts(fm)[name]["manually_separated"] is False
            assert configmap(api)["ManuallySeparateNPU"] == ""
            await sim(exporter, "/v1/sim/chips/3/faults", {"code": HBM, "assertion": "occur"})
            await sim(exporter, "/v1/sim/chips/3/faults", {"code": HBM, "assertion": "recover"})
            await asyncio.sleep(1.5)  # an absence, so a time: the new fault isolates nothing
            assert _sync_verdicts(fm)[name]["manually_separated"] is False
            assert configmap(api)["ManuallySeparateNPU"] == ""
        finally:
            fm.stop()
            exporter.stop()


def _manual(db: Path) -> set[str]:
    store = Store(db)
    try:
        return store.manual.chips()
    finally:
        store.close()


def _sync_verdicts(fm: FaultManagerProc) -> dict[str, dict[str, object]]:
    import httpx

    with httpx.Client(transport=httpx.HTTPTransport(uds=str(fm.socket)), base_url="http://fm") as client:
        return {v["chip"]: v for v in client.get("/v1/verdicts").json()["verdicts"]}


@pytest.mark.parametrize("source", ["apiserver", "kubelet"])
async def test_pods_in_use_leave_the_free_list_and_keep_a_preseparated_chip_for_their_job(
    tmp_path: Path, source: str
) -> None:
    """With either pod source (--pod-source); from the kubelet there is no pod read on the API server,
    and a dead kubelet leaves the pods as they were last read (the chip stays in use)."""
    with FakeApiServer() as api, contextlib.ExitStack() as stack:
        exporter = start_exporter(tmp_path / "exporter")
        async with exporter.client() as client:
            chips = (await client.get("/v1/chips")).json()["chips"]
        used, idle = chips[0], chips[1]
        api.add_pod("train-0", "ml", node="node-a", phase="Running",
                    annotations={"huawei.com/AscendReal": used["name"], "huawei.com/kltDev": used["name"]})  # fmt: skip
        cfg = write_kubeconfig(tmp_path / "kubeconfig", api.url)
        args = ["--kubeconfig", str(cfg), "--time-scale", "10"]
        kubelet: FakeKubeletPods | None = None
        if source == "kubelet":
            cert = make_cert(tmp_path / "pki")
            kubelet = stack.enter_context(FakeKubeletPods(cert, api=api, tokens={"fm-token"}))
            args += pod_source_args(kubelet, tmp_path / "token")
        fm = start_fault_manager(tmp_path / "fm", exporter, *args, kube="api")
        try:
            await wait_ready(fm)

            def free() -> list[str]:
                data = configmap(api)
                if "DeviceInfoCfg" not in data:
                    return []
                return str(json.loads(data["DeviceInfoCfg"])["DeviceInfo"]["DeviceList"]["huawei.com/Ascend910"]).split(
                    ","
                )

            # The first write waits for the pods to be listed (with either source): a chip a running
            # pod holds is never offered as free, not even for a moment.
            await until(lambda: idle["name"] in free(), what="the idle chip on the free list")
            assert used["name"] not in free()
            # A PreSeparateNPU chip code on both (a link down would act on the network level only).
            for chip in (used, idle):
                await sim(exporter, f"/v1/sim/chips/{chip['logic_id']}/faults", {"code": "8118043C", "severity": 2})
            await until(
                lambda: _sync_verdicts(fm)[idle["name"]]["fault_level"] == "PreSeparateNPU",
                what="the idle chip's PreSeparateNPU verdict",
            )
            v = _sync_verdicts(fm)
            assert v[idle["name"]]["schedulable"] is False
            assert v[used["name"]]["fault_level"] == "PreSeparateNPU"
            assert v[used["name"]]["schedulable"] is True, "its running pod keeps it"
            if kubelet is not None:
                assert pod_requests(api) == [], "no pod list, watch or get on the API server"
                kubelet.set_down(True)
                api.remove("pods", "train-0", "ml")  # unseen while the kubelet is dead
                failed = "kubelet pod list failed; keeping the last good list, retrying"
                await until(lambda: failed in fm.log_path.read_text(), what="the dead kubelet logged")
                assert _sync_verdicts(fm)[used["name"]]["schedulable"] is True, "the last good list is kept"
                kubelet.set_down(False)
                await until(
                    lambda: _sync_verdicts(fm)[used["name"]]["schedulable"] is False,
                    what="the pod gone once the kubelet answers again",
                )
                assert pod_requests(api) == []
        finally:
            fm.stop()
            exporter.stop()


def _chips_listed(body: dict[str, Any]) -> set[str]:
    """Every chip a device-info ConfigMap names in its DeviceList (free, unhealthy or in use: all known)."""
    cfg = json.loads(body["data"]["DeviceInfoCfg"])
    device_list = cfg["DeviceInfo"]["DeviceList"]
    names: set[str] = set()
    for key in ("huawei.com/Ascend910", "huawei.com/Ascend910-Unhealthy"):
        names |= {n for n in device_list.get(key, "").split(",") if n}
    names |= {f["npu_name"] for f in json.loads(device_list.get("huawei.com/Ascend910-Fault", "[]"))}
    return names


@pytest.mark.timeout(360)  # 20 process starts take ~100 s on an idle machine, more on a loaded CI runner
async def test_restarts_never_publish_fewer_chips_than_the_node_has(tmp_path: Path) -> None:
    """20 starts, every other one with a new database (a first start, or its hostPath lost) and the
    exporter down until 1.5 s after the fault-manager started: every version of the device-info
    ConfigMap the API server stored lists all 8 chips (a write before the chip list was read had every
    list empty)."""
    with FakeApiServer() as api:
        cfg = write_kubeconfig(tmp_path / "kubeconfig", api.url)
        args = ("--kubeconfig", str(cfg), "--refresh-period", "1")  # a write soon after each start
        exporter = start_exporter(tmp_path / "exporter")
        try:
            for restart in range(20):
                exporter_down = restart % 2 == 1
                if exporter_down:
                    exporter.stop()
                db = tmp_path / "fm" / f"fm-{restart if exporter_down else 0}.db"
                before = len(versions_written(api))
                fm = start_fault_manager(tmp_path / "fm", exporter, *args, kube="api", db=db)
                try:
                    if exporter_down:
                        await asyncio.sleep(1.5)  # the scenario: the exporter comes back this long after the start
                        exporter = start_exporter(tmp_path / "exporter")
                    await wait_ready(fm)
                    await first_write(api, before)
                finally:
                    assert fm.stop() == 0
            versions = versions_written(api)
            assert len(versions) >= 20, len(versions)
            assert all(len(_chips_listed(b)) == 8 for b in versions), [sorted(_chips_listed(b)) for b in versions]
        finally:
            exporter.stop()


async def test_edits_made_while_down_are_honoured_and_a_new_database_keeps_the_listed_isolations(
    tmp_path: Path,
) -> None:
    """An administrator's edit of ManuallySeparateNPU while the fault-manager is down is an edit (by
    the audit of what the last write held), not something to revert; and a new database (first start,
    or its hostPath lost) never un-isolates a chip the ConfigMap lists: it is kept as an administrator's."""
    with FakeApiServer() as api:
        exporter = start_exporter(tmp_path / "exporter")
        cfg = write_kubeconfig(tmp_path / "kubeconfig", api.url)
        args = ("--kubeconfig", str(cfg))
        fm = start_fault_manager(tmp_path / "fm", exporter, *args, kube="api")
        try:
            await wait_ready(fm)
            async with exporter.client() as client:
                a, b = [(await client.get(f"/v1/chips/{i}")).json()["name"] for i in (3, 5)]
            for assertion in ("occur", "recover", "occur", "recover"):
                await sim(exporter, "/v1/sim/chips/3/faults", {"code": HBM, "assertion": assertion})
            await until(lambda: configmap(api).get("ManuallySeparateNPU") == a, what=f"{a} isolated in the ConfigMap")
            assert fm.stop() == 0
            # While it is down: the administrator releases a and isolates b.
            api.modify("configmaps", CM, "kube-system", lambda o: o["data"].update(ManuallySeparateNPU=b))
            before = len(versions_written(api))
            fm = start_fault_manager(tmp_path / "fm", exporter, *args, kube="api", db=fm.db)
            await wait_ready(fm)
            await until(
                lambda: {c for c, v in _sync_verdicts(fm).items() if v["manually_separated"]} == {b},
                what=f"{b} alone isolated",
            )
            await first_write(api, before)
            assert configmap(api)["ManuallySeparateNPU"] == b
            assert fm.stop() == 0
            # A new database: b, listed in the ConfigMap, stays isolated. (a may be isolated again: the new
            # database replays the exporter's run, HBM faults included, and knows nothing of the release.)
            before = len(versions_written(api))
            fm = start_fault_manager(tmp_path / "fm2", exporter, *args, kube="api")
            await wait_ready(fm)
            await until(lambda: _sync_verdicts(fm).get(b, {}).get("manually_separated") is True, what=f"{b} isolated")
            await first_write(api, before)
            assert b in configmap(api)["ManuallySeparateNPU"].split(",")
            assert b in await asyncio.to_thread(_manual, fm.db)
        finally:
            fm.stop()
            exporter.stop()


RELEASING = "81078603"  # FaultFrequency -> ManuallySeparateNPU, ReleaseTimeWindow 172800 s (the longest)


async def test_drop_in_swap_adopts_the_isolations_and_reasons_of_the_configmap(tmp_path: Path) -> None:
    """A node someone ran before (the reference plugin): its ConfigMap lists chip A in ManuallySeparateNPU
    with a FaultFrequency reason, and chip B without one; our database is new. Both stay isolated from
    the first write on; A keeps its reason and its rule releases it (ReleaseTimeWindow after its upgrade
    time); B is an administrator's and outlives the longest ReleaseTimeWindow; an administrator's removal
    of B releases it. Policy time runs 10,000x: 172,800 s of it take 17.3 s."""
    with FakeApiServer() as api:
        exporter = start_exporter(tmp_path / "exporter")
        try:
            async with exporter.client() as client:
                a, b = [(await client.get(f"/v1/chips/{i}")).json()["name"] for i in (2, 6)]
            started = time.time()
            upgrade_ms = int((started - 5.0) * 1000)  # 50,000 policy s ago: 122,800 left (12.3 s)
            reason = [{"upgrade_time": upgrade_ms, "fault_code": RELEASING.lower(),
                       "fault_level": "ManuallySeparateNPU", "upgrade_type": "FaultFrequency"}]  # fmt: skip
            api.add_configmap(CM, "kube-system", {
                "DeviceInfoCfg": json.dumps({"DeviceInfo": {"DeviceList": {}, "UpdateTime": int(started) - 60}}),
                "ManuallySeparateNPU": f"{a},{b}",
                "UpgradeFaultReason": json.dumps({a: reason}),
            }, **{"mx-consumer-cim": "true"})  # fmt: skip
            cfg = write_kubeconfig(tmp_path / "kubeconfig", api.url)
            fm = start_fault_manager(
                tmp_path / "fm", exporter, "--kubeconfig", str(cfg), "--time-scale", "10000", kube="api"
            )
            try:
                await wait_ready(fm)
                await until(lambda: "CheckCode" in configmap(api).get("DeviceInfoCfg", ""), what="our first write")
                v = _sync_verdicts(fm)
                assert v[a]["manually_separated"] and v[b]["manually_separated"]
                assert not v[a]["schedulable"] and not v[b]["schedulable"]
                assert set(configmap(api)["ManuallySeparateNPU"].split(",")) == {a, b}
                kept = json.loads(configmap(api)["UpgradeFaultReason"])[a]
                assert kept == reason, "A keeps its reason as written"
                # A restart holds both as they were adopted (the audit says so, the reasons are stored).
                assert fm.stop() == 0
                fm = start_fault_manager(tmp_path / "fm", exporter, "--kubeconfig", str(cfg), "--time-scale", "10000",
                                         kube="api", db=fm.db)  # fmt: skip
                await wait_ready(fm)
                v = _sync_verdicts(fm)
                assert v[a]["manually_separated"] and v[b]["manually_separated"]
                assert json.loads(configmap(api)["UpgradeFaultReason"])[a] == reason
                # A's rule releases it 17.3 s after its upgrade time (12.3 s after the start).
                await until(lambda: not _sync_verdicts(fm)[a]["manually_separated"], 20, f"{a} released by its rule")
                assert time.time() >= started + 12.0, "released by its ReleaseTimeWindow, not before"
                await until(lambda: configmap(api)["ManuallySeparateNPU"] == b, what=f"{a} gone from the ConfigMap")
                assert a not in json.loads(configmap(api)["UpgradeFaultReason"])
                # B outlives the longest ReleaseTimeWindow (17.3 s of real time from its adoption): an
                # absence, so a time.
                await asyncio.sleep(max(0.0, started + 21.0 - time.time()))
                assert _sync_verdicts(fm)[b]["manually_separated"] is True
                assert configmap(api)["ManuallySeparateNPU"] == b
                # Every version the API server stored listed B, and A until its release.
                isolated = [body["data"]["ManuallySeparateNPU"].split(",") for body in versions_written(api)]
                assert isolated and all(b in w for w in isolated), isolated
                first_without_a = next(i for i, w in enumerate(isolated) if a not in w)
                assert all(a in w for w in isolated[:first_without_a]) and first_without_a > 0
                store = Store(fm.db)
                try:
                    for chip in (a, b):
                        assert [(r.separated, r.set_by) for r in store.manual.audit(chip)][-1] == (True, "adopted")
                finally:
                    store.close()
                # The administrator removes B: it is released.
                api.modify("configmaps", CM, "kube-system", lambda o: o["data"].update(ManuallySeparateNPU=""))
                await until(lambda: not _sync_verdicts(fm)[b]["manually_separated"], what=f"{b} released")
                assert _sync_verdicts(fm)[b]["schedulable"] is True
            finally:
                fm.stop()
        finally:
            exporter.stop()


async def test_kubeconfig_alone_reaches_the_apiserver(tmp_path: Path) -> None:
    """No --kubeconfig: the fault-manager follows KUBECONFIG, as kubectl does, and says so."""
    with FakeApiServer() as api:
        exporter = start_exporter(tmp_path / "exporter")
        cfg = write_kubeconfig(tmp_path / "kubeconfig", api.url)
        fm = start_fault_manager(tmp_path / "fm", exporter, kube="api", env={"KUBECONFIG": str(cfg)})
        try:
            await wait_ready(fm)
            await until(lambda: "DeviceInfoCfg" in configmap(api), what="the first ConfigMap write")
            assert '"source":"KUBECONFIG"' in fm.log_path.read_text().replace(" ", "")
        finally:
            fm.stop()
            exporter.stop()


@pytest.mark.parametrize(("profile", "pod", "index"), [("a3-16", 3, 1), ("910b-8", -1, -1)])
async def test_device_info_carries_the_nodes_super_pod(tmp_path: Path, profile: str, pod: int, index: int) -> None:
    """DeviceInfoCfg SuperPodID / ServerIndex: what the chips report (the a3-16 sim profile is in super pod
    3 as server 1), the same the plugin writes on the node; -1 off a super pod."""
    async with writing_over(tmp_path, profile) as (api, _, _):
        written = json.loads(configmap(api)["DeviceInfoCfg"])
        assert (written["SuperPodID"], written["ServerIndex"]) == (pod, index)


def _free(api: FakeApiServer, resource: str = "huawei.com/Ascend910") -> set[str]:
    """The free list: DeviceInfoCfg's `huawei.com/Ascend910` (`huawei.com/npu` on a 950 node)."""
    data = configmap(api)
    if "DeviceInfoCfg" not in data:
        return set()
    return set(str(json.loads(data["DeviceInfoCfg"])["DeviceInfo"]["DeviceList"][resource]).split(","))


@pytest.mark.parametrize(
    ("profile", "resource", "hbm_mb"), [("910b-8", "huawei.com/Ascend910", 65536), ("a5-8", "huawei.com/npu", 131072)]
)
async def test_a_soft_shared_chip_stays_free_until_the_quotas_reach_100(
    tmp_path: Path, profile: str, resource: str, hbm_mb: int
) -> None:
    """Issue 23: pods Volcano packs on one chip by quota leave it on the free list while Σaicore < 100 and
    ΣHBM < the first chip's HBM (the sim's profile size); their kltDev slots, spelled with another chip's
    number, name none."""
    async with writing_over(tmp_path, profile) as (api, exporter, _):
        async with exporter.client() as client:
            chips = (await client.get("/v1/chips")).json()["chips"]
        shared, spelled, *markers = [c["name"] for c in chips]
        slots = ",".join(f"{spelled}-{i}" for i in range(30))

        def free() -> set[str]:
            return _free(api, resource)

        def soft(name: str, aicore: int, hbm: int, policy: str = "elastic") -> None:
            api.add_pod(name, "ml", annotations={
                "huawei.com/AscendReal": shared, "huawei.com/kltDev": slots, resource: shared,
                "huawei.com/scheduler.softShareDev.aicoreQuota": str(aicore),
                "huawei.com/scheduler.softShareDev.hbmQuota": str(hbm),
                "huawei.com/scheduler.softShareDev.policy": policy,
            })  # fmt: skip

        async def seen(marker: str) -> None:
            """Until the fault-manager has taken in every pod added so far: a whole-chip pod added after them
            takes `marker` off the free list (pod events are applied in order)."""
            api.add_pod(f"marker-{marker.lower()}", "ml", annotations={
                "huawei.com/AscendReal": marker, "huawei.com/kltDev": marker})  # fmt: skip
            await until(lambda: marker not in free(), what=f"{marker} used by its whole-chip pod")

        await until(lambda: {shared, spelled} <= free(), what="both chips free before any pod")
        soft("infer-a", 30, 16384)
        await seen(markers[0])
        assert {shared, spelled} <= free(), "(30, 16384): room left; the slots name no chip"

        soft("infer-b", 40, 16384)
        soft("infer-gold", 70, 8192, policy="gold")  # its quotas do not parse: not counted
        await seen(markers[1])
        assert {shared, spelled} <= free(), "(30) + (40): room left"

        soft("infer-c", 30, 8192)
        await until(lambda: shared not in free(), what="the shared chip full at Σaicore 100")
        assert spelled in free()

        api.remove("pods", "infer-c", "ml")
        await until(lambda: shared in free(), what="the shared chip free again once a pod is gone")

        soft("infer-big", 0, hbm_mb - 2 * 16384)  # ΣHBM reaches the chip's size
        await until(lambda: shared not in free(), what=f"the shared chip full at ΣHBM {hbm_mb}")
