"""Hot reset: after the idle period, within the token budget, or handed to an operator."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import Any

import httpx
from ascendctl.cli import app as ascendctl
from prometheus_client.parser import text_string_to_metric_families
from typer.testing import CliRunner

from tests.faultmanager.test_service import sim, verdicts
from tests.support.exporter import TOKENS, ExporterProc, start_exporter
from tests.support.fake_apiserver import FakeApiServer, write_kubeconfig
from tests.support.faultmanager import FaultManagerProc, start_fault_manager, wait_ready
from tests.support.waiting import WAIT_S, until

RESTART_NPU = "8C1FA006"
# A job's reset ConfigMap before any reset, as its operator creates it.
EMPTY_RESET_JSON = (
    '{"RankList":[],"UpdateTime":0,"RetryTime":0,"FaultFlushing":false,"GracefulExit":0,"RestartFaultProcess":false}'
)
SCALE = "20"  # 60 s of idle period = 3 s


def reset_token(path: Path) -> Path:
    path.write_text(f"{TOKENS['reset'][0]} reset\n")
    return path


def start_hot_reset(tmp_path: Path, exporter: ExporterProc, *extra: str, kube: str = "offline") -> FaultManagerProc:
    """A fault-manager with hot reset on, its `reset` token, and the drills' time scale."""
    token = reset_token(tmp_path / "fm-token")
    return start_fault_manager(
        tmp_path / "fm", exporter, "--hot-reset", "--token-file", str(token), "--time-scale", SCALE, *extra, kube=kube
    )


async def resets(fm: FaultManagerProc) -> dict[str, Any]:
    async with fm.client() as client:
        return dict((await client.get("/v1/resets")).json())


async def finished_attempt(fm: FaultManagerProc, within: float = WAIT_S) -> dict[str, Any]:
    """The newest reset attempt once it has an outcome."""

    async def finished() -> dict[str, Any] | None:
        attempts = (await resets(fm))["attempts"]
        return dict(attempts[0]) if attempts and attempts[0]["outcome"] is not None else None

    return await until(finished, within, "a reset attempt with an outcome")


async def handed_to_operator(fm: FaultManagerProc, within: float = WAIT_S) -> None:
    """Until a group is on the operator's list of GET /v1/resets."""

    async def listed() -> bool:
        return bool((await resets(fm))["operator"])

    await until(listed, within, "a group handed to an operator")


async def reset_and_schedulable(fm: FaultManagerProc, name: str, attempts: int) -> None:
    """Until the `attempts`-th reset attempt is recorded and `name` is schedulable again."""

    async def done() -> bool:
        return len((await resets(fm))["attempts"]) >= attempts and bool((await verdicts(fm))[name]["schedulable"])

    await until(done, 15, f"reset attempt {attempts} and {name} schedulable again")


async def hot_resets_total(fm: FaultManagerProc) -> dict[str, float]:
    """fault_manager_hot_resets_total by outcome, from the fault-manager's /metrics."""
    async with httpx.AsyncClient() as client:
        text = (await client.get(fm.ops_url + "/metrics")).text
    return {
        sample.labels["outcome"]: sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
        if sample.name == "fault_manager_hot_resets_total"
    }


async def reset_info(fm: FaultManagerProc) -> dict[str, object]:
    async with fm.client() as client:
        objects = (await client.get("/v1/kube/objects")).json()
    nodes = [o for o in objects if o["kind"] == "Node"]
    return json.loads(nodes[0]["metadata"]["annotations"]["ResetInfo"]) if nodes else {}


