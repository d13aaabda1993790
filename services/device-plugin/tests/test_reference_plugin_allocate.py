"""Ports of the reference's Go tests of Allocate's response (pkg/server/plugin_test.go,
pkg/common/common_test.go), then the visible-device order and the rank configuration's
super_device_id.

The reference tests PluginServer.Allocate and common.SetAscendRuntimeEnv; ours are the pure
rules of allocation.response (validate_request, container_response) and, for the one rule that lives
in the request check of the allocator (how many containers a request may have), the in-process
Allocator. Test names are the Go test's, then the convey case.
"""

from __future__ import annotations

import json
from collections.abc import Mapping

import grpc
import pytest
from ascend_common.adapters.kubelet import deviceplugin_pb2 as pb
from ascend_common.chips import ChipFamily, ResourceType
from ascend_common.faults import default_fault_code_table
from ascend_common.schemas.exporter import Chip
from ascend_device_plugin.allocation.annotations import (
    SDID_NOT_LISTED,
    SDID_UNREAD,
    config_devices,
    device_configuration,
)
from ascend_device_plugin.allocation.refusals import AllocationError
from ascend_device_plugin.allocation.report import HostFacts
from ascend_device_plugin.allocation.response import AllocDevice, DeviceNode, container_response, validate_request
from ascend_device_plugin.allocator import MAX_CONTAINERS, MAX_DEVICES_PER_CONTAINER, Allocator
from ascend_device_plugin.inventory.views import ViewBoard
from ascend_device_plugin.kubelet.server import status_of
from ascend_device_plugin.metrics import PluginMetrics
from ascend_device_plugin.model.chip_pod import ChipInfo, PodView
from ascend_device_plugin.resources.manager import ResourceManager

from tests.support.allocator import wired_allocator
from tests.support.chips import exporter_chip, node_910b
from tests.support.pod_source import FakePods

# The Go test's plugin server: eight Ascend910 chips, Ascend910-0 .. Ascend910-7.
KNOWN = {f"Ascend910-{p}" for p in range(8)}
CONFIG_910 = "ascend.kubectl.kubernetes.io/ascend-910-configuration"


def allocator(chips: Mapping[int, Chip], share_count: int = 1, **kw: object) -> tuple[Allocator, FakePods]:
    board = ViewBoard()
    manager = ResourceManager(board, default_fault_code_table(), PluginMetrics(), share_count=share_count)
    manager.set_chips(chips)
    pods = FakePods()
    node = HostFacts(host_ip="10.0.0.5")
    return wired_allocator(manager, board, pods, lambda: node, **kw), pods  # type: ignore[arg-type]


def request(*containers: list[str]) -> pb.AllocateRequest:
    return pb.AllocateRequest(container_requests=[pb.ContainerAllocateRequest(devices_ids=c) for c in containers])


# --- TestAllocateRequestPhysicalDevice: 5 convey cases ---------------------------------------------
# common.ParamOption as the Go test leaves it: UseVolcanoType false, UseAscendDocker false (its zero
# value), so the chips are mounted as device nodes and no env var is set.


async def test_AllocateRequestPhysicalDevice_input_nil() -> None:
    # gRPC never delivers a nil request; a request without containers is the nearest invalid input.
    alloc, _ = allocator(node_910b())
    with pytest.raises(AllocationError) as err:
        await alloc.allocate("Ascend910", request())
    assert status_of(err.value) is grpc.StatusCode.INVALID_ARGUMENT


async def test_AllocateRequestPhysicalDevice_container_num_exceeds_the_upper_limit() -> None:
    alloc, _ = allocator(node_910b())
    containers = [["Ascend910-0"] for _ in range(MAX_CONTAINERS + 1)]
    with pytest.raises(AllocationError, match=f"more than {MAX_CONTAINERS} containers") as err:
        await alloc.allocate("Ascend910", request(*containers))
    assert status_of(err.value) is grpc.StatusCode.INVALID_ARGUMENT


