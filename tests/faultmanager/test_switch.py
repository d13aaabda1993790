"""A3 switch faults become SwitchInfoCfg (contract section 6); other nodes have no such key."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.faultmanager.test_service import deviceinfo, sim
from tests.support.exporter import start_exporter
from tests.support.faultmanager import FaultManagerProc, start_fault_manager, wait_ready
from tests.support.waiting import until


async def switch_info(fm: FaultManagerProc) -> dict[str, Any]:
    try:
        data = await deviceinfo(fm)
    except ValueError:
        return {}
    return dict(json.loads(data["SwitchInfoCfg"])) if "SwitchInfoCfg" in data else {}


async def switch_field_is(fm: FaultManagerProc, key: str, want: str) -> None:
    async def reached() -> bool:
        return (await switch_info(fm)).get(key) == want

    await until(reached, what=f"SwitchInfoCfg {key} {want!r}")


async def test_switch_faults_on_an_a3_node(tmp_path: Path) -> None:
    exporter = start_exporter(tmp_path / "exporter", profile="a3-16")
    fm = start_fault_manager(tmp_path / "fm", exporter)
    try:
        await wait_ready(fm)
        await switch_field_is(fm, "NodeStatus", "Healthy")
        assert (await switch_info(fm))["FaultLevel"] == ""
        # NotHandle and SubHealth codes of SwitchFaultCode.json, on two ports.
        await sim(exporter, "/v1/sim/switch-faults", {"alarm_id": 0x00F1FEF5, "fault_id": 155913, "position": "cpu",
                                                      "switch_chip_id": 1, "switch_port_id": 3})  # fmt: skip
        await sim(exporter, "/v1/sim/switch-faults", {"alarm_id": 0x00F103B6, "fault_id": 155908, "switch_port_id": 4})
        await switch_field_is(fm, "FaultLevel", "SubHealthFault")
        info = await switch_info(fm)
        assert info["NodeStatus"] == "SubHealthy"
        codes = [json.loads(c)["AssembledFaultCode"] for c in info["FaultCode"]]
        assert sorted(codes) == ["[0x00f103b6,155908,na,na]", "[0x00f1fef5,155913,cpu,na]"]
        assert set(info["FaultTimeAndLevelMap"]) == {
            "[0x00f1fef5,155913,cpu,na]_1_3",
            "[0x00f103b6,155908,na,na]_0_4",
        }
        await sim(exporter, "/v1/sim/switch-faults", {"alarm_id": 0x00F103B6, "fault_id": 155908, "switch_port_id": 4,
                                                      "assertion": "recover"})  # fmt: skip
        await switch_field_is(fm, "FaultLevel", "NotHandle")
        assert (await switch_info(fm))["NodeStatus"] == "Healthy"
    finally:
        fm.stop()
        exporter.stop()


async def test_no_switch_key_without_a_switch(tmp_path: Path) -> None:
    exporter = start_exporter(tmp_path / "exporter", profile="910b-8")
    fm = start_fault_manager(tmp_path / "fm", exporter)
    try:
        await wait_ready(fm)

        async def written() -> dict[str, str] | None:
            try:
                return await deviceinfo(fm)
            except ValueError:  # not written yet
                return None

        data = await until(written, what="the device-info ConfigMap")
        assert "SwitchInfoCfg" not in data
    finally:
        fm.stop()
        exporter.stop()
