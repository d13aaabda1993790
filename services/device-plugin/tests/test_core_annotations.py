"""Pod annotations (contract section 5).

The golden strings below follow the reference's structs (pkg/common/proto.go Instance, Device);
the Go-compatible encoder itself is tested in libs/common/tests/test_gojson.py.
"""

from __future__ import annotations

import json

import pytest
from ascend_common.chips import ChipFamily, ResourceType
from ascend_device_plugin.allocation.annotations import (
    ConfigDevice,
    config_devices,
    configuration_key,
    device_configuration,
    real_allocation_annotations,
)
from ascend_device_plugin.model.chip_pod import ChipInfo

# --- AscendReal / kltDev ---------------------------------------------------------------------


def test_real_allocation_annotations_sorted_as_go_sorts_strings() -> None:
    annotations = real_allocation_annotations(
        ["Ascend910-2", "Ascend910-10", "Ascend910-1"], ["Ascend910-10", "Ascend910-2", "Ascend910-1"]
    )
    assert annotations == {
        "huawei.com/AscendReal": "Ascend910-1,Ascend910-10,Ascend910-2",
        "huawei.com/kltDev": "Ascend910-1,Ascend910-10,Ascend910-2",
    }


def test_volcano_real_devices_differ_from_kubelet_ids() -> None:
    annotations = real_allocation_annotations(["Ascend910-5", "Ascend910-4"], ["Ascend910-0", "Ascend910-1"])
    assert annotations["huawei.com/AscendReal"] == "Ascend910-4,Ascend910-5"
    assert annotations["huawei.com/kltDev"] == "Ascend910-0,Ascend910-1"


def test_preset_vnpu_writes_only_klt_dev() -> None:
    assert real_allocation_annotations(["Ascend910-2c-100-0"], ["Ascend910-2c-100-0"], preset_vnpu=True) == {
        "huawei.com/kltDev": "Ascend910-2c-100-0"
    }


def test_dynamic_vnpu_real_device_gets_its_vfg_suffix() -> None:
    klt = [f"npu-core-{n}" for n in (3, 1, 2, 0)]
    annotations = real_allocation_annotations(["Ascend910-4c-100-0"], klt, vfg_ids={"Ascend910-4c-100-0": 3})
    assert annotations == {
        "huawei.com/AscendReal": "Ascend910-4c-100-0_3",
        "huawei.com/kltDev": "npu-core-0,npu-core-1,npu-core-2,npu-core-3",
    }


# --- ascend-910-configuration ----------------------------------------------------------------


def test_device_configuration_golden_physical() -> None:
    value = device_configuration(
        "train-0",
        "7b1c-uid",
        "10.0.0.5",
        [ConfigDevice(1, "192.168.100.2"), ConfigDevice(0, "192.168.100.1")],
        vnpu=False,
        server_ip="10.0.0.5",
    )
    assert value == (
        '{"pod_name":"train-0","server_id":"7b1c-uid","host_ip":"10.0.0.5","super_pod_id":-1,'
        '"devices":[{"device_id":"0","device_ip":"192.168.100.1"},{"device_id":"1","device_ip":"192.168.100.2"}],'
        '"rack_id":-1,"server_index":"","server_ip":"10.0.0.5"}'
    )


def test_device_configuration_golden_super_pod() -> None:
    value = device_configuration(
        "job-w-1",
        "u",
        "10.0.0.6",
        [(10, None, 104), (2, "10.2.0.2", 96)],
        vnpu=False,
        super_pod_id=3,
        rack_id=1,
        server_index="7",
        server_ip="10.0.0.6",
    )
    assert value == (
        '{"pod_name":"job-w-1","server_id":"u","host_ip":"10.0.0.6","super_pod_id":3,'
        '"devices":[{"device_id":"2","device_ip":"10.2.0.2","super_device_id":"96"},'
        '{"device_id":"10","device_ip":"-1","super_device_id":"104"}],'
        '"rack_id":1,"server_index":"7","server_ip":"10.0.0.6"}'
    )


def test_device_configuration_golden_vnpu() -> None:
    value = device_configuration("infer", "u", "h", [ConfigDevice(0, "192.168.1.1", 7)], vnpu=True)
    assert value == (
        '{"pod_name":"infer","server_id":"u","host_ip":"h","super_pod_id":-1,'
        '"devices":[{"device_id":"0","device_ip":"127.0.0.1"}],"rack_id":-1,"server_index":"","server_ip":""}'
    )


def chip(phy: int, sdid: int | None) -> ChipInfo:
    return ChipInfo(
        logic_id=phy, phy_id=phy, card_id=phy, name=f"Ascend910-{phy}", rtype=ResourceType.ASCEND910,
        family=ChipFamily.ASCEND910A3, aicore=24, healthy=True, device_ip=f"10.9.0.{phy}", super_device_id=sdid,
    )  # fmt: skip


def test_config_devices_give_every_physical_chip_a_super_device_id() -> None:
    chips = {0: chip(0, 8), 1: chip(1, None)}
    assert config_devices(["Ascend910-1", "Ascend910-0", "Ascend910-5"], chips) == (
        [ConfigDevice(1, "10.9.0.1", 0), ConfigDevice(0, "10.9.0.0", 8), ConfigDevice(5, None, -2)],
        False,
    )


def test_config_devices_of_a_vnpu_have_none() -> None:
    assert config_devices(["Ascend910-4c-100-1"], {1: chip(1, 8)}) == ([ConfigDevice(1, "10.9.0.1", None)], True)


def test_device_configuration_without_devices_is_a_nil_slice() -> None:
    assert '"devices":null' in device_configuration("p", "u", "h", [], vnpu=False)


def test_device_configuration_escapes_like_go() -> None:
    value = device_configuration("a<b>&c", "u", "h", [ConfigDevice(0, "")], vnpu=False)
    assert value.startswith(r'{"pod_name":"a\u003cb\u003e\u0026c",')
    assert '"device_ip":""' in value  # an empty IP (inference cards) is written as given
    assert json.loads(value)["pod_name"] == "a<b>&c"


@pytest.mark.parametrize(
    ("rtype", "duo", "key"),
    [
        (ResourceType.ASCEND910, False, "ascend.kubectl.kubernetes.io/ascend-910-configuration"),
        (ResourceType.ASCEND310P, True, "ascend.kubectl.kubernetes.io/ascend-910-configuration"),
        (ResourceType.ASCEND310P, False, None),
        (ResourceType.ASCEND310, False, None),
        (ResourceType.NPU, False, "ascend.kubectl.kubernetes.io/ascend-npu-configuration"),
    ],
)
def test_configuration_key(rtype: ResourceType, duo: bool, key: str | None) -> None:
    assert configuration_key(rtype, atlas_300i_duo=duo) == key
