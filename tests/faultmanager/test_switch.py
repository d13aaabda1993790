"""A3 switch faults become SwitchInfoCfg (contract section 6); other nodes have no such key."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from tests.faultmanager.test_service import deviceinfo, sim
from tests.support.exporter import start_exporter
from tests.support.faultmanager import start_fault_manager, wait_ready


async def switch_info(fm: object) -> dict[str, object]:
    try:
        data = await deviceinfo(fm)  # type: ignore[arg-type]
    except ValueError:
        return {}
    return dict(json.loads(data["SwitchInfoCfg"])) if "SwitchInfoCfg" in data else {}


async def test_switch_faults_on_an_a3_node(tmp_path: Path) -> None:
    exporter = start_exporter(tmp_path / "exporter", profile="a3-16")
    fm = start_fault_manager(tmp_path / "fm", exporter)
    try:
        await wait_ready(fm)
        async with asyncio.timeout(5):
            while (await switch_info(fm)).get("NodeStatus") != "Healthy":
                await asyncio.sleep(0.05)
        assert (await switch_info(fm))["FaultLevel"] == ""
        # NotHandle and SubHealth codes of SwitchFaultCode.json, on two ports.
        await sim(exporter, "/v1/sim/switch-faults", {"alarm_id": 0x00F1FEF5, "fault_id": 155913, "position": "cpu",
                                                      "switch_chip_id": 1, "switch_port_id": 3})  # fmt: skip
        await sim(exporter, "/v1/sim/switch-faults", {"alarm_id": 0x00F103B6, "fault_id": 155908, "switch_port_id": 4})
        async with asyncio.timeout(5):
            while (await switch_info(fm)).get("FaultLevel") != "SubHealthFault":
                await asyncio.sleep(0.05)
        info = await switch_info(fm)
        assert info["NodeStatus"] == "SubHealthy"
        codes = [json.loads(c)["AssembledFaultCode"] for c in info["FaultCode"]]  # type: ignore[union-attr]
        assert sorted(codes) == ["[0x00f103b6,155908,na,na]", "[0x00f1fef5,155913,cpu,na]"]
        assert set(info["FaultTimeAndLevelMap"]) == {  # type: ignore[arg-type]
            "[0x00f1fef5,155913,cpu,na]_1_3",
            "[0x00f103b6,155908,na,na]_0_4",
        }
        await sim(exporter, "/v1/sim/switch-faults", {"alarm_id": 0x00F103B6, "fault_id": 155908, "switch_port_id": 4,
                                                      "assertion": "recover"})  # fmt: skip
        async with asyncio.timeout(5):
            while (await switch_info(fm)).get("FaultLevel") != "NotHandle":
                await asyncio.sleep(0.05)
        assert (await switch_info(fm))["NodeStatus"] == "Healthy"
    finally:
        fm.stop()
        exporter.stop()


async def test_no_switch_key_without_a_switch(tmp_path: Path) -> None:
    exporter = start_exporter(tmp_path / "exporter", profile="910b-8")
    fm = start_fault_manager(tmp_path / "fm", exporter)
    try:
        await wait_ready(fm)
        async with asyncio.timeout(5):
            while True:
                try:
                    data = await deviceinfo(fm)
                    break
                except ValueError:
                    await asyncio.sleep(0.05)
        assert "SwitchInfoCfg" not in data
    finally:
        fm.stop()
        exporter.stop()