def test_AllocateRequestPhysicalDevice_devices_num_exceeds_the_upper_limit() -> None:
    # The Go test sends MaxDevicesNum+1 empty names; the count is checked before any name.
    with pytest.raises(ValueError, match=f"more than {MAX_DEVICES_PER_CONTAINER}"):
        validate_request([""] * (MAX_DEVICES_PER_CONTAINER + 1), KNOWN, MAX_DEVICES_PER_CONTAINER)


def test_AllocateRequestPhysicalDevice_request_physical_device_not_exist() -> None:
    with pytest.raises(ValueError, match="unknown device 'Ascend910-8'"):
        validate_request(["Ascend910-8"], KNOWN, MAX_DEVICES_PER_CONTAINER)


def test_AllocateRequestPhysicalDevice_request_physical_device_exist() -> None:
    validate_request(["Ascend910-1"], KNOWN, MAX_DEVICES_PER_CONTAINER)
    alloc = container_response(
        [AllocDevice("Ascend910-1", 1)],
        family=ChipFamily.ASCEND910,
        runtime_mode=False,
        dynamic=False,
        host_dev_nodes=frozenset(),
    )
    assert alloc.envs.get("ASCEND_VISIBLE_DEVICES", "") == ""
    assert alloc.envs.get("ASCEND_RUNTIME_OPTIONS", "") == ""
    assert alloc.devices == [DeviceNode("/dev/davinci1", "/dev/davinci1", "rw")]


# --- TestSetAscendRuntimeEnv: 1 convey case --------------------------------------------------------
# Its first call, SetAscendRuntimeEnv(devices, "", nil), only checks that a nil response is logged and
# left alone; container_response builds its own response, so there is nothing to port.


def test_SetAscendRuntimeEnv_test_SetAscendRuntimeEnv() -> None:
    alloc = container_response(
        [AllocDevice("Ascend310B-100", 100)],
        family=ChipFamily.ASCEND310B,  # ParamOption.RealCardType = api.Ascend310B
        runtime_mode=True,
        dynamic=False,
        host_dev_nodes=frozenset(),
    )
    assert alloc.envs["ASCEND_ALLOW_LINK"] == "True"
    assert alloc.envs["ASCEND_VISIBLE_DEVICES"] == "100"


# --- ASCEND_VISIBLE_DEVICES order (GetDeviceListID): through the allocator ------------------------


def volcano_pod(devices: str) -> PodView:
    count = len(devices.split(","))
    return PodView(
        namespace="ml", name="train", uid="uid-train", phase="Pending",
        annotations={"huawei.com/Ascend910": devices, "predicate-time": "1000"},
        requests={"huawei.com/Ascend910": count}, created=1.0,
    )  # fmt: skip


async def test_volcano_visible_devices_in_annotation_order() -> None:
    alloc, pods = allocator(node_910b(), volcano=True)
    pods.items = [volcano_pod("Ascend910-5,Ascend910-2")]
    resp = await alloc.allocate("Ascend910", request(["Ascend910-0", "Ascend910-1"]))
    assert resp.container_responses[0].envs["ASCEND_VISIBLE_DEVICES"] == "5,2"
    await alloc.stop()


async def test_plain_path_visible_devices_in_the_kubelets_order() -> None:
    alloc, _ = allocator(node_910b())
    resp = await alloc.allocate("Ascend910", request(["Ascend910-7", "Ascend910-0", "Ascend910-3"]))
    assert resp.container_responses[0].envs["ASCEND_VISIBLE_DEVICES"] == "7,0,3"


async def test_310p_share_mode_repeats_the_chip() -> None:
    chips = {i: exporter_chip(i, i, name="310P3", board=0x64, aicore=8, product="Atlas 300I Pro") for i in range(4)}
    alloc, _ = allocator(chips, share_count=2)
    resp = await alloc.allocate("Ascend310P", request(["Ascend310P-0-1", "Ascend310P-0-0"]))
    assert resp.container_responses[0].envs["ASCEND_VISIBLE_DEVICES"] == "0,0"


# --- super_device_id in the rank configuration (GetPodConfiguration) ------------------------------


