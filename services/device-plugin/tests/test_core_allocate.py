"""The Allocate response and request validation (contract section 3)."""

from __future__ import annotations

import pytest
from ascend_common.chips import ChipFamily
from ascend_device_plugin.allocation.response import (
    AllocDevice,
    ContainerAlloc,
    DeviceNode,
    container_response,
    slow_node_envs,
    validate_request,
)

ALL_NODES = frozenset({"/dev/davinci_manager", "/dev/hisi_hdc", "/dev/devmm_svm", "/dev/dvpp_cmdlist"})
B = ChipFamily.ASCEND910B


def phys(*ids: int) -> list[AllocDevice]:
    return [AllocDevice(f"Ascend910-{p}", p) for p in ids]


def runtime(devices: list[AllocDevice], family: ChipFamily = B, *, dynamic: bool = False) -> ContainerAlloc:
    return container_response(devices, family=family, runtime_mode=True, dynamic=dynamic, host_dev_nodes=ALL_NODES)


def test_runtime_mode_physical_chips_keep_the_given_order() -> None:
    # The runtime numbers the devices 0, 1, ... in this order: a sorted list would give rank 0 chip 0
    # where Volcano's annotation (and the rank configuration) said chip 3.
    alloc = runtime(phys(3, 10, 0, 1))
    assert alloc.envs == {"ASCEND_VISIBLE_DEVICES": "3,10,0,1", "ASCEND_RUNTIME_OPTIONS": ""}
    assert alloc.devices == []


def test_runtime_mode_volcano_annotation_order() -> None:
    # Annotation "Ascend910-5,Ascend910-2" served to kubelet ids Ascend910-0, Ascend910-1.
    devices = [AllocDevice("Ascend910-0", 5), AllocDevice("Ascend910-1", 2)]
    assert runtime(devices).envs["ASCEND_VISIBLE_DEVICES"] == "5,2"


def test_runtime_mode_shared_copies_of_one_chip_repeat_it() -> None:
    devices = [AllocDevice("Ascend310P-0-0", 0), AllocDevice("Ascend310P-0-1", 0), AllocDevice("Ascend310P-1-0", 1)]
    assert runtime(devices, ChipFamily.ASCEND310P).envs["ASCEND_VISIBLE_DEVICES"] == "0,0,1"


def test_direct_mount_shared_copies_mount_the_chip_once() -> None:
    devices = [AllocDevice("Ascend310P-1-0", 1), AllocDevice("Ascend310P-0-0", 0), AllocDevice("Ascend310P-1-1", 1)]
    alloc = container_response(
        devices, family=ChipFamily.ASCEND310P, runtime_mode=False, dynamic=False, host_dev_nodes=frozenset()
    )
    assert [d.host_path for d in alloc.devices] == ["/dev/davinci1", "/dev/davinci0"]


def test_runtime_mode_vnpu_uses_the_vdev_id() -> None:
    alloc = runtime([AllocDevice("Ascend910-2c-100-0", 0, 100)], ChipFamily.ASCEND910)
    assert alloc.envs == {"ASCEND_VISIBLE_DEVICES": "100", "ASCEND_RUNTIME_OPTIONS": "VIRTUAL"}


@pytest.mark.parametrize(
    ("family", "allow_link"),
    [(ChipFamily.ASCEND310B, True), (ChipFamily.ASCEND310, False), (ChipFamily.ASCEND310P, False), (B, False)],
)
def test_allow_link_only_on_310b(family: ChipFamily, allow_link: bool) -> None:
    envs = runtime(phys(0), family).envs
    assert (envs.get("ASCEND_ALLOW_LINK") == "True") is allow_link
    assert ("ASCEND_ALLOW_LINK" in envs) is allow_link


@pytest.mark.parametrize(("n", "ranks"), [(1, "0"), (2, "0,1"), (4, "0,1,2,3")])
def test_dynamic_mode_sets_the_worker_counts(n: int, ranks: str) -> None:
    envs = runtime(phys(*range(n)), dynamic=True).envs
    for name in (
        "WORLD_SIZE",
        "LOCAL_WORLD_SIZE",
        "MS_WORKER_NUM",
        "MS_LOCAL_WORKER",
        "CM_WORKER_SIZE",
        "CM_LOCAL_WORKER",
    ):
        assert envs[name] == str(n)
    assert envs["LOCAL_RANK"] == ranks
    assert "WORLD_SIZE" not in runtime(phys(*range(n))).envs


def test_dynamic_mode_cores_of_one_vnpu_count_once() -> None:
    devices = [AllocDevice(f"npu-core-{n}", 0, 100) for n in range(4)]
    envs = runtime(devices, dynamic=True).envs
    assert envs["ASCEND_VISIBLE_DEVICES"] == "100"
    assert envs["ASCEND_RUNTIME_OPTIONS"] == "VIRTUAL"
    assert envs["WORLD_SIZE"] == "1"
    assert envs["LOCAL_RANK"] == "0"


def test_dynamic_mode_whole_chips_once_each_in_annotation_order() -> None:
    # npu-core annotation "3,1": the allocator maps the cores onto the chips in turn.
    devices = [AllocDevice(f"npu-core-{n}", (3, 1)[n % 2]) for n in range(8)]
    envs = runtime(devices, dynamic=True).envs
    assert envs["ASCEND_VISIBLE_DEVICES"] == "3,1"
    assert envs["WORLD_SIZE"] == "2"
    assert envs["LOCAL_RANK"] == "0,1"


