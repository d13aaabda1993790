"""Hot reset: after the idle period, within the token budget, or handed to an operator."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path

from ascendctl.cli import app as ascendctl
from typer.testing import CliRunner

from tests.faultmanager.test_service import sim, verdicts
from tests.support.exporter import TOKENS, ExporterProc, start_exporter
from tests.support.fake_apiserver import FakeApiServer, write_kubeconfig
from tests.support.faultmanager import FaultManagerProc, start_fault_manager, wait_ready

RESTART_NPU = "8C1FA006"
# A job's reset ConfigMap before any reset, as its operator creates it.
EMPTY_RESET_JSON = (
    '{"RankList":[],"UpdateTime":0,"RetryTime":0,"FaultFlushing":false,"GracefulExit":0,"RestartFaultProcess":false}'
)
SCALE = "20"  # 60 s of idle period = 3 s


def reset_token(path: Path) -> Path:
    path.write_text(f"{TOKENS['reset'][0]} reset\n")
    return path


def start_hot_reset(tmp_path: Path, exporter: ExporterProc, *extra: str, **kw: str) -> FaultManagerProc:
    """A fault-manager with hot reset on, its `reset` token, and the drills' time scale."""
    token = reset_token(tmp_path / "fm-token")
    return start_fault_manager(
        tmp_path / "fm", exporter, "--hot-reset", "--token-file", str(token), "--time-scale", SCALE, *extra, **kw
    )


async def resets(fm: FaultManagerProc) -> dict[str, object]:
    async with fm.client() as client:
        return dict((await client.get("/v1/resets")).json())


async def finished_attempt(fm: FaultManagerProc, within: float) -> dict[str, object]:
    """The newest reset attempt once it has an outcome."""
    async with asyncio.timeout(within):
        while True:
            attempts = (await resets(fm))["attempts"]
            if attempts and attempts[0]["outcome"] is not None:  # type: ignore[index]
                return dict(attempts[0])  # type: ignore[index]
            await asyncio.sleep(0.1)


async def reset_info(fm: FaultManagerProc) -> dict[str, object]:
    async with fm.client() as client:
        objects = (await client.get("/v1/kube/objects")).json()
    nodes = [o for o in objects if o["kind"] == "Node"]
    return json.loads(nodes[0]["metadata"]["annotations"]["ResetInfo"]) if nodes else {}


async def test_reset_after_idle_then_tokens_run_out(tmp_path: Path) -> None:
    exporter = start_exporter(tmp_path / "exporter", "--time-scale", SCALE, "--reset-poll-period", "0.05")
    fm = start_hot_reset(tmp_path, exporter)
    try:
        await wait_ready(fm)
        started = time.monotonic()
        async with exporter.client() as client:
            chip_info = (await client.get("/v1/chips/2")).json()
        name = chip_info["name"]
        for round_ in range(1, 5):
            await sim(exporter, "/v1/sim/chips/2/faults", {"code": RESTART_NPU})
            async with asyncio.timeout(5):
                while (await verdicts(fm))[name]["fault_level"] != "RestartNPU":
                    await asyncio.sleep(0.05)
            if round_ == 1:
                await asyncio.sleep(0.5)
                assert time.monotonic() - started < 3.0
                assert (await resets(fm))["attempts"] == [], "no reset before the group was idle 60 s"
            if round_ < 4:
                async with asyncio.timeout(15):
                    while len((await resets(fm))["attempts"]) < round_ or not (await verdicts(fm))[name]["schedulable"]:  # type: ignore[arg-type]
                        await asyncio.sleep(0.1)
                attempts = (await resets(fm))["attempts"]
                assert attempts[0]["outcome"] == "succeeded", attempts  # type: ignore[index]
                assert len(attempts[0]["chips"]) == 8  # type: ignore[index]  # 910B with HCCS: one group
                assert (await verdicts(fm))[name]["fault_level"] == "NormalNPU"
            else:
                # The fourth fault inside 6 h: no token left; an operator must act.
                async with asyncio.timeout(10):
                    while not (await resets(fm))["operator"]:
                        await asyncio.sleep(0.1)
                [item] = (await resets(fm))["operator"]  # type: ignore[misc]
                assert "no reset token" in item["reason"] and name in item["chips"]
                assert len((await resets(fm))["attempts"]) == 3  # type: ignore[arg-type]
                async with asyncio.timeout(5):
                    while not (await reset_info(fm)).get("ManualResetDevs"):
                        await asyncio.sleep(0.1)
                chip = (await verdicts(fm))[name]
                # markNeedExternalOps: the faulty chip alone, AssociatedCardId left 0.
                assert (await reset_info(fm))["ManualResetDevs"] == [
                    {"CardId": chip_info["card_id"], "DeviceId": chip_info["device_id"], "AssociatedCardId": 0,
                     "PhyID": chip["phy_id"], "LogicID": chip["logic_id"]}
                ]  # fmt: skip
                assert (await reset_info(fm))["ThirdPartyResetDevs"] == []
                assert chip["schedulable"] is False
    finally:
        fm.stop()
        exporter.stop()


