"""The Allocate response for one container (contract section 3).

Reference: pkg/server/plugin.go `Allocate`, `mountDevice`, `mountDefaultDevice`,
`checkAllocateRequest`; pkg/common/common.go `SetAscendRuntimeEnv`, `GetDefaultDevices`.

- Ascend Docker Runtime mode: only env vars; the runtime mounts the device nodes itself.
- Direct-mount mode: DeviceSpecs, the shared driver nodes first, then `/dev/davinci<N>` per
  chip (host `/dev/vdavinci<N>` for a vNPU, where N is the vdev id; the container still sees
  `/dev/davinci<N>`), then every file under `/dev/uburma` and `/dev/ummu` (`mountUBDevice`).
  The reference sets no env vars there, except the 950's HCCL topology file.

The 950 generation (pkg/server/plugin.go `getFinalVisibleDevices`, `convertToLogicIDs`;
plugin_v2.go `setHcclTopoFilePathEnv`): outside the Volcano path its runtime is told the chips'
logic ids; every container gets the node's `HCCL_TOPO_FILE_PATH`.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field

from ascend_common.chip_traits import IdScheme, traits
from ascend_common.chips import ChipFamily
from ascend_common.jsonin import InputError, loads_bounded
from ascend_common.naming import MAX_DEVICE_ID_LEN, parse_device_id
from ascend_common.products import card_type, hccl_topo_file, product_type

ASCEND_VISIBLE_DEVICES = "ASCEND_VISIBLE_DEVICES"
ASCEND_RUNTIME_OPTIONS = "ASCEND_RUNTIME_OPTIONS"
ASCEND_ALLOW_LINK = "ASCEND_ALLOW_LINK"
RUNTIME_VIRTUAL = "VIRTUAL"
# Dynamic vNPU mode: the plugin, not the job operator, tells the frameworks how many NPUs the
# container has (PyTorch, MindSpore, and the CM_* pair the reference names TfWorkerSize/TfLocalWorker).
WORKER_COUNT_ENVS = (
    "WORLD_SIZE",
    "LOCAL_WORLD_SIZE",
    "MS_WORKER_NUM",
    "MS_LOCAL_WORKER",
    "CM_WORKER_SIZE",
    "CM_LOCAL_WORKER",
)
LOCAL_RANK = "LOCAL_RANK"
HCCL_TOPO_FILE_PATH = "HCCL_TOPO_FILE_PATH"

DAVINCI_MANAGER = "/dev/davinci_manager"
DAVINCI_MANAGER_DOCKER = "/dev/davinci_manager_docker"  # 310B hosts: mounted as /dev/davinci_manager
HISI_HDC = "/dev/hisi_hdc"
DEVMM_SVM = "/dev/devmm_svm"
DVPP_CMDLIST = "/dev/dvpp_cmdlist"
# The UB (unified bus) device directories: each file in them is mounted in direct-mount mode.
UB_DEVICE_DIRS = ("/dev/uburma", "/dev/ummu")
RW = "rw"
MAX_VNPUS_PER_REQUEST = 1  # the reference's MaxRequestVirtualDeviceNum


@dataclass(frozen=True)
class AllocDevice:
    """One device of an Allocate after the Volcano/kubelet mapping."""

    kubelet_id: str
    phy_id: int
    vdev_id: int | None = None  # set for a vNPU

    @property
    def is_vnpu(self) -> bool:
        return self.vdev_id is not None


@dataclass(frozen=True)
class DeviceNode:
    container_path: str
    host_path: str
    permissions: str = RW


@dataclass(frozen=True)
class ContainerAlloc:
    envs: dict[str, str] = field(default_factory=dict)
    devices: list[DeviceNode] = field(default_factory=list)


def container_response(
    devices: Sequence[AllocDevice],
    *,
    family: ChipFamily,
    runtime_mode: bool,
    dynamic: bool,
    host_dev_nodes: frozenset[str],
    volcano: bool = False,
    logic_by_phy: Mapping[int, int] | None = None,
    hccl_topo: str | None = None,
    ub_devices: Sequence[str] = (),
) -> ContainerAlloc:
    """Env vars or device nodes for one container; ValueError for an empty or mixed request.

    `ASCEND_VISIBLE_DEVICES` lists the devices in the order given (the Volcano annotation's or
    the kubelet's): the runtime numbers them 0, 1, ... in that order, so sorting would hand a
    rank another chip than the one the job was told. Repeats stay (a 310P shared by two copies
    gives `0,0`), as the reference's `GetDeviceListID` keeps them. Dynamic mode is the
    exception: there N `npu-core` ids stand for one vNPU or chip, and the reference lists the
    annotated vNPU or chips once each.

    `volcano`: the devices are the ones Volcano annotated; `logic_by_phy`: the node's phy id ->
    logic id (`final_visible_devices`); `hccl_topo`: the node's HCCL topology file
    (`hccl_topo_path`); `ub_devices`: the files found in UB_DEVICE_DIRS, mounted in direct-mount
    mode when the container gets any device.
    """
    if not devices:
        raise ValueError("no devices to allocate")
    vnpu = devices[0].is_vnpu
    if any(d.is_vnpu != vnpu for d in devices):
        raise ValueError("a request cannot mix vNPUs and physical chips")
    listed = [d.vdev_id if d.vdev_id is not None else d.phy_id for d in devices]
    if not vnpu:
        listed = final_visible_devices(listed, family, logic_by_phy or {}, volcano=volcano)
    distinct = list(dict.fromkeys(listed))  # first occurrence order
    visible = distinct if dynamic else listed
    if vnpu and len(distinct) > MAX_VNPUS_PER_REQUEST:
        raise ValueError(f"a container can use at most {MAX_VNPUS_PER_REQUEST} vNPU, got {len(distinct)}")

    topo = {HCCL_TOPO_FILE_PATH: hccl_topo} if hccl_topo is not None else {}
    if not runtime_mode:
        nodes = _default_nodes(family, host_dev_nodes)
        # One node per device: a shared chip's second copy would only repeat the same spec.
        for n in distinct:
            host = f"/dev/vdavinci{n}" if vnpu else f"/dev/davinci{n}"
            nodes.append(DeviceNode(f"/dev/davinci{n}", host, RW))
        if distinct:
            nodes.extend(DeviceNode(path, path, RW) for path in ub_devices)
        return ContainerAlloc(topo, nodes)

    envs = {
        ASCEND_VISIBLE_DEVICES: ",".join(str(n) for n in visible),
        ASCEND_RUNTIME_OPTIONS: RUNTIME_VIRTUAL if vnpu else "",
        **topo,
    }
    if traits(family).allow_link:
        envs[ASCEND_ALLOW_LINK] = "True"
    if dynamic:
        count = str(len(visible))
        envs.update(dict.fromkeys(WORKER_COUNT_ENVS, count))
        envs[LOCAL_RANK] = ",".join(str(i) for i in range(len(visible)))
    return ContainerAlloc(envs, [])


def final_visible_devices(
    ids: Sequence[int], family: ChipFamily, logic_by_phy: Mapping[int, int], *, volcano: bool
) -> list[int]:
    """The ids the container's runtime is told (`getFinalVisibleDevices`): on the 950 outside the
    Volcano path the chips' logic ids; the ids as given everywhere else (Volcano's pass through)."""
    if traits(family).id_scheme is IdScheme.LOGIC and not volcano:
        return convert_to_logic_ids(ids, logic_by_phy)
    return list(ids)


def convert_to_logic_ids(phy_ids: Sequence[int], logic_by_phy: Mapping[int, int]) -> list[int]:
    """The logic id of each phy id, in order; a phy id the node does not have is left out, as
    `convertToLogicIDs` leaves it (with a warning there; Allocate has refused unknown ids before)."""
    return [logic_by_phy[phy] for phy in phy_ids if phy in logic_by_phy]


def hccl_topo_path(
    family: ChipFamily, board_id: int | None, main_board_id: int | None, super_pod_type: int | None
) -> str | None:
    """`HCCL_TOPO_FILE_PATH` for a container (`setHcclTopoFilePathEnv`): on the 950 only, the
    topology file of the node's product type: an Atlas 350 card's, else the super-pod type that
    logic id 0's chip reported (`getProductTypeKey` asks `AllDevs[0]`); None, and no variable,
    elsewhere, when that chip's read failed (None: another chip's answer does not stand in) or for
    a type without a file."""
    if not traits(family).hccl_topo_file:
        return None
    return hccl_topo_file(product_type(card_type(board_id, main_board_id), super_pod_type))


def _default_nodes(family: ChipFamily, host_dev_nodes: frozenset[str]) -> list[DeviceNode]:
    """The driver's shared nodes, in the reference's order (common.go `GetDefaultDevices`)."""
    nodes: list[DeviceNode] = []
    if traits(family).manager_docker_node and DAVINCI_MANAGER_DOCKER in host_dev_nodes:
        nodes.append(DeviceNode(DAVINCI_MANAGER, DAVINCI_MANAGER_DOCKER, RW))
    elif DAVINCI_MANAGER in host_dev_nodes:
        nodes.append(DeviceNode(DAVINCI_MANAGER, DAVINCI_MANAGER, RW))
    nodes.extend(DeviceNode(p, p, RW) for p in (HISI_HDC, DEVMM_SVM, DVPP_CMDLIST) if p in host_dev_nodes)
    return nodes


def validate_request(ids: Sequence[str], known: Collection[str], max_devices: int) -> None:
    """Reject a kubelet request before touching anything; ValueError names the first bad id."""
    if not ids:
        raise ValueError("the request names no device")
    if len(ids) > max_devices:
        raise ValueError(f"the request names {len(ids)} devices, more than {max_devices}")
    seen: set[str] = set()
    for device_id in ids:
        if len(device_id) > MAX_DEVICE_ID_LEN:
            raise ValueError(f"device id {device_id[:MAX_DEVICE_ID_LEN]!r}... is longer than {MAX_DEVICE_ID_LEN}")
        if device_id not in known:
            raise ValueError(f"unknown device {device_id!r}")
        if device_id in seen:
            raise ValueError(f"device {device_id!r} is requested twice")
        seen.add(device_id)
        if len(ids) > MAX_VNPUS_PER_REQUEST and _is_vnpu_id(device_id):
            raise ValueError(f"vNPU {device_id!r}: at most {MAX_VNPUS_PER_REQUEST} vNPU per container")


def _is_vnpu_id(device_id: str) -> bool:
    try:
        return parse_device_id(device_id).vnpu_suffix is not None
    except ValueError:
        return False


SLOW_NODE_CONFIGMAP = ("kube-system", "steptime-dtpgroup")  # the reference's SlowNodeNoticeCMName
PERF_DUMP_PATH, PERF_DUMP_CONFIG = "PERF_DUMP_PATH", "PERF_DUMP_CONFIG"


def slow_node_envs(data: Mapping[str, str]) -> dict[str, str] | None:
    """The slow-node notice a container gets from the step-time ConfigMap's data (SetSlowNodeNoticeEnv):
    each value is `{"data": {"PerfDumpPath", "PerfDumpConfig"}}` (the last one read wins; its fields
    may be missing, then empty); None, and no notice, when a value is not such JSON."""
    try:
        return parse_slow_node(data)
    except InputError:
        return None


def parse_slow_node(data: Mapping[str, str]) -> dict[str, str]:
    """`slow_node_envs`, or `InputError` saying which value is not the notice and why."""
    path = config = ""
    for key in sorted(data):  # Go ranges over the map in random order; sorted here, so one answer
        what = f"{SLOW_NODE_CONFIGMAP[0]}/{SLOW_NODE_CONFIGMAP[1]} {key}"
        doc = loads_bounded(data[key], what=what)
        doc = {} if doc is None else doc  # null decodes into nothing, as Go's does
        if not isinstance(doc, dict):
            raise InputError(f"{what}: not a JSON object")
        inner = doc.get("data") or {}
        if not isinstance(inner, dict):
            raise InputError(f"{what}: data is not an object")
        values = [inner.get("PerfDumpPath", ""), inner.get("PerfDumpConfig", "")]
        if not all(isinstance(v, str) for v in values):
            raise InputError(f"{what}: PerfDumpPath or PerfDumpConfig is not a string")
        path, config = values
    return {PERF_DUMP_PATH: path, PERF_DUMP_CONFIG: config}