def a3_16(sdids: Mapping[int, int | None]) -> dict[int, ChipInfo]:
    """The sim's a3-16 layout by phy id (logic ids shifted by 8, two chips a card), with these SDIDs."""
    return {phy: a3_chip(phy, sdids.get(phy)) for phy in range(16)}


def a3_chip(phy: int, sdid: int | None) -> ChipInfo:
    logic = (phy - 8) % 16
    return ChipInfo(
        logic_id=logic, phy_id=phy, card_id=logic // 2, name=f"Ascend910-{phy}", rtype=ResourceType.ASCEND910,
        family=ChipFamily.ASCEND910A3, aicore=24, healthy=True, device_ip=f"192.168.100.{phy + 1}",
        super_device_id=sdid,
    )  # fmt: skip


def rank_devices(real: list[str], chips: Mapping[int, ChipInfo]) -> list[dict[str, str]]:
    devices, vnpu = config_devices(real, chips)
    value = device_configuration("p", "u", "10.0.0.5", devices, vnpu=vnpu, server_ip="10.0.0.5")
    out: list[dict[str, str]] = json.loads(value)["devices"]
    return out


def test_super_device_id_on_a3_is_the_chips_sdid() -> None:
    sdids = {phy: 0x40000 + 17 * phy for phy in range(16)}
    chips = a3_16(sdids)
    real = [f"Ascend910-{p}" for p in (11, 3, 8, 0)]
    devices = rank_devices(real, chips)
    assert [d["device_id"] for d in devices] == ["0", "3", "8", "11"]  # the reference sorts by phy id
    assert {d["device_id"]: d["super_device_id"] for d in devices} == {str(p): str(sdids[p]) for p in (0, 3, 8, 11)}


def test_super_device_id_golden_key_order_and_types() -> None:
    devices, vnpu = config_devices(["Ascend910-9"], a3_16({9: 655369}))
    value = device_configuration("p", "u", "h", devices, vnpu=vnpu, super_pod_id=2)
    assert value == (
        '{"pod_name":"p","server_id":"u","host_ip":"h","super_pod_id":2,'
        '"devices":[{"device_id":"9","device_ip":"192.168.100.10","super_device_id":"655369"}],'
        '"rack_id":-1,"server_index":"","server_ip":""}'
    )


def test_super_device_id_is_0_when_the_super_pod_information_was_not_read() -> None:
    devices = rank_devices(["Ascend910-4", "Ascend910-1"], a3_16({}))
    assert [d["super_device_id"] for d in devices] == [str(SDID_UNREAD)] * 2 == ["0", "0"]


def test_super_device_id_is_minus_2_for_a_phy_id_not_in_the_device_list() -> None:
    chips = a3_16({0: 5})
    del chips[7]
    devices = rank_devices(["Ascend910-0", "Ascend910-7"], chips)
    assert devices == [
        {"device_id": "0", "device_ip": "192.168.100.1", "super_device_id": "5"},
        {"device_id": "7", "device_ip": "-1", "super_device_id": str(SDID_NOT_LISTED)},
    ]
    assert SDID_NOT_LISTED == -2


def test_super_device_id_absent_for_a_vnpu() -> None:
    devices = rank_devices(["Ascend910-4c-100-3"], a3_16({3: 99}))
    assert devices == [{"device_id": "3", "device_ip": "127.0.0.1"}]


async def test_super_device_id_on_910b_8_through_the_allocator_is_0() -> None:
    # node_910b is the sim's 910b-8 layout: no super pod, so the reference writes "0" for every chip.
    alloc, pods = allocator(node_910b(), volcano=True)
    pods.items = [volcano_pod("Ascend910-6,Ascend910-1")]
    await alloc.allocate("Ascend910", request(["Ascend910-0", "Ascend910-1"]))
    await alloc.stop()
    config = json.loads(next(p[CONFIG_910] for _, _, p in pods.patches if CONFIG_910 in p))
    assert config["devices"] == [
        {"device_id": "1", "device_ip": "192.168.100.2", "super_device_id": "0"},
        {"device_id": "6", "device_ip": "192.168.100.7", "super_device_id": "0"},
    ]