async def test_a_reset_that_fails_goes_to_the_operator(tmp_path: Path) -> None:
    exporter = start_exporter(
        tmp_path / "exporter", "--time-scale", SCALE, "--reset-poll-period", "0.05", "--reset-timeout", "1",
        profile="910a-8",
    )  # fmt: skip
    fm = start_hot_reset(tmp_path, exporter)
    try:
        await wait_ready(fm)
        async with exporter.client() as client:
            name = (await client.get("/v1/chips/1")).json()["name"]
        await sim(exporter, "/v1/sim/chips/1/reset-failure", {"mode": "error"})
        await sim(exporter, "/v1/sim/chips/1/faults", {"code": RESTART_NPU})
        async with asyncio.timeout(20):
            while not (await resets(fm))["operator"]:
                await asyncio.sleep(0.1)
        [attempt] = (await resets(fm))["attempts"]  # type: ignore[misc]
        assert attempt["outcome"] == "failed" and attempt["error_code"] == -8015
        assert len(attempt["chips"]) == 4  # a 910A ring
        [item] = (await resets(fm))["operator"]  # type: ignore[misc]
        assert "reset failed" in item["reason"]
        # execRescan / fillResetDevs: the ring that failed, AssociatedCardId -1 off A3; its chips that are
        # healthy leave the list again (checkNodeResetInfo): the faulty one stays.
        async with exporter.client() as client:
            ring = [(await client.get(f"/v1/chips/{n}")).json() for n in range(4)]
        faulty = next(c for c in ring if c["name"] == name)
        entry = {"CardId": faulty["card_id"], "DeviceId": faulty["device_id"], "AssociatedCardId": -1,
                 "PhyID": faulty["phy_id"], "LogicID": faulty["logic_id"]}  # fmt: skip
        async with asyncio.timeout(5):
            while (await reset_info(fm))["ManualResetDevs"] != [entry]:
                await asyncio.sleep(0.1)
        assert (await resets(fm))["reset_info"] == await reset_info(fm)
        # Read back after a restart (InitResetInfoMgr): still listed, the group still the operator's.
        written = await reset_info(fm)
        assert fm.stop() == 0
        fm = start_hot_reset(tmp_path, exporter)
        await wait_ready(fm)
        async with asyncio.timeout(10):
            while not (await resets(fm))["operator"]:
                await asyncio.sleep(0.1)
        assert (await resets(fm))["reset_info"] == written
        assert await reset_info(fm) == written
        [item] = (await resets(fm))["operator"]  # type: ignore[misc]
        assert "left for an operator by an earlier run" in item["reason"]
        assert (await resets(fm))["attempts"][0]["outcome"] == "failed"  # type: ignore[index]
        shown = CliRunner().invoke(ascendctl, ["resets"], env={"ASCENDCTL_FAULT_MANAGER_SOCKET": str(fm.socket),
                                                              "COLUMNS": "220"})  # fmt: skip
        assert shown.exit_code == 0, shown.output
        shown_entry = f"phy {faulty['phy_id']} (logic {faulty['logic_id']}, card {faulty['card_id']})"
        assert f"ResetInfo ManualResetDevs: {shown_entry}" in " ".join(shown.output.split())
        assert "needs an operator" in shown.output
    finally:
        fm.stop()
        exporter.stop()