def test_direct_mount_physical_chips() -> None:
    alloc = container_response(phys(1, 0), family=B, runtime_mode=False, dynamic=False, host_dev_nodes=ALL_NODES)
    assert alloc.envs == {}  # the reference sets no env var when it mounts the nodes itself
    assert alloc.devices == [
        DeviceNode("/dev/davinci_manager", "/dev/davinci_manager", "rw"),
        DeviceNode("/dev/hisi_hdc", "/dev/hisi_hdc", "rw"),
        DeviceNode("/dev/devmm_svm", "/dev/devmm_svm", "rw"),
        DeviceNode("/dev/dvpp_cmdlist", "/dev/dvpp_cmdlist", "rw"),
        DeviceNode("/dev/davinci1", "/dev/davinci1", "rw"),
        DeviceNode("/dev/davinci0", "/dev/davinci0", "rw"),
    ]


def test_direct_mount_vnpu_maps_the_host_vdavinci_node() -> None:
    alloc = container_response(
        [AllocDevice("Ascend310P-2c-130-1", 1, 130)],
        family=ChipFamily.ASCEND310P,
        runtime_mode=False,
        dynamic=False,
        host_dev_nodes=frozenset(),
    )
    assert alloc.devices == [DeviceNode("/dev/davinci130", "/dev/vdavinci130", "rw")]


def test_direct_mount_only_the_driver_nodes_that_exist() -> None:
    nodes = frozenset({"/dev/davinci_manager", "/dev/devmm_svm"})
    alloc = container_response(phys(0), family=B, runtime_mode=False, dynamic=False, host_dev_nodes=nodes)
    assert [d.host_path for d in alloc.devices] == ["/dev/davinci_manager", "/dev/devmm_svm", "/dev/davinci0"]


def test_direct_mount_310b_uses_the_docker_manager_node() -> None:
    nodes = frozenset({"/dev/davinci_manager", "/dev/davinci_manager_docker"})
    alloc = container_response(
        [AllocDevice("Ascend310-0", 0)],
        family=ChipFamily.ASCEND310B,
        runtime_mode=False,
        dynamic=False,
        host_dev_nodes=nodes,
    )
    assert alloc.devices[0] == DeviceNode("/dev/davinci_manager", "/dev/davinci_manager_docker", "rw")
    other = container_response(phys(0), family=B, runtime_mode=False, dynamic=False, host_dev_nodes=nodes)
    assert other.devices[0] == DeviceNode("/dev/davinci_manager", "/dev/davinci_manager", "rw")


@pytest.mark.parametrize(
    ("devices", "message"),
    [
        ([], "no devices"),
        ([AllocDevice("Ascend910-0", 0), AllocDevice("Ascend910-2c-100-1", 1, 100)], "cannot mix"),
        ([AllocDevice("a", 0, 100), AllocDevice("b", 1, 101)], "at most 1 vNPU"),
    ],
)
def test_container_response_rejects(devices: list[AllocDevice], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        runtime(devices)


def test_alloc_device_knows_a_vnpu() -> None:
    assert AllocDevice("Ascend910-2c-100-0", 0, 100).is_vnpu
    assert not AllocDevice("Ascend910-0", 0).is_vnpu


KNOWN = {f"Ascend910-{p}" for p in range(8)} | {"Ascend910-2c-100-0", "Ascend910-2c-101-0"}


def test_validate_request_accepts_known_ids() -> None:
    validate_request(["Ascend910-0", "Ascend910-7"], KNOWN, 8)
    validate_request(["Ascend910-2c-100-0"], KNOWN, 8)


@pytest.mark.parametrize(
    ("ids", "message"),
    [
        ([], "names no device"),
        ([f"Ascend910-{p}" for p in range(8)] + ["Ascend910-0"], "9 devices, more than 8"),
        (["Ascend910-0", "A" * 51], "longer than 50"),
        (["Ascend910-0", "Ascend910-9", "Ascend910-0"], "unknown device 'Ascend910-9'"),  # first bad id wins
        (["Ascend910-1", "Ascend910-1", "Ascend910-9"], "'Ascend910-1' is requested twice"),
        (["Ascend910-2c-100-0", "Ascend910-2c-101-0"], "at most 1 vNPU"),
        (["Ascend910-0", "Ascend910-2c-100-0"], "at most 1 vNPU"),
    ],
)
def test_validate_request_rejects(ids: list[str], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        validate_request(ids, KNOWN, 8)


@pytest.mark.parametrize(
    ("data", "envs"),
    [
        # TestSetSlowNodeNoticeEnv: the ConfigMap's value gives both variables.
        ({"k": '{"data":{"PerfDumpPath":"/perf","PerfDumpConfig":"step:on"}}'},
         {"PERF_DUMP_PATH": "/perf", "PERF_DUMP_CONFIG": "step:on"}),
        ({"k": '{"data":{"PerfDumpPath":"/perf"}}'}, {"PERF_DUMP_PATH": "/perf", "PERF_DUMP_CONFIG": ""}),
        ({}, {"PERF_DUMP_PATH": "", "PERF_DUMP_CONFIG": ""}),  # the ConfigMap exists: the reference sets both
        ({"k": "null"}, {"PERF_DUMP_PATH": "", "PERF_DUMP_CONFIG": ""}),
        ({"k": "not json"}, None),  # unmarshal error: no notice
        ({"k": "[]"}, None),
        ({"k": '{"data":{"PerfDumpPath":1}}'}, None),
        ({"a": '{"data":{"PerfDumpPath":"/a"}}', "b": '{"data":{"PerfDumpPath":"/b"}}'},
         {"PERF_DUMP_PATH": "/b", "PERF_DUMP_CONFIG": ""}),  # the last one read wins (sorted keys: one answer)
    ],
)  # fmt: skip
def test_slow_node_envs(data: dict[str, str], envs: dict[str, str] | None) -> None:
    assert slow_node_envs(data) == envs
