"""Drill: a hung job (issue 24). A job holds a chip and makes no progress; the exporter's hung-job
detection raises 200001002, the fault-manager lists it at NotHandleFault (the chip stays usable),
a policy that maps the code to RestartNPU takes the chip out, and the job moving again clears it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.e2e.stack import DeviceInfo, node_stack
from tests.support.waiting import until

HANG_CODE = "200001002"
PACKAGED_FAULT_CODES = Path(__file__).resolve().parents[2] / "libs/common/src/ascend_common/data/faultCode.json"
CHIP = 3
PIDS = [4242, 4243]
# Short rounds and runs, so that the drill takes seconds: 0.2 s rounds, 3 of them in a row.
HANG_INTERVAL = "0.2"
HANG_CONFIG = {"HangDetection": {"Enabled": True, "Threshold": {"DetectDuration": 3}}}


def restart_npu_policy() -> str:
    """The packaged faultCode.json with 200001002 moved from NotHandleFault to RestartNPU."""
    table: dict[str, list[str]] = json.loads(PACKAGED_FAULT_CODES.read_text())
    assert HANG_CODE in table["NotHandleFaultCodes"]
    table["NotHandleFaultCodes"].remove(HANG_CODE)
    table["RestartNPUCodes"].append(HANG_CODE)
    return json.dumps(table)


def hang_faults(info: DeviceInfo | None, chip: str) -> list[dict[str, Any]]:
    return [] if info is None else [f for f in info.faults if f["npu_name"] == chip and f["fault_code"] == HANG_CODE]


async def test_hung_job_is_listed_then_separated_by_policy_then_recovers(tmp_path: Path) -> None:
    config = tmp_path / "hangDetectionConfig.json"
    config.write_text(json.dumps(HANG_CONFIG))
    exporter_args = ("--hang-interval", HANG_INTERVAL, "--hang-config", str(config))
    async with node_stack(exporter_args=exporter_args) as s:
        chip = s.names[CHIP]
        await s.agree(set())
        events_before = {e["metadata"]["name"] for e in s.api.objects("events")}

        # The job hangs: its processes stay on the chip, AI core 0, no traffic, no CPU time.
        await s.sim("PUT", f"/v1/sim/chips/{CHIP}/idle-job", {"pids": PIDS})
        info = await until(lambda: i if hang_faults(i := s.device_info(), chip) else None, 15, f"{HANG_CODE} in -Fault")
        [fault] = hang_faults(info, chip)
        assert fault["fault_level"] == "NotHandleFault", fault
        # A NotHandleFault code resets nothing and takes nothing away: the chip is still free.
        assert chip in info.healthy and chip not in info.unhealthy, info.raw
        verdict = (await s.verdicts())[chip]
        assert verdict["fault_level"] == "NotHandleFault" and verdict["schedulable"], verdict
        assert s.kubelet_unhealthy() == set()
        # The fault-manager's Kubernetes Event names the chip and the code.
        occurred = await until(
            lambda: [
                e
                for e in s.api.objects("events")
                if e["metadata"]["name"] not in events_before
                and e.get("reason") == "NPUFaultOccurred"
                and HANG_CODE in e.get("message", "")
            ],
            10,
            "the NPUFaultOccurred Event",
        )
        assert chip in occurred[0]["message"] and occurred[0]["type"] == "Warning", occurred

        # An operator's policy makes a hung chip a RestartNPU fault: the chip is taken out everywhere.
        s.api.add_configmap("mindx-dl-fault-config", "kube-system", {"faultCode.json": restart_npu_policy()})
        await s.agree({chip}, timeout=15)
        [fault] = hang_faults(s.device_info(), chip)
        assert fault["fault_level"] == "RestartNPU", fault

        # The job moves again (its processes end): the code is recovered and the chip comes back.
        await s.sim("DELETE", f"/v1/sim/chips/{CHIP}/idle-job", {})
        await s.agree(set(), timeout=15)
        after = s.device_info()
        assert after is not None
        assert hang_faults(after, chip) == [] and chip in after.healthy, after.raw
        assert (await s.verdicts())[chip]["fault_level"] == "NormalNPU"
        # The occur and its recover, each stored once, and the history says where they came from.
        assert s.event_count(f"code = '{HANG_CODE}'") == 2
        async with s.fm.client() as client:
            history = (await client.get("/v1/faults", params={"chip": chip})).json()["faults"]
        hang = sorted((f["assertion"], f["source"]) for f in history if f["code"] == HANG_CODE)
        assert hang == [("occur", "hang"), ("recover", "hang")], history
        assert await s.no_event_lost() >= 2