async def training_pod_on_chip_1(api: FakeApiServer, exporter: ExporterProc, job: str, rank: int) -> None:
    """A Running pod of Volcano job `job` on the chip of logic id 1."""
    async with exporter.client() as client:
        chip = (await client.get("/v1/chips/1")).json()
    api.add_pod(
        "train-0", "ml", node="node-a", phase="Running", labels={"volcano.sh/job-name": job},
        annotations={"huawei.com/AscendReal": chip["name"], "hccl/rankIndex": str(rank)},
    )  # fmt: skip


async def test_in_place_recovery_job_is_told_around_the_reset(tmp_path: Path) -> None:
    with FakeApiServer() as api:
        exporter = start_exporter(
            tmp_path / "exporter", "--time-scale", SCALE, "--reset-poll-period", "0.05", profile="910a-8"
        )
        await training_pod_on_chip_1(api, exporter, "job1", rank=2)
        mirror = tmp_path / "mirror"
        kubeconfig = str(write_kubeconfig(tmp_path / "kc", api.url))
        fm = start_hot_reset(
            tmp_path, exporter, "--kubeconfig", kubeconfig, "--reset-mirror-dir", str(mirror), kube="api"
        )
        try:
            await wait_ready(fm)
            await sim(exporter, "/v1/sim/chips/1/faults", {"code": RESTART_NPU})
            # The job has no reset ConfigMap: its chips are not reset, however long they are idle.
            await asyncio.sleep(4.0)
            assert (await resets(fm))["attempts"] == []
            assert "takes no part in in-place recovery" in fm.log_path.read_text()

            api.add_configmap("reset-config-job1", "ml", {"reset.json": EMPTY_RESET_JSON}, reset="true")

            def rank_status() -> str | None:
                cm = api.get_object("configmaps", "reset-config-job1", "ml")
                if not cm or "reset.json" not in cm["data"] or cm["data"]["reset.json"] == EMPTY_RESET_JSON:
                    return None
                [rank] = json.loads(cm["data"]["reset.json"])["RankList"]
                return str(rank["Status"])

            async with asyncio.timeout(10):
                while rank_status() != "recovered":
                    await asyncio.sleep(0.05)
            cm = api.get_object("configmaps", "reset-config-job1", "ml")
            assert cm is not None
            info = json.loads(cm["data"]["reset.json"])
            [rank] = info["RankList"]
            assert (rank["RankId"], rank["LogicId"], rank["Policy"], rank["InitialPolicy"]) == (2, 1, "reset", "reset")
            assert rank["ErrorCodeHex"] == RESTART_NPU
            # The reset is a retry of the job: RetryTime counts it, restartType is hotReset.
            assert info["RetryTime"] == 1
            assert cm["data"]["restartType"] == "hotReset"
            assert (mirror / "ml.reset-config-job1" / "reset.json").read_text() == cm["data"]["reset.json"]
            [attempt] = (await resets(fm))["attempts"]  # type: ignore[misc]
            assert attempt["outcome"] == "succeeded"
            assert '"status":"unrecovered"' in fm.log_path.read_text().replace(" ", "")
        finally:
            fm.stop()
            exporter.stop()


async def test_operator_reset_goes_through_the_preconditions(tmp_path: Path) -> None:
    exporter = start_exporter(tmp_path / "exporter", "--time-scale", SCALE, "--reset-poll-period", "0.05")
    fm = start_hot_reset(tmp_path, exporter)
    try:
        await wait_ready(fm)
        async with exporter.client() as client:
            name = (await client.get("/v1/chips/0")).json()["name"]
        async with fm.client() as client:
            r = await client.post(f"/v1/chips/{name}/reset")
            assert r.status_code == 409 and "idle" in r.json()["detail"], r.text  # just started: not idle yet
            assert (await client.post("/v1/chips/Ascend910-99/reset")).status_code == 404
            assert (await client.post("/v1/chips/bogus/reset")).status_code == 422
            await asyncio.sleep(3.2)
            r = await client.post(f"/v1/chips/{name}/reset")
            assert r.status_code == 202, r.text
            assert name in r.json()["chips"]
        attempt = await finished_attempt(fm, 10)
        assert attempt["outcome"] == "succeeded"
    finally:
        fm.stop()
        exporter.stop()