async def test_reset_after_idle_then_tokens_run_out(tmp_path: Path) -> None:
    exporter = start_exporter(tmp_path / "exporter", "--time-scale", SCALE, "--reset-poll-period", "0.05")
    launched_ms = time.time() * 1000  # hot reset counts the chips idle from its start, no earlier
    fm = start_hot_reset(tmp_path, exporter)
    try:
        await wait_ready(fm)
        async with exporter.client() as client:
            chip_info = (await client.get("/v1/chips/2")).json()
        name = chip_info["name"]

        async def restart_npu() -> bool:
            return (await verdicts(fm))[name]["fault_level"] == "RestartNPU"

        for round_ in range(1, 5):
            await sim(exporter, "/v1/sim/chips/2/faults", {"code": RESTART_NPU})
            await until(restart_npu, what=f"{name}'s RestartNPU verdict")
            if round_ < 4:
                await reset_and_schedulable(fm, name, round_)
                attempts = (await resets(fm))["attempts"]
                assert attempts[0]["outcome"] == "succeeded", attempts
                assert len(attempts[0]["chips"]) == 8  # 910B with HCCS: one group
                assert (await verdicts(fm))[name]["fault_level"] == "NormalNPU"
                if round_ == 1:
                    idle_ms = 60_000 / int(SCALE)
                    assert attempts[0]["started_ms"] >= launched_ms + idle_ms, "no reset before the group was idle 60 s"
            else:
                # The fourth fault inside 6 h: no token left; an operator must act.
                await handed_to_operator(fm)
                [item] = (await resets(fm))["operator"]
                assert "no reset token" in item["reason"] and name in item["chips"]
                assert len((await resets(fm))["attempts"]) == 3
                assert await hot_resets_total(fm) == {"succeeded": 3, "failed": 0, "refused": 0}

                async def manual_reset_devs() -> bool:
                    return bool((await reset_info(fm)).get("ManualResetDevs"))

                await until(manual_reset_devs, what="ResetInfo's ManualResetDevs")
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
        await handed_to_operator(fm, 20)
        [attempt] = (await resets(fm))["attempts"]
        assert attempt["outcome"] == "failed" and attempt["error_code"] == -8015
        assert await hot_resets_total(fm) == {"succeeded": 0, "failed": 1, "refused": 0}
        assert len(attempt["chips"]) == 4  # a 910A ring
        [item] = (await resets(fm))["operator"]
        assert "reset failed" in item["reason"]
        # execRescan / fillResetDevs: the ring that failed, AssociatedCardId -1 off A3; its chips that are
        # healthy leave the list again (checkNodeResetInfo): the faulty one stays.
        async with exporter.client() as client:
            ring = [(await client.get(f"/v1/chips/{n}")).json() for n in range(4)]
        faulty = next(c for c in ring if c["name"] == name)
        entry = {"CardId": faulty["card_id"], "DeviceId": faulty["device_id"], "AssociatedCardId": -1,
                 "PhyID": faulty["phy_id"], "LogicID": faulty["logic_id"]}  # fmt: skip

        async def faulty_listed() -> bool:
            return (await reset_info(fm))["ManualResetDevs"] == [entry]

        await until(faulty_listed, what="the faulty chip alone in ResetInfo's ManualResetDevs")
        assert (await resets(fm))["reset_info"] == await reset_info(fm)
        # Read back after a restart (InitResetInfoMgr): still listed, the group still the operator's.
        written = await reset_info(fm)
        assert fm.stop() == 0
        fm = start_hot_reset(tmp_path, exporter)
        await wait_ready(fm)
        await handed_to_operator(fm)
        assert (await resets(fm))["reset_info"] == written
        assert await reset_info(fm) == written
        [item] = (await resets(fm))["operator"]
        assert "left for an operator by an earlier run" in item["reason"]
        assert (await resets(fm))["attempts"][0]["outcome"] == "failed"
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
            # The job has no reset ConfigMap: its chips are not reset, however long they are idle. An
            # absence, so a time: past the idle period (3 s from the start).
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

            await until(lambda: rank_status() == "recovered", what="the rank recovered in reset.json")
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
            [attempt] = (await resets(fm))["attempts"]
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

            async def accepted() -> httpx.Response | None:
                r = await client.post(f"/v1/chips/{name}/reset")
                assert r.status_code in (202, 409), r.text
                return r if r.status_code == 202 else None

            r = await until(accepted, what="the group idle for 60 s (3 s here): the reset accepted")
            assert name in r.json()["chips"]
        attempt = await finished_attempt(fm)
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
        assert len((await resets(fm))["attempts"]) == 1
        assert attempt["outcome"] == "succeeded", attempt
        assert "trying out-of-band" in exporter.log_path.read_text()

        async def schedulable() -> bool:
            return bool((await verdicts(fm))[name]["schedulable"])

        await until(schedulable, what=f"{name} schedulable again")
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
            await handed_to_operator(fm, 15)
            [item] = (await resets(fm))["operator"]
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
        # Bounded well under the exporter's 60 s: the policy's wait ends the attempt, not the exporter's.
        attempt = await finished_attempt(fm, 30)
        assert attempt["outcome"] == "failed" and attempt["error_code"] == -8006, attempt
        [item] = (await resets(fm))["operator"]
        assert "WaitDeviceResetTime (150 s)" in item["reason"]
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
            await reset_and_schedulable(fm, name, round_)
        view = await resets(fm)
        attempts = view["attempts"]
        assert [a["outcome"] for a in attempts] == ["succeeded"] * 3
        assert all(len(a["chips"]) == 8 for a in attempts)
        first_use_ms = min(a["started_ms"] for a in attempts)
        assert view["tokens"] == {c["name"]: 0 if c["name"] == name else 3 for c in chips}
        # A fourth fault: no token left for chip 3.
        await sim(exporter, "/v1/sim/chips/3/faults", {"code": RESTART_NPU})
        await handed_to_operator(fm)
        [item] = (await resets(fm))["operator"]
        assert f"{name} has no reset token left" in item["reason"]
        # A restart keeps the empty bucket (the reference's starts full again).
        assert fm.stop() == 0
        fm = start_fault_manager(tmp_path / "fm", exporter, *args, db=fm.db)
        await wait_ready(fm)
        tokens = (await resets(fm))["tokens"]
        # Not a benchmark: the check below means something only before the refill, 36 s after first use.
        assert time.time() * 1000 < first_use_ms + 36_000, "too slow to see the bucket before its refill"
        assert tokens[name] == 0 and all(n == 3 for c, n in tokens.items() if c != name), tokens

        # Full again 6 h of policy time after its last refill, not before.
        async def full_again() -> bool:
            return bool((await resets(fm))["tokens"][name] == 3)

        await until(full_again, 45, f"{name}'s bucket full again")
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
            await handed_to_operator(fm, 15)
            view = await resets(fm)
            [item] = view["operator"]
            assert "reset-config-job3 refused: task should be rescheduled" in item["reason"]
            [attempt] = view["attempts"]
            assert attempt["outcome"] == "refused" and "task should be rescheduled" in attempt["reason"]
            assert await hot_resets_total(fm) == {"succeeded": 0, "failed": 0, "refused": 1}
            cm = api.get_object("configmaps", "reset-config-job3", "ml")
            assert cm is not None and cm["data"] == {"reset.json": isolated}, "nothing written"
            await asyncio.sleep(1.0)  # an absence, so a time: several rounds of the reset loop
            assert len((await resets(fm))["attempts"]) == 1, "refused once, not every round"
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
            await handed_to_operator(fm, 20)
            [item] = (await resets(fm))["operator"]
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
