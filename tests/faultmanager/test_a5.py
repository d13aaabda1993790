"""The device-info ConfigMap of a 950 (A5) node, written by the fault-manager over the simulator's 950 profiles."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from fault_manager.deviceinfo.configmap import check_code

from tests.faultmanager.test_configmap import CM, configmap, writing_over
from tests.faultmanager.test_service import RESTART_NPU, sim, verdicts
from tests.support.fake_apiserver import FakeApiServer
from tests.support.waiting import until

NPU_KEYS = {f"huawei.com/npu{suffix}" for suffix in ("", "-Unhealthy", "-NetworkUnhealthy", "-Recovering", "-Fault")}
# The reference's SwitchInfoCfg on every 950 node: Go's zero SwitchFaultInfo (it watches switches on A3 alone).
UNWATCHED_SWITCH = '{"FaultCode":null,"FaultLevel":"","UpdateTime":0,"NodeStatus":"","FaultTimeAndLevelMap":null}'


def _device_list(api: FakeApiServer) -> dict[str, str]:
    return dict(json.loads(configmap(api)["DeviceInfoCfg"])["DeviceInfo"]["DeviceList"])


@pytest.mark.parametrize(
    ("profile", "pod", "index", "rack"),
    [("a5-superpod-8", 5, 1, 3), ("a5-8", -1, -1, None)],
)
async def test_a_950_node_writes_npu_lists_and_its_rack_in_a_pod(
    tmp_path: Path, profile: str, pod: int, index: int, rack: int | None
) -> None:
    """The 910 manager's lists under huawei.com/npu, chips named npu-<phy>, SuperPodID / ServerIndex as the
    chips report them, RackID on a node of a 2D pod only (a5-superpod-8: pod 5, server 1, rack 3; a5-8 is a
    server outside any pod), and the SwitchInfoCfg the reference writes there."""
    async with writing_over(tmp_path, profile) as (api, exporter, _):
        data = configmap(api)
        written = json.loads(data["DeviceInfoCfg"])
        assert (written["SuperPodID"], written["ServerIndex"], written.get("RackID")) == (pod, index, rack)
        assert list(written) == ["DeviceInfo", "SuperPodID", "ServerIndex", "CheckCode"] + (
            ["RackID"] if rack is not None else []
        )
        assert written["CheckCode"] == check_code(written["DeviceInfo"])
        device_list = written["DeviceInfo"]["DeviceList"]
        assert set(device_list) == NPU_KEYS
        async with exporter.client() as client:
            names = {c["name"] for c in (await client.get("/v1/chips")).json()["chips"]}
        assert names == {f"npu-{phy}" for phy in range(8)}
        assert device_list["huawei.com/npu"] == ",".join(sorted(names))
        assert device_list["huawei.com/npu-Fault"] == "[]"
        assert data["SwitchInfoCfg"] == UNWATCHED_SWITCH


async def test_a_fault_and_an_administrators_isolation_on_a_950_node(tmp_path: Path) -> None:
    """A RestartNPU fault on one chip of the a5-superpod-8 profile lists it in huawei.com/npu-Unhealthy with an
    npu-<phy> -Fault entry, and its recovery lists it free again; an administrator who writes the chip's
    910 spelling Ascend910-<phy> into ManuallySeparateNPU isolates npu-<phy>, which the ConfigMap then names."""
    async with writing_over(tmp_path, "a5-superpod-8") as (api, exporter, fm):
        async with exporter.client() as client:
            name = (await client.get("/v1/chips/2")).json()["name"]
            other = (await client.get("/v1/chips/5")).json()["name"]
        assert (name, other) == ("npu-6", "npu-1"), "phy = logic + 4 mod 8 on this profile"

        await sim(exporter, "/v1/sim/chips/2/faults", {"code": RESTART_NPU, "severity": 2})
        await until(lambda: name in _device_list(api)["huawei.com/npu-Unhealthy"].split(","), what=f"{name} unhealthy")
        device_list = _device_list(api)
        assert name not in device_list["huawei.com/npu"].split(",")
        [fault] = json.loads(device_list["huawei.com/npu-Fault"])
        assert (fault["npu_name"], fault["fault_type"], fault["fault_code"], fault["fault_level"]) == (
            name,
            "CardUnhealthy",
            RESTART_NPU,
            "RestartNPU",
        )
        assert json.loads(configmap(api)["DeviceInfoCfg"])["RackID"] == 3
        assert (await verdicts(fm))[name]["fault_level"] == "RestartNPU"

        await sim(exporter, "/v1/sim/chips/2/faults", {"code": RESTART_NPU, "assertion": "recover"})
        await until(lambda: name in _device_list(api)["huawei.com/npu"].split(","), what=f"{name} free again")
        assert _device_list(api)["huawei.com/npu-Unhealthy"] == ""
        assert _device_list(api)["huawei.com/npu-Fault"] == "[]"

        phy = other.removeprefix("npu-")
        api.modify("configmaps", CM, "kube-system", lambda o: o["data"].update(ManuallySeparateNPU=f"Ascend910-{phy}"))
        await until(lambda: configmap(api)["ManuallySeparateNPU"] == other, what=f"{other} written back as such")
        assert (await verdicts(fm))[other]["manually_separated"] is True
        assert other in _device_list(api)["huawei.com/npu-Unhealthy"].split(",")