async def test_failed_in_band_reset_is_retried_out_of_band_on_910b(tmp_path: Path) -> None:
    exporter = start_exporter(tmp_path / "exporter", "--time-scale", SCALE, "--reset-poll-period", "0.05")
    fm = start_hot_reset(tmp_path, exporter)
    try:
        await wait_ready(fm)
        async with exporter.client() as client:
            name = (await client.get("/v1/chips/1")).json()["name"]
        await sim(exporter, "/v1/sim/chips/1/reset-failure", {"mode": "error"})  # the in-band reset fails once
        await sim(exporter, "/v1/sim/chips/1/faults", {"code": RESTART_NPU})
        attempt = await finished_attempt(fm, 15)
        assert len((await resets(fm))["attempts"]) == 1  # type: ignore[arg-type]
        assert attempt["outcome"] == "succeeded", attempt
        assert "trying out-of-band" in exporter.log_path.read_text()
        async with asyncio.timeout(5):
            while not (await verdicts(fm))[name]["schedulable"]:
                await asyncio.sleep(0.1)
        assert (await resets(fm))["operator"] == []
    finally:
        fm.stop()
        exporter.stop()


async def test_a_job_whose_processes_do_not_stop_fails_to_the_operator(tmp_path: Path) -> None:
    with FakeApiServer() as api:
        exporter = start_exporter(
            tmp_path / "exporter", "--time-scale", SCALE, "--reset-poll-period", "0.05", profile="910a-8"
        )
        await training_pod_on_chip_1(api, exporter, "job2", rank=0)
        api.add_configmap("reset-config-job2", "ml", {"reset.json": EMPTY_RESET_JSON}, reset="true")
        async with exporter.client() as client:
            r = await client.put("/v1/sim/chips/1/processes", json={"processes": [{"pid": 77}]},
                                 headers={"Authorization": f"Bearer {TOKENS['sim'][0]}"})  # fmt: skip
            assert r.status_code == 204
        kubeconfig = str(write_kubeconfig(tmp_path / "kc", api.url))
        fm = start_hot_reset(tmp_path, exporter, "--kubeconfig", kubeconfig, kube="api")
        try:
            await wait_ready(fm)
            await sim(exporter, "/v1/sim/chips/1/faults", {"code": RESTART_NPU})
            # Told to stop, the job keeps its process past WaitProcessReadCMTime (30 s = 1.5 s here).
            async with asyncio.timeout(15):
                while not (await resets(fm))["operator"]:
                    await asyncio.sleep(0.1)
            [item] = (await resets(fm))["operator"]  # type: ignore[misc]
            assert "did not stop" in item["reason"]
            assert (await resets(fm))["attempts"] == []
            cm = api.get_object("configmaps", "reset-config-job2", "ml")
            assert cm is not None
            assert json.loads(cm["data"]["reset.json"])["RankList"][0]["Status"] == "failed"
        finally:
            fm.stop()
            exporter.stop()


async def test_a_reset_that_outlasts_wait_device_reset_time_goes_to_the_operator(tmp_path: Path) -> None:
    scale = "50"  # WaitDeviceResetTime 150 s = 3 s; the exporter itself would wait 60 s
    exporter = start_exporter(
        tmp_path / "exporter", "--time-scale", scale, "--reset-poll-period", "0.05", "--reset-timeout", "60",
        profile="910a-8",
    )  # fmt: skip
    token = reset_token(tmp_path / "fm-token")
    fm = start_fault_manager(
        tmp_path / "fm", exporter, "--hot-reset", "--token-file", str(token), "--time-scale", scale
    )
    try:
        await wait_ready(fm)
        await sim(exporter, "/v1/sim/chips/1/reset-failure", {"mode": "stuck"})  # never boots again
        await sim(exporter, "/v1/sim/chips/1/faults", {"code": RESTART_NPU})
        started = time.monotonic()
        attempt = await finished_attempt(fm, 20)
        assert attempt["outcome"] == "failed" and attempt["error_code"] == -8006, attempt
        [item] = (await resets(fm))["operator"]  # type: ignore[misc]
        assert "WaitDeviceResetTime (150 s)" in item["reason"]
        assert time.monotonic() - started < 15, "the policy's wait, not the exporter's 60 s"
    finally:
        fm.stop()
        exporter.stop()


