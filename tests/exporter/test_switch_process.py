"""An Atlas A3 node's switch fault, end to end as processes: the exporter on the dcmi backend over
the C doubles of libdcmi.so and liblingqu-dcmi.so, the fault-manager rendering the device-info
ConfigMap (offline sink: the ConfigMap as a file)."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from tests.cdouble.fixtures import (  # noqa: F401 - pytest fixtures
    SwitchFault,
    cdouble_build_dir,
    dcmi_double_path,
    lingqu_double_path,
)
from tests.support.exporter import running_exporter
from tests.support.faultmanager import start_fault_manager, wait_ready
from tests.support.waiting import START_S, WAIT_S, until

CHIPS = "chip 0 0 0 2\nchip 0 1 1 3\nchip 1 0 2 0\nchip 1 1 3 1\nint board_id * 0xB0\n"  # an Atlas A3 node
LINK_DOWN = SwitchFault(0x08520003, peer_port_device=1, peer_port_id=4, switch_chip_id=1, switch_port_id=12,
                        severity=3, alarm_ms=1_700_000_000_000)  # fmt: skip


def configmap(fm_dir: Path) -> dict[str, str] | None:
    path = fm_dir / "state" / "kube" / "configmaps" / "kube-system" / "mindx-dl-deviceinfo-node-a.json"
    try:
        return dict(json.loads(path.read_text())["data"])
    except (FileNotFoundError, json.JSONDecodeError):
        return None


def switch_info(fm_dir: Path) -> dict[str, Any]:
    data = configmap(fm_dir)
    return dict(json.loads(data["SwitchInfoCfg"])) if data and "SwitchInfoCfg" in data else {}


async def test_the_switch_librarys_fault_reaches_switch_info_cfg_and_a_hung_call_spares_the_chips(
    dcmi_double_path: Path,  # noqa: F811
    lingqu_double_path: Path,  # noqa: F811
    tmp_path: Path,
) -> None:
    dcmi_conf, lq_conf = tmp_path / "dcmi.conf", tmp_path / "lingqu.conf"
    dcmi_conf.write_text(CHIPS)
    lq_conf.write_text(LINK_DOWN.config_line())
    env = {"DCMI_DOUBLE_CONFIG": str(dcmi_conf), "LQ_DOUBLE_CONFIG": str(lq_conf)}
    args = ("--library", str(dcmi_double_path), "--switch-library", str(lingqu_double_path),
            "--switch-fault-interval", "0.3")  # fmt: skip
    with running_exporter(tmp_path / "exporter", *args, backend="dcmi", env=env) as ep:
        fm_dir = tmp_path / "fm"
        fm = start_fault_manager(fm_dir, ep)
        try:
            await wait_ready(fm)
            info = await until(lambda: switch_info(fm_dir).get("FaultCode") and switch_info(fm_dir), START_S,
                               "SwitchInfoCfg to list the switch library's fault")  # fmt: skip
            # The reference's SwitchFaultEvent fields, as its device-plugin writes them.
            assert [json.loads(code) for code in info["FaultCode"]] == [
                {
                    "EventType": 0x08520003, "AssembledFaultCode": "[0x08520003,na,npu,na]", "PeerPortDevice": 1,
                    "PeerPortId": 4, "SwitchChipId": 1, "SwitchPortId": 12, "Severity": 3, "Assertion": 1,
                    "AlarmRaisedTime": 1_700_000_000_000,
                }
            ]  # fmt: skip
            # A link down towards an NPU is a Separate fault in the packaged SwitchFaultCode.json.
            assert (info["FaultLevel"], info["NodeStatus"]) == ("Separate", "UnHealthy")
            # The fault time is the library's alarm time, as the reference writes it.
            assert info["FaultTimeAndLevelMap"] == {
                "[0x08520003,na,npu,na]_1_12": {"fault_time": 1_700_000_000_000, "fault_level": "Separate"}
            }
            data = configmap(fm_dir)
            assert data is not None
            device_info = json.loads(data["DeviceInfoCfg"])["DeviceInfo"]["DeviceList"]
            healthy = device_info["huawei.com/Ascend910"].split(",")
            assert len(healthy) == 4, "a switch fault makes no chip unhealthy"

            async with ep.client() as client:
                # Every switch call now blocks (the double re-reads its file at the next query); the
                # fault stays listed, and the chips are read on: a chip fault still arrives.
                lq_conf.write_text(LINK_DOWN.config_line() + "hang lq_dcmi_get_fault_info forever\n")

                async def hung() -> bool:
                    logs = ep.logs()
                    return any(r.get("key") == "switch" for r in logs if r.get("event") == "library call abandoned")

                await until(hung, WAIT_S, "the switch query to be abandoned")
                hung_at = time.time()
                dcmi_conf.write_text(CHIPS + "codes 2 80E01801\n")

                async def chips_read_on() -> list[dict[str, Any]] | None:
                    chips: list[dict[str, Any]] = (await client.get("/v1/chips")).json()["chips"]
                    fresh = min(c["updated_at"] for c in chips) > hung_at + 0.5
                    return chips if fresh and chips[2]["dynamic"]["error_codes"]["value"] == ["80E01801"] else None

                chips = await until(chips_read_on, WAIT_S, "every chip read on while the switch call hangs")
                assert [(c["state"], c["healthy"]) for c in chips] == [("ok", True)] * 4
                node = (await client.get("/v1/node")).json()
                assert [f["assembled_fault_code"] for f in node["switch_faults"]] == ["[0x08520003,na,npu,na]"]

            async def chip_fault_published() -> dict[str, Any] | None:
                data = configmap(fm_dir)
                if data is None:
                    return None
                faults = json.loads(json.loads(data["DeviceInfoCfg"])["DeviceInfo"]["DeviceList"].get(
                    "huawei.com/Ascend910-Fault", "[]"))  # fmt: skip
                return data if any("80E01801" in f["fault_code"] for f in faults) else None

            published = await until(chip_fault_published, WAIT_S, "the chip's fault in the ConfigMap")
            assert json.loads(published["SwitchInfoCfg"])["FaultCode"] == info["FaultCode"]
        finally:
            assert fm.stop() == 0
        assert ep.stop(timeout=WAIT_S) == 0, "SIGTERM ends the exporter even with a switch call that never returns"
