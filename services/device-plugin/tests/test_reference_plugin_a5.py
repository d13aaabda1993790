"""Allocate on the 950 (A5): ports of the reference's Go tests, then the same rules through the allocator.

Ported from pkg/server/plugin_test.go (TestConvertToLogicIDs, TestGetFinalVisibleDevices,
TestAllocateUBDevice, TestAddDevicesInDir) and pkg/server/plugin_v2_test.go
(TestSetHcclTopoFilePathEnv_RealCardTypeNotA5, TestSetHcclTopoFilePathEnv_AllDevsEmpty,
TestSetServerHcclTopoFilePathEnv, TestSetCardHcclTopoFilePathEnv). One test per Go test, one
parameter row per table entry or convey case; the Go tests set `RealCardType` (our chip family) and
mock the device manager, here those facts are arguments of the pure rules of allocation.response.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path

import pytest
from ascend_common.adapters.kubelet import deviceplugin_pb2 as pb
from ascend_common.chips import ChipFamily
from ascend_common.faults import default_fault_code_table
from ascend_common.products import HCCL_TOPO_FILES, ProductType
from ascend_common.schemas.exporter import Chip
from ascend_common.schemas.reading import Reading
from ascend_device_plugin.allocation.annotations import TAKEN
from ascend_device_plugin.allocation.refusals import AllocationError
from ascend_device_plugin.allocation.report import HostFacts
from ascend_device_plugin.allocation.response import (
    AllocDevice,
    DeviceNode,
    container_response,
    convert_to_logic_ids,
    final_visible_devices,
    hccl_topo_path,
)
from ascend_device_plugin.allocator import Allocator
from ascend_device_plugin.inventory.views import ViewBoard
from ascend_device_plugin.metrics import PluginMetrics
from ascend_device_plugin.model.chip_pod import PodView
from ascend_device_plugin.resources.manager import ResourceManager

from tests.support.allocator import wired_allocator
from tests.support.chips import A5_SERVER_BOARD, A5_SERVER_MAIN_BOARD, node_910b, node_950
from tests.support.pod_source import FakePods

TOPO = "HCCL_TOPO_FILE_PATH"
NPU_CONFIG = "ascend.kubectl.kubernetes.io/ascend-npu-configuration"
ATLAS_350_BOARD, ATLAS_350_MAIN_BOARD, ATLAS_350_4P_MAIN_BOARD = 0x1B, 0x68, 0x6C


# --- TestConvertToLogicIDs: 3 table entries ------------------------------------------------------


@pytest.mark.parametrize(
    ("devices", "expected"),
    [
        pytest.param([0, 1], [10, 11], id="all found"),
        pytest.param([0, 2], [10], id="partially found"),
        pytest.param([3, 4], [], id="none found"),
    ],
)
def test_ConvertToLogicIDs(devices: list[int], expected: list[int]) -> None:
    assert convert_to_logic_ids(devices, {0: 10, 1: 11}) == expected


# --- TestGetFinalVisibleDevices: 3 table entries -------------------------------------------------


@pytest.mark.parametrize(
    ("family", "volcano", "expected"),
    [
        pytest.param(ChipFamily.ASCEND950, False, [100], id="Ascend910A5 converts to logicIDs when not Volcano"),
        pytest.param(ChipFamily.ASCEND950, True, [0], id="Ascend910A5 returns original when Volcano"),
        pytest.param(ChipFamily.ASCEND310, False, [0], id="Other card type returns original"),
    ],
)
def test_GetFinalVisibleDevices(family: ChipFamily, volcano: bool, expected: list[int]) -> None:
    assert final_visible_devices([0], family, {0: 100}, volcano=volcano) == expected


# --- TestSetHcclTopoFilePathEnv_*: 7 convey cases -----------------------------------------------


def test_SetHcclTopoFilePathEnv_RealCardTypeNotA5() -> None:
    assert hccl_topo_path(ChipFamily.ASCEND910, A5_SERVER_BOARD, A5_SERVER_MAIN_BOARD, ProductType.POD_1D) is None


def test_SetHcclTopoFilePathEnv_AllDevsEmpty() -> None:
    """Go: no device to ask. Here: no chip answered the super-pod call (SuperPod's -1)."""
    assert hccl_topo_path(ChipFamily.ASCEND950, None, None, -1) is None


@pytest.mark.parametrize(
    ("super_pod_type", "expected"),
    [
        # case 3: GetSuperPodInfo fails -> the node's super-pod type is unread (-1)
        pytest.param(-1, None, id="case 3 GetSuperPodInfo error"),
        pytest.param(10, None, id="case 4 superPodType illegal"),
        pytest.param(ProductType.POD_1D, HCCL_TOPO_FILES[ProductType.POD_1D], id="case 5 set env ok"),
    ],
)
def test_SetServerHcclTopoFilePathEnv(super_pod_type: int, expected: str | None) -> None:
    """Go sets CardType "server": no Atlas 350 card, so the chips' super-pod type decides."""
    path = hccl_topo_path(ChipFamily.ASCEND950, A5_SERVER_BOARD, A5_SERVER_MAIN_BOARD, super_pod_type)
    assert path == expected


@pytest.mark.parametrize(
    ("main_board", "expected"),
    [
        pytest.param(ATLAS_350_MAIN_BOARD, "/usr/local/Ascend/driver/topo/950/atlas_350_1.json",
                     id="case 6 standard card 300I-Atlas350"),
        pytest.param(ATLAS_350_4P_MAIN_BOARD, "/usr/local/Ascend/driver/topo/950/atlas_350_3.json",
                     id="case 7 standard card 300I-Atlas350-4p"),
    ],
)  # fmt: skip
def test_SetCardHcclTopoFilePathEnv(main_board: int, expected: str) -> None:
    # The card's type wins over whatever super-pod type its chips report (here none was read).
    assert hccl_topo_path(ChipFamily.ASCEND950, ATLAS_350_BOARD, main_board, -1) == expected


# --- TestAllocateUBDevice: 2 convey cases; TestAddDevicesInDir: 2 convey cases ------------------
# Go: Ascend910, UseVolcanoType false, UseAscendDocker false, no default devices, os.Stat / os.ReadDir
# mocked to three udma devices in each directory.

UB_DEVICES = [f"/dev/{d}/udma{i}" for d in ("uburma", "ummu") for i in (1, 2, 3)]


@pytest.mark.parametrize(
    ("ub_devices", "mounted"),
    [pytest.param([], 2, id="ub devices not exist"), pytest.param(UB_DEVICES, 8, id="ub devices exist")],
)
def test_AllocateUBDevice(ub_devices: list[str], mounted: int) -> None:
    alloc = container_response(
        [AllocDevice("Ascend910-0", 0), AllocDevice("Ascend910-2", 2)],
        family=ChipFamily.ASCEND910, runtime_mode=False, dynamic=False, host_dev_nodes=frozenset(),
        ub_devices=ub_devices,
    )  # fmt: skip
    assert len(alloc.devices) == mounted
    assert alloc.devices[2:] == [DeviceNode(path, path, "rw") for path in ub_devices]


def test_AddDevicesInDir_should_add_ub_devices_when_read_ub_directory_normally(tmp_path: Path) -> None:
    (tmp_path / "dev" / "uburma").mkdir(parents=True)
    (tmp_path / "dev" / "uburma" / "udma1").touch()
    alloc, _, _ = setup(node_910b(), runtime_mode=False, dev_root=tmp_path)
    assert alloc.containers.ub_devices() == ["/dev/uburma/udma1"]


def test_AddDevicesInDir_should_return_error_when_readDir_error(tmp_path: Path) -> None:
    (tmp_path / "dev").mkdir()
    (tmp_path / "dev" / "uburma").write_text("not a directory")  # os.ReadDir fails on it
    alloc, _, _ = setup(node_910b(), runtime_mode=False, dev_root=tmp_path)
    assert alloc.containers.ub_devices() == []


# --- the same rules through the allocator ------------------------------------------------------


def setup(chips: Mapping[int, Chip], **kw: object) -> tuple[Allocator, ResourceManager, FakePods]:
    board = ViewBoard()
    manager = ResourceManager(board, default_fault_code_table(), PluginMetrics())
    manager.set_chips(chips)
    pods = FakePods()
    node = HostFacts(host_ip="10.0.0.5", super_pod_id=5, server_index="1")
    allocator = wired_allocator(manager, board, pods, lambda: node, **kw)  # type: ignore[arg-type]
    return allocator, manager, pods


def request(*containers: list[str]) -> pb.AllocateRequest:
    return pb.AllocateRequest(container_requests=[pb.ContainerAllocateRequest(devices_ids=c) for c in containers])


async def test_a5_plain_path_tells_the_runtime_logic_ids() -> None:
    """Outside Volcano, npu-4 and npu-5 with phy -> logic {4: 0, 5: 1} are ASCEND_VISIBLE_DEVICES=0,1."""
    allocator, manager, _ = setup(node_950(shift=4))
    assert {phy: manager.inventory.chips[phy].logic_id for phy in (4, 5)} == {4: 0, 5: 1}
    resp = await allocator.allocate("npu", request(["npu-4", "npu-5"], ["npu-1"]))
    assert [c.envs["ASCEND_VISIBLE_DEVICES"] for c in resp.container_responses] == ["0,1", "5"]


async def test_a5_volcano_path_passes_the_annotated_ids_through() -> None:
    """Volcano's 950 plugin annotates logic ids (`npu-<logic>`, from baseDeviceInfos' DeviceID): the
    runtime gets them as they are, and the rank table names the same chips by phy id
    (`getDeviceListIP` / `convertLogicToPhyIDWithLog`). Here logic 4, 5 are phy 0, 1."""
    allocator, manager, pods = setup(node_950(shift=4), volcano=True)
    assert {manager.inventory.chips[phy].logic_id for phy in (0, 1)} == {4, 5}
    pods.items = [
        PodView(
            namespace="ml", name="job-0", uid="uid-0", phase="Pending",
            annotations={"huawei.com/npu": "npu-4,npu-5", "predicate-time": "1000"},
            requests={"huawei.com/npu": 2}, created=1.0,
        )
    ]  # fmt: skip
    resp = await allocator.allocate("npu", request(["npu-0", "npu-1"]))
    [container] = resp.container_responses
    assert container.envs["ASCEND_VISIBLE_DEVICES"] == "4,5"
    assert pods.patches[0] == ("ml", "job-0", {"predicate-time": TAKEN})
    await allocator.stop()
    report = pods.patches[-1][2]
    # The chips' own names, which Volcano's node lists and the fault-manager match (the reference
    # writes the annotated `npu-4,npu-5` here: compatibility.md).
    assert report["huawei.com/AscendReal"] == "npu-0,npu-1"
    assert "ascend.kubectl.kubernetes.io/ascend-910-configuration" not in report
    # The 950's rank configuration: no device IP (""), each chip's SDID, the node's rack.
    assert report[NPU_CONFIG] == (
        '{"pod_name":"job-0","server_id":"uid-0","host_ip":"10.0.0.5","super_pod_id":5,'
        '"devices":[{"device_id":"0","device_ip":"","super_device_id":"4194304"},'
        '{"device_id":"1","device_ip":"","super_device_id":"4194305"}],'
        '"rack_id":3,"server_index":"1","server_ip":"10.0.0.5"}'
    )
    # The two sides agree: the rank table's chips are the ones the runtime was told.
    visible = [int(n) for n in container.envs["ASCEND_VISIBLE_DEVICES"].split(",")]
    phy_of_logic = {c.logic_id: c.phy_id for c in manager.inventory.chips.values()}
    assert [d["device_id"] for d in json.loads(report[NPU_CONFIG])["devices"]] == [
        str(phy_of_logic[v]) for v in visible
    ]


async def test_a5_volcano_path_refuses_a_logic_id_the_node_does_not_have() -> None:
    allocator, _, pods = setup(node_950(shift=4), volcano=True)
    pods.items = [
        PodView(
            namespace="ml", name="job-0", uid="uid-0", phase="Pending",
            annotations={"huawei.com/npu": "npu-4,npu-9", "predicate-time": "1000"},
            requests={"huawei.com/npu": 2}, created=1.0,
        )
    ]  # fmt: skip
    with pytest.raises(AllocationError, match=r"logic id 9 \(npu-9\), which this node does not have") as caught:
        await allocator.allocate("npu", request(["npu-0", "npu-1"]))
    assert caught.value.pod == "ml/job-0"
    assert pods.patches == []  # nothing marked taken
    await allocator.stop()


def server_node(super_pod_type: int) -> dict[int, Chip]:
    return node_950(super_pod_type=super_pod_type)


def card_node(main_board: int) -> dict[int, Chip]:
    return node_950(4, board=ATLAS_350_BOARD, main_board=main_board, super_pod_type=ProductType.SERVER)


@pytest.mark.parametrize(
    ("chips", "expected"),
    [
        *(
            pytest.param(server_node(t), HCCL_TOPO_FILES[t], id=f"product type {t.value} {t.name}")
            for t in (ProductType.SERVER, ProductType.POD_1D, ProductType.POD_2D, ProductType.SERVER_16P,
                      ProductType.SERVER_32P)
        ),
        # An Atlas 350 card is a 1P or 4P card whatever super-pod type its chips report.
        pytest.param(card_node(ATLAS_350_MAIN_BOARD), HCCL_TOPO_FILES[ProductType.CARD_1P],
                     id="product type 5 CARD_1P"),
        pytest.param(card_node(ATLAS_350_4P_MAIN_BOARD), HCCL_TOPO_FILES[ProductType.CARD_4P],
                     id="product type 6 CARD_4P"),
        pytest.param(server_node(ProductType.CARD_1P), HCCL_TOPO_FILES[ProductType.CARD_1P], id="reported type 5"),
        pytest.param(server_node(7), None, id="a type without a file"),
        pytest.param(node_950(super_pod_type=None), None, id="super pod unread"),
        pytest.param(node_910b(), None, id="not a 950 node"),
    ],
)  # fmt: skip
async def test_hccl_topo_file_path_of_each_product_type(chips: dict[int, Chip], expected: str | None) -> None:
    resource = "npu" if chips[0].family is ChipFamily.ASCEND950 else "Ascend910"
    for runtime_mode in (True, False):  # set in both modes, as setHcclTopoFilePathEnv is
        allocator, manager, _ = setup(chips, runtime_mode=runtime_mode)
        name = next(iter(manager.inventory.chips.values())).name
        resp = await allocator.allocate(resource, request([name]))
        assert resp.container_responses[0].envs.get(TOPO) == expected


def logic_0_answers(reading: Reading[int], others: int = ProductType.POD_2D) -> dict[int, Chip]:
    """A 950 server whose logic id 0 (phy 4) answered `reading` for its super-pod type and whose other
    chips answered `others`: the node-level super pod (the first chip that answered) may differ."""
    chips = node_950(shift=4, super_pod_type=others)
    first = chips[0]
    # One call answers all six fields: a failed read fails them all.
    fields = ("super_pod_id", "server_index", "super_device_id", "rack_id", "super_pod_type", "scale_type")
    update = {"super_pod_type": reading} if reading.is_ok else dict.fromkeys(fields, reading)
    chips[0] = first.model_copy(update={"static": first.static.model_copy(update=update)})
    return chips


@pytest.mark.parametrize(
    ("reading", "expected"),
    [
        # TestSetServerHcclTopoFilePathEnv, asked of AllDevs[0] (logic 0) at each Allocate:
        pytest.param(
            Reading[int].error(-8005), None, id="case 3 GetSuperPodInfo error: nothing, whatever the others say"
        ),
        pytest.param(Reading[int].ok(10), None, id="case 4 superPodType illegal"),
        pytest.param(Reading[int].ok(ProductType.POD_1D), HCCL_TOPO_FILES[ProductType.POD_1D], id="case 5 set env ok"),
    ],
)
async def test_SetServerHcclTopoFilePathEnv_asks_logic_0(reading: Reading[int], expected: str | None) -> None:
    allocator, manager, _ = setup(logic_0_answers(reading))
    assert manager.inventory.chips[4].logic_id == 0
    if not reading.is_ok:  # the node's super pod is another chip's answer, which must not stand in
        assert manager.inventory.super_pod.super_pod_type == ProductType.POD_2D
    resp = await allocator.allocate("npu", request(["npu-1"]))  # a chip other than logic 0's
    assert resp.container_responses[0].envs.get(TOPO) == expected


async def test_ub_devices_are_mounted_in_direct_mount_mode_only(tmp_path: Path) -> None:
    for directory, names in (("uburma", ["udma2", "udma1"]), ("ummu", ["ummu0"])):
        (tmp_path / "dev" / directory).mkdir(parents=True)
        for name in names:
            (tmp_path / "dev" / directory / name).touch()
    (tmp_path / "dev" / "uburma" / "sub").mkdir()  # a directory in it is skipped
    (tmp_path / "dev" / "davinci_manager").touch()
    direct, _, _ = setup(node_950(shift=4), runtime_mode=False, dev_root=tmp_path)
    [container] = (await direct.allocate("npu", request(["npu-4"]))).container_responses
    assert [(d.container_path, d.host_path, d.permissions) for d in container.devices] == [
        ("/dev/davinci_manager", "/dev/davinci_manager", "rw"),
        ("/dev/davinci0", "/dev/davinci0", "rw"),  # the 950's logic id, as its runtime is told
        ("/dev/uburma/udma1", "/dev/uburma/udma1", "rw"),
        ("/dev/uburma/udma2", "/dev/uburma/udma2", "rw"),
        ("/dev/ummu/ummu0", "/dev/ummu/ummu0", "rw"),
    ]
    assert dict(container.envs) == {TOPO: HCCL_TOPO_FILES[ProductType.POD_2D]}
    runtime, _, _ = setup(node_950(shift=4), runtime_mode=True, dev_root=tmp_path)
    [container] = (await runtime.allocate("npu", request(["npu-4"]))).container_responses
    assert not container.devices
    assert dict(container.envs) == {
        "ASCEND_VISIBLE_DEVICES": "0",
        "ASCEND_RUNTIME_OPTIONS": "",
        TOPO: HCCL_TOPO_FILES[ProductType.POD_2D],
    }