async def test_tokens_are_charged_to_the_faulty_chip_alone_and_refill_whole_after_6_h(tmp_path: Path) -> None:
    """910B with HCCS (one reset ring of 8): chip 3 faults three times and is reset three times; it has 0
    tokens, the seven others still 3 (the reference's TokenBucketMgr: a bucket per faulty chip). A fourth
    fault goes to the operator, in ResetInfo. The bucket is in SQLite: a restart keeps it empty; 6 h of
    policy time after its last refill (its first use) it is full again. Policy time runs 600x here."""
    scale = "600"  # 6 h = 36 s; the 60 s idle period 0.1 s
    exporter = start_exporter(tmp_path / "exporter", "--time-scale", scale, "--reset-poll-period", "0.05")
    token = reset_token(tmp_path / "fm-token")
    args = ("--hot-reset", "--token-file", str(token), "--time-scale", scale)
    fm = start_fault_manager(tmp_path / "fm", exporter, *args)
    try:
        await wait_ready(fm)
        async with exporter.client() as client:
            chips = (await client.get("/v1/chips")).json()["chips"]
        name = next(c["name"] for c in chips if c["logic_id"] == 3)
        for round_ in range(1, 4):
            await sim(exporter, "/v1/sim/chips/3/faults", {"code": RESTART_NPU})
            async with asyncio.timeout(15):
                while len((await resets(fm))["attempts"]) < round_ or not (await verdicts(fm))[name]["schedulable"]:  # type: ignore[arg-type]
                    await asyncio.sleep(0.05)
        view = await resets(fm)
        attempts = view["attempts"]
        assert [a["outcome"] for a in attempts] == ["succeeded"] * 3  # type: ignore[union-attr,index]
        assert all(len(a["chips"]) == 8 for a in attempts)  # type: ignore[union-attr,index]
        first_use_ms = min(a["started_ms"] for a in attempts)  # type: ignore[union-attr,index]
        assert view["tokens"] == {c["name"]: 0 if c["name"] == name else 3 for c in chips}
        # A fourth fault: no token left for chip 3.
        await sim(exporter, "/v1/sim/chips/3/faults", {"code": RESTART_NPU})
        async with asyncio.timeout(10):
            while not (await resets(fm))["operator"]:
                await asyncio.sleep(0.05)
        [item] = (await resets(fm))["operator"]  # type: ignore[misc]
        assert f"{name} has no reset token left" in item["reason"]
        # A restart keeps the empty bucket (the reference's starts full again).
        assert fm.stop() == 0
        fm = start_fault_manager(tmp_path / "fm", exporter, *args, db=fm.db)
        await wait_ready(fm)
        tokens = (await resets(fm))["tokens"]
        assert time.time() * 1000 < first_use_ms + 36_000, "too slow to see the bucket before its refill"
        assert tokens[name] == 0 and all(n == 3 for c, n in tokens.items() if c != name), tokens  # type: ignore[union-attr]
        # Full again 6 h of policy time after its last refill, not before.
        async with asyncio.timeout(45):
            while (await resets(fm))["tokens"][name] != 3:  # type: ignore[index]
                await asyncio.sleep(0.1)
        assert time.time() * 1000 >= first_use_ms + 36_000 - 50
    finally:
        fm.stop()
        exporter.stop()


