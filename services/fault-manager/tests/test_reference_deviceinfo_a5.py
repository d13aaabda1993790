"""The device-info ConfigMap of a 950 (A5) node: ports of the reference's Go tests.

From component/ascend-device-plugin: pkg/device/ascendcommon_test.go (TestGetNodeDeviceInfoCache),
pkg/common/common_test.go (TestCheckDeviceName), pkg/common/device_test.go (TestGetSwitchFaultInfo,
its card-type case) and pkg/next/devicefactory/customname/public_name_config_test.go
(TestReplaceDeviceInfoPublicName, its A5 case). The Go tests set common.ParamOption.RealCardType;
ours pass the node's resource type (`npu` on a 950 node, `Ascend910` on the other 910s). One test
per Go test, one parameter row per convey case; rows without a Go counterpart are marked "ours".
"""

from __future__ import annotations

import json

import pytest
from ascend_common.products import ProductType
from fault_manager.deviceinfo.configmap import (
    DEVICE_INFO_KEY,
    MANUALLY_SEPARATE_KEY,
    SWITCH_INFO_KEY,
    UNWATCHED_SWITCH,
    ChipReport,
    device_info_cfg_json,
    parse_manually_separated,
    published_rack_id,
    render_device_info,
    switch_info_json,
)

# ----- ascendcommon_test.go: TestGetNodeDeviceInfoCache ----------------------------------------------


@pytest.mark.parametrize(
    ("rtype", "super_pod_type", "has_rack"),
    [
        pytest.param(
            "Ascend910", ProductType.POD_2D, False, id="case 1: not A5 get node device info cache not have rack id"
        ),
        pytest.param("npu", ProductType.POD_2D, True, id="case 2: A5 Pod type get node device info cache have rack id"),
        pytest.param(
            "npu", ProductType.SERVER, False, id="case 3: A5 Server type get node device info cache not have rack id"
        ),
        pytest.param(
            "npu", ProductType.CARD_1P, False, id="case 4: A5 Card type get node device info cache not have rack id"
        ),
        pytest.param("npu", ProductType.POD_1D, True, id="ours: A5 1D pod has rack id"),
        pytest.param("npu", -1, False, id="ours: A5 super-pod type unread has no rack id"),
    ],
)
def test_get_node_device_info_cache(rtype: str, super_pod_type: int, has_rack: bool) -> None:
    super_pod_id = server_index = rack = 1
    cfg = json.loads(
        device_info_cfg_json(
            {},
            update_time_s=1718000000,
            super_pod_id=super_pod_id,
            server_index=server_index,
            rack_id=published_rack_id(rtype, super_pod_type, rack),
        )
    )
    assert (cfg["SuperPodID"], cfg["ServerIndex"]) == (super_pod_id, server_index)
    if has_rack:
        assert cfg["RackID"] == rack
    else:
        assert "RackID" not in cfg


def test_rack_id_is_written_as_read_even_unset() -> None:
    # ours: the reference writes GetRackID() whatever it holds, its -1 default included.
    assert published_rack_id("npu", ProductType.POD_1D, -1) == -1
    assert published_rack_id("npu", ProductType.POD_2D, 0) == 0


# ----- common_test.go: TestCheckDeviceName ----------------------------------------------------------
# CheckDeviceName decides which ManuallySeparateNPU items count; ours parses the whole value and
# answers the names of the node's chips that the items name. An item that names no chip of the node
# (npu-0 on a 910 node) is ignored later, where the node's chips are known.


@pytest.mark.parametrize(
    ("value", "rtype", "expected"),
    [
        pytest.param("Ascend910-0", "Ascend910", ["Ascend910-0"], id="device name is valid"),
        pytest.param("", "Ascend910", [], id="device name is invalid"),
        pytest.param("npu-0,npu-3", "npu", ["npu-0", "npu-3"], id="npu-x format should be valid for Atlas 950"),
        pytest.param("Ascend910-0", "npu", ["npu-0"], id="Ascend910-x format should still be valid for Atlas 950"),
        pytest.param("npu-0", "Ascend910", ["npu-0"], id="npu-x format should be invalid for old device type"),
        pytest.param(
            "Ascend910-3,npu-3, npu-1", "npu", ["npu-3", "npu-1"], id="ours: both spellings of a chip count once"
        ),
        pytest.param("Ascend310P-2", "npu", ["Ascend310P-2"], id="ours: only Ascend910 is the 950's other spelling"),
    ],
)
def test_check_device_name(value: str, rtype: str, expected: list[str]) -> None:
    assert parse_manually_separated(value, rtype) == expected


def test_check_device_name_malformed_is_refused_on_a_950_node_too() -> None:
    # ours: a malformed item is reported rather than dropped, as on every node.
    with pytest.raises(ValueError, match="npu-x"):
        parse_manually_separated("npu-x", "npu")


# ----- device_test.go: TestGetSwitchFaultInfo, "when card type is not Ascend910A3, return empty result" ---


def test_get_switch_fault_info_is_empty_off_a3() -> None:
    assert json.loads(switch_info_json(UNWATCHED_SWITCH, update_time_s=1718000000)) == {
        "FaultCode": None,
        "FaultLevel": "",
        "UpdateTime": 0,
        "NodeStatus": "",
        "FaultTimeAndLevelMap": None,
    }


# ----- public_name_config_test.go: TestReplaceDeviceInfoPublicName, the A5 case ---------------------


def test_replace_device_info_public_name_without_config_on_a5() -> None:
    # "without config and new device type, replace with npu prefix": the keys are huawei.com/npu and
    # ManuallySeparateNPU names the chip npu-<phy>, whichever spelling the administrator used.
    manual = parse_manually_separated("Ascend910-1", "npu")
    data = render_device_info(
        "npu", [ChipReport("npu-1", healthy=False)], update_time_s=1718000000, manually_separated=manual,
        switch=UNWATCHED_SWITCH,
    )  # fmt: skip
    device_list = json.loads(data[DEVICE_INFO_KEY])["DeviceInfo"]["DeviceList"]
    assert "huawei.com/npu" in device_list
    assert data[MANUALLY_SEPARATE_KEY] == "npu-1"
    assert SWITCH_INFO_KEY in data
