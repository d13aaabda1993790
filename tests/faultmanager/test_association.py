"""The HBM / AI-core association and the reference's fault Events, service level: the simulated
exporter and the fault-manager as real processes, offline (Events as a file)."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from tests.faultmanager.test_service import deviceinfo, sim, verdicts
from tests.support.exporter import start_exporter
from tests.support.faultmanager import start_fault_manager, wait_ready
from tests.support.waiting import until

HBM, AIV = "80E01801", "80CB8009"
CUSTOMIZATION = {"FaultDuration": [{"EventId": [HBM], "FaultTimeout": 0, "RecoverTimeout": 0,
                                    "FaultHandling": "SeparateNPU"}]}  # fmt: skip


def fault_list(data: dict[str, str]) -> dict[str, list[str]]:
    cfg = json.loads(data["DeviceInfoCfg"])
    out: dict[str, list[str]] = {}
    for f in json.loads(cfg["DeviceInfo"]["DeviceList"]["huawei.com/Ascend910-Fault"]):
        out.setdefault(f["npu_name"], []).append(f["fault_code"])
    return out


def events(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


async def test_an_echo_is_dropped_a_lone_aicore_fault_published_5s_late_with_reference_events(tmp_path: Path) -> None:
    policy = tmp_path / "policy"
    policy.mkdir()
    (policy / "faultCustomization.json").write_text(json.dumps(CUSTOMIZATION))
    exporter = start_exporter(tmp_path / "exporter")
    fm = start_fault_manager(
        tmp_path / "fm", exporter, "--policy-dir", str(policy), "--fault-event-format", "reference",
        env={"FAULT_MANAGER_POD_NAME": "fm-pod"},
    )  # fmt: skip
    try:
        await wait_ready(fm)
        async with exporter.client() as client:
            echo = (await client.get("/v1/chips/2")).json()["name"]
            lone = (await client.get("/v1/chips/3")).json()["name"]
        await sim(exporter, "/v1/sim/chips/2/faults", {"code": HBM, "severity": 2})
        await sim(exporter, "/v1/sim/chips/2/faults", {"code": AIV, "severity": 2})
        injected = time.monotonic()
        await sim(exporter, "/v1/sim/chips/3/faults", {"code": AIV, "severity": 2})

        async def hbm_published() -> bool:
            return (await verdicts(fm))[echo]["codes"] == [HBM]

        await until(hbm_published, what=f"{echo}'s 80E01801")
        assert (await verdicts(fm))[lone]["codes"] == [], "the lone AI-core fault is held"

        async def lone_published() -> bool:
            return (await verdicts(fm))[lone]["codes"] == [AIV]

        await until(lone_published, timeout=15, what=f"{lone}'s 80CB8009, 5 s late")
        assert time.monotonic() - injected >= 4.9, "not before it is 5 s old"

        async def listed() -> bool:
            try:
                return fault_list(await deviceinfo(fm)) == {echo: [HBM], lone: [AIV]}
            except (ValueError, KeyError):
                return False

        await until(listed, what="the -Fault list with the 80E01801 and the lone 80CB8009 only")
        assert (await verdicts(fm))[echo]["codes"] == [HBM]

        # One reference-format Event per fault event the chips reported (the dropped echo's too).
        events_file = tmp_path / "fm" / "state" / "kube" / "events.jsonl"

        async def three() -> bool:
            return len([e for e in events(events_file) if e["reason"] == "Occur"]) == 3

        await until(three, what="three reference-format Events")
        written = [e for e in events(events_file) if e["reason"] == "Occur"]
        assert all(e["metadata"]["name"].startswith("fm-pod.") for e in written)
        assert all(
            e["involvedObject"] == {"kind": "pod", "namespace": "kube-system", "name": "fm-pod"} for e in written
        )
        # The action is the code's own level in the tables (GetFaultTypeByCode), not the chip's.
        assert sorted((e["message"].split("faultCodes:")[1].split(",")[0], e["action"]) for e in written) == [
            (AIV, "RestartRequest"),
            (AIV, "RestartRequest"),
            (HBM, "RestartBusiness"),
        ]
        assert not [e for e in events(events_file) if e["reason"] == "NPUFaultOccurred"], "not ours"
    finally:
        fm.stop()
        exporter.stop()
