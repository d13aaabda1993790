"""Drill: a RestartNPU fault on a chip of a job in in-place recovery, through to recovery."""

from __future__ import annotations

import json
from typing import Any

from tests.e2e.stack import R, node_stack
from tests.support.exporter import ExporterProc
from tests.support.fake_apiserver import FakeApiServer
from tests.support.waiting import until

RESTART_NPU = "8C1FA006"
JOB_CM = "reset-config-job1"
EMPTY_RESET_JSON = (
    '{"RankList":[],"UpdateTime":0,"RetryTime":0,"FaultFlushing":false,"GracefulExit":0,"RestartFaultProcess":false}'
)


def rank_status(api: FakeApiServer) -> str | None:
    cm = api.get_object("configmaps", JOB_CM, "ml")
    if not cm or "reset.json" not in cm.get("data", {}):
        return None
    ranks = json.loads(cm["data"]["reset.json"])["RankList"]
    if not ranks:
        return None
    [rank] = ranks
    return str(rank["Status"])


async def test_restart_npu_in_place_recovery() -> None:
    chips: dict[str, Any] = {}

    async def plant_job(api: FakeApiServer, exporter: ExporterProc) -> None:
        async with exporter.client() as client:
            chips.update((await client.get("/v1/chips/1")).json())
        api.add_pod(
            "train-0", "ml", phase="Running", labels={"volcano.sh/job-name": "job1"}, requests={R: 1},
            annotations={"huawei.com/AscendReal": chips["name"], "hccl/rankIndex": "0"},
        )  # fmt: skip
        # As the job's operator creates it: a reset.json with no ranks yet.
        api.add_configmap(JOB_CM, "ml", {"reset.json": EMPTY_RESET_JSON}, reset="true")

    async with node_stack(hot_reset=True, prepare=plant_job) as s:
        chip = chips["name"]
        await s.agree(set())
        await s.processes(1, [4242])  # the training process runs on the chip
        registrations = s.kubelet.registration_count(R)

        await s.fault(1, RESTART_NPU)
        await s.kubelet.wait_for(R, lambda m: chip in m.unhealthy, timeout=5)
        listed = await until(
            lambda: i if (i := s.device_info()) and chip in i.unhealthy else None, 5, "the chip in -Unhealthy"
        )
        [fault] = [f for f in listed.faults if f["npu_name"] == chip]
        assert (fault["fault_code"], fault["fault_level"]) == (RESTART_NPU, "RestartNPU")
        await until(lambda: rank_status(s.api) == "unrecovered", 10, "the job told `unrecovered`")
        assert (await s.verdicts())[chip]["fault_level"] == "RestartNPU"

        # The job reads its ConfigMap and stops its processes; the node's one reset group (910B,
        # HCCS) is then idle, and after the idle period (60 s of policy time) it is reset.
        await s.processes(1, [])
        await until(lambda: rank_status(s.api) == "recovered", 20, "the job told `recovered`")
        async with s.fm.client() as client:
            [attempt] = (await client.get("/v1/resets")).json()["attempts"]
        assert attempt["outcome"] == "succeeded" and len(attempt["chips"]) == 8, attempt
        assert chip in attempt["chips"]

        # The chip comes back everywhere: the kubelet, the verdicts, the ConfigMap (no fault left).
        await s.agree(set())
        info = s.device_info()
        # The job's pod still holds the chip, so it is in use rather than in the free list.
        assert info is not None and chip not in info.healthy and info.faults == []
        assert info.healthy == set(s.names.values()) - {chip}
        assert (await s.verdicts())[chip]["fault_level"] == "NormalNPU"
        # The job's reset ConfigMap and its host mirror say the same.
        cm = s.api.get_object("configmaps", JOB_CM, "ml")
        assert cm is not None
        mirror = s.workdir / "mirror" / f"ml.{JOB_CM}" / "reset.json"
        assert mirror.read_text() == cm["data"]["reset.json"]
        # One fault, its recovery by the reset: every event stored once; no registration doubled.
        assert await s.no_event_lost() >= 2
        assert s.kubelet.registration_count(R) == registrations