async def test_a_reset_config_that_says_isolate_refuses_the_reset_and_says_why(tmp_path: Path) -> None:
    """The reference refuses to write a RankList over a reset.json that contains "isolate" (a chip of the
    job was isolated: the job must be rescheduled). Nothing is written, the chips are not reset, and the
    reason is in the refused attempt and the operator list of GET /v1/resets."""
    with FakeApiServer() as api:
        exporter = start_exporter(
            tmp_path / "exporter", "--time-scale", SCALE, "--reset-poll-period", "0.05", profile="910a-8"
        )
        await training_pod_on_chip_1(api, exporter, "job3", rank=0)
        isolated = EMPTY_RESET_JSON.replace(
            '"RankList":[]',
            '"RankList":[{"RankId":4,"LogicId":5,"Status":"unrecovered","Policy":"isolate",'
            '"InitialPolicy":"isolate","ErrorCode":[],"ErrorCodeHex":"80E01801"}]',
        )
        api.add_configmap("reset-config-job3", "ml", {"reset.json": isolated}, reset="true")
        kubeconfig = str(write_kubeconfig(tmp_path / "kc", api.url))
        fm = start_hot_reset(tmp_path, exporter, "--kubeconfig", kubeconfig, kube="api")
        try:
            await wait_ready(fm)
            await sim(exporter, "/v1/sim/chips/1/faults", {"code": RESTART_NPU})
            async with asyncio.timeout(15):
                while not (await resets(fm))["operator"]:
                    await asyncio.sleep(0.1)
            view = await resets(fm)
            [item] = view["operator"]  # type: ignore[misc]
            assert "reset-config-job3 refused: task should be rescheduled" in item["reason"]
            [attempt] = view["attempts"]  # type: ignore[misc]
            assert attempt["outcome"] == "refused" and "task should be rescheduled" in attempt["reason"]
            cm = api.get_object("configmaps", "reset-config-job3", "ml")
            assert cm is not None and cm["data"] == {"reset.json": isolated}, "nothing written"
            await asyncio.sleep(1.0)
            assert len((await resets(fm))["attempts"]) == 1, "refused once, not every round"  # type: ignore[arg-type]
        finally:
            fm.stop()
            exporter.stop()


async def test_an_unreadable_node_at_start_does_not_erase_its_reset_info(tmp_path: Path) -> None:
    """The ResetInfo an earlier run left (here: the reference's, naming chip 5, which is faulty) is read
    before hot reset does anything: while the node cannot be read (500s), nothing is reset and the
    annotation is not rewritten; once it is read, chip 5 stays the operator's and stays listed."""
    with FakeApiServer() as api:
        exporter = start_exporter(tmp_path / "exporter", "--time-scale", SCALE, "--reset-poll-period", "0.05")
        async with exporter.client() as client:
            chip = (await client.get("/v1/chips/5")).json()
        left = json.dumps({"ThirdPartyResetDevs": [], "ManualResetDevs": [
            {"CardId": chip["card_id"], "DeviceId": chip["device_id"], "AssociatedCardId": 0,
             "PhyID": chip["phy_id"], "LogicID": chip["logic_id"]}]}, separators=(",", ":"))  # fmt: skip
        api.add_node("node-a", annotations={"ResetInfo": left})
        await sim(exporter, "/v1/sim/chips/5/faults", {"code": RESTART_NPU})
        api.fail_next(8, 500, path_prefix="/api/v1/nodes/node-a", method="GET")
        kubeconfig = str(write_kubeconfig(tmp_path / "kc", api.url))
        fm = start_hot_reset(tmp_path, exporter, "--kubeconfig", kubeconfig, kube="api")
        try:
            await wait_ready(fm)
            async with asyncio.timeout(20):
                while not (await resets(fm))["operator"]:
                    await asyncio.sleep(0.1)
            [item] = (await resets(fm))["operator"]  # type: ignore[misc]
            assert "left for an operator by an earlier run" in item["reason"] and chip["name"] in item["chips"]
            assert (await resets(fm))["attempts"] == []
            node = api.get_object("nodes", "node-a")
            assert node is not None and node["metadata"]["annotations"]["ResetInfo"] == left
            node_path = "/api/v1/nodes/node-a"
            first_read = next(
                i for i, r in enumerate(api.requests) if r.method == "GET" and r.path == node_path and r.status == 200
            )
            assert not any(
                r.method == "PATCH" and r.path.startswith("/api/v1/nodes") for r in api.requests[:first_read]
            )
        finally:
            fm.stop()
            exporter.stop()
