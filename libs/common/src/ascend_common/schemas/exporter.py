"""The dcmi-exporter's local API: node and chip inventory, events, reset jobs, vNPUs.

Consumers (device-plugin, fault-manager, ascendctl) import these models; the exporter
serialises them. Every library-sourced field is a `Reading`.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from ascend_common.chips import ChipFamily, ResourceType
from ascend_common.schemas.answer import Answer
from ascend_common.schemas.reading import RC_NOT_SUPPORTED, Reading

API_PREFIX = "/v1"
EVENTS_PATH = "/v1/events"
MAX_BURST = 10_000

# CARD_DROP_CODE (ascend_common.faults.codes) is the synthetic code of a chip that answers "not
# ready" (DCMI -8012): the card dropped.
BOOT_STATUS_READY = 16


class ChipState(StrEnum):
    OK = "ok"  # the last read answered
    UNKNOWN = "unknown"  # a call hung or timed out; values are the last known or missing
    CARD_DROP = "card_drop"  # the library says the chip is not ready (-8012)


class Assertion(StrEnum):
    RECOVER = "recover"
    OCCUR = "occur"
    ONCE = "once"


class EventSource(StrEnum):
    SUBSCRIPTION = "subscription"  # the library's fault-event callback
    POLL = "poll"  # a code that appeared in, or vanished from, the polled error-code list
    HANG = "hang"  # the exporter's own hung-job detection (code 200001002)
    UB = "ub"  # the exporter's own 950 UB/UBoE codes, from hccn_tool's port state
    ROCE = "roce"  # the exporter's own 910 RoCE link-down code (a lost event), from hccn_tool's link state


class Request(BaseModel):
    # What a client sends: a field the exporter does not know is a mistake, refused with a 422.
    model_config = ConfigDict(frozen=True, extra="forbid")


class Hbm(Answer):
    total_mb: int
    used_mb: int
    frequency_mhz: int | None = None
    temperature_c: int | None = None
    bandwidth_util_pct: int | None = None


class Utilization(Answer):
    aicore_pct: int | None = None
    hbm_pct: int | None = None


class ChipProcess(Answer):
    pid: int
    memory_bytes: int


class Vnpu(Answer):
    vdev_id: int
    vfg_id: int
    template: str  # DCMI template name, e.g. "vir05_1c_16g"
    suffix: str  # resource suffix, e.g. "5c.1cpu.16g"
    aicore: int


EID_PATTERN = r"^[0-9a-f]{32}$"  # a URMA EID: its 16 bytes as lower-case hex, as the reference's hex.EncodeToString


class UrmaDevice(Answer):
    """One URMA device (a function entity) of a 950 chip and its EIDs, as the library lists them."""

    index: int = Field(ge=0)  # the urma device index asked (an index the library refused is left out)
    eids: list[Annotated[str, Field(pattern=EID_PATTERN)]]


class ChipStatic(Answer):
    """What a chip is; read at discovery and refreshed rarely."""

    chip_type: Reading[str]
    chip_name: Reading[str]  # e.g. "910B3"
    chip_version: Reading[str]
    aicore: Reading[int]
    board_id: Reading[int]
    product_type: Reading[str]
    partner_card: Reading[int]  # A3: the paired card (dcmi_get_netdev_brother_device)
    numa_node: Reading[int]
    device_ip: Reading[str]
    # Super pod (dcmi_get_device_info / dcmiv2_get_device_info CHIP_INF / SPOD_INFO, struct
    # dcmi_spod_info): asked of A3 and 950 chips only, the families with a super pod to report;
    # "unsupported" on the others. The defaults keep the payload of an exporter that predates these
    # fields readable. Values are the library's uint32, as it answered them.
    super_pod_id: Reading[int] = Reading[int].error(RC_NOT_SUPPORTED)
    server_index: Reading[int] = Reading[int].error(RC_NOT_SUPPORTED)  # dcmi_spod_info.server_id
    super_device_id: Reading[int] = Reading[int].error(RC_NOT_SUPPORTED)  # the chip's SDID
    # dcmi_get_mainboard_id; 0xFFFFFFFF is the driver's "none", which the reference skips.
    main_board_id: Reading[int] = Reading[int].error(RC_NOT_SUPPORTED)
    # 950 only (the reference reads them on Ascend910A5 alone): the rack (dcmi_spod_info.chassis_id),
    # the super-pod type (0 server, 1 1D pod, 2 2D pod, 3/4 16P/32P server, 5/6 1P/4P card:
    # ascend_common.products.ProductType) and the super pod's size (scale_type).
    rack_id: Reading[int] = Reading[int].error(RC_NOT_SUPPORTED)
    super_pod_type: Reading[int] = Reading[int].error(RC_NOT_SUPPORTED)
    scale_type: Reading[int] = Reading[int].error(RC_NOT_SUPPORTED)
    # Die ids as the reference's DcGetDieID writes them (five uint32, "%08s" hex, "-", upper case:
    # `00000001-0000ABCD-00000000-00000000-00000012`): the VDIE of every chip
    # (dcmi_get_device_die_v2 / dcmiv2_get_device_die_id type 1; the metrics label `vdie_id`) and
    # the DDIE of the 950 (type 2, v2 library; the soft-share `shm-id` there). None when the read
    # failed, the family has no such die, or the exporter predates the fields: a consumer that
    # needs one refuses, it never guesses.
    vdie_id: str | None = None
    ddie_id: str | None = None
    # 950 only: its URMA devices (dcmiv2_get_urma_device_cnt, then dcmiv2_get_eid_list_by_urma_dev_index
    # per index), in index order; read once and kept, as the reference caches them. None when the read
    # failed, the family has none, or the exporter predates the field: the rank levels then have none.
    urma: list[UrmaDevice] | None = None


class UbPorts(Answer):
    """How many of a 950 chip's ports `hccn_tool -g -dev_info` lists as DOWN (GetUBPortsDownSnapshot)."""

    ub_down: int  # UB ports, wired ones only (`-port_info` port_enable: on)
    bonding_down: int  # ETH (UBoE bonding) ports


class ChipDynamic(Answer):
    """What a chip is doing; read every poll."""

    health: Reading[int]  # DCMI health: 0 healthy
    error_codes: Reading[list[str]]  # upper-case hex, no 0x
    network_health: Reading[int]  # 0 ok, 6 init: both healthy
    hbm: Reading[Hbm]
    temperature_c: Reading[int]
    power_w: Reading[float]
    utilization: Reading[Utilization]
    processes: Reading[list[ChipProcess]]
    boot_status: Reading[int]
    vnpus: Reading[list[Vnpu]]
    # The 950's ports that are DOWN, from hccn_tool (the exporter derives UB/UBoE codes from it);
    # unsupported elsewhere, and in payloads from before it existed.
    ub_ports: Reading[UbPorts] = Reading[UbPorts].error(RC_NOT_SUPPORTED)


class Chip(Answer):
    logic_id: int
    phy_id: int
    card_id: int
    device_id: int
    name: str  # "<type>-<phyID>", the name in every report
    family: ChipFamily | None  # None when the chip name could not be read or is unknown
    resource_type: ResourceType | None
    state: ChipState
    healthy: bool | None  # None: unknown (hung call, unread health)
    network_healthy: bool | None
    static: ChipStatic
    dynamic: ChipDynamic | None  # None until the first read completes
    updated_at: float  # unix seconds of the last completed read


class SwitchFaultData(Answer):
    """An A3 switch (L1/L2) event as the reference's SwitchInfoCfg records it."""

    event_type: int
    assembled_fault_code: str
    peer_port_device: int
    peer_port_id: int
    switch_chip_id: int
    switch_port_id: int
    severity: int
    assertion: Assertion
    alarm_raised_time: int


class SubscriptionState(StrEnum):
    LIVE = "live"  # the library's fault-event callback is registered
    POLLING = "polling"  # no subscription: faults come from polling the error-code list


class NodeInfo(Answer):
    backend: Literal["sim", "dcmi"]
    profile: str | None
    run_id: str
    dcmi_version: Reading[str]
    card_count: int
    chip_count: int
    chips_by_state: dict[ChipState, int]
    subscription: SubscriptionState
    poll_period_s: float
    started_at: float
    updated_at: float
    last_event_id: str | None  # the snapshot reflects every event up to this id
    switch_faults: list[SwitchFaultData] = []  # active A3 switch faults (occurred, not recovered)
    ready: bool = False  # discovery done and every chip read once
    # The host NICs that --npu-nic-mapping names -> their addresses (no prefix length), in the order
    # the kernel lists them (IPv4 first), unfiltered: the rank levels pick the first usable one. None
    # without a mapping file (or from an exporter that predates the field); a named NIC the host lacks
    # maps to [].
    nic_addresses: dict[str, list[str]] | None = None
    # The mapping file's npuId -> NIC names in priority order (the rank levels' level 3 tries them in
    # turn); None without a mapping file or from an older exporter. JSON keys are the ids as strings.
    npu_nics: dict[int, list[str]] | None = None


class ChipList(Answer):
    last_event_id: str | None
    chips: list[Chip]


class FaultEventData(Answer):
    code: str
    assertion: Assertion
    severity: int | None  # 0 warning .. 3 critical; None when read by polling
    source: EventSource
    raised_at_ms: int
    name: str = ""


class ChipChangeData(Answer):
    state: ChipState
    healthy: bool | None
    network_healthy: bool | None
    boot_status: int | None


class GapData(Answer):
    reason: Literal["evicted", "other_run", "malformed"]
    requested: str
    resume_after: str | None  # events after this id follow the gap; re-read the snapshot


class EventType(StrEnum):
    FAULT = "fault"
    SWITCH_FAULT = "switch_fault"
    CHIP = "chip"
    JOB = "job"
    VNPU = "vnpu"
    GAP = "gap"
    # NodeInfo changed without a chip changing (the mapped NICs' addresses): re-read GET /v1/node.
    NODE = "node"


class ExporterEvent(Answer):
    """One event of `GET /v1/events`; the SSE `id` is `<run_id>-<seq>` and `event` is `type`."""

    id: str
    type: EventType
    time: float
    logic_id: int | None = None
    phy_id: int | None = None
    chip: str | None = None
    fault: FaultEventData | None = None
    switch_fault: SwitchFaultData | None = None
    change: ChipChangeData | None = None
    job: ResetJob | None = None
    vnpu: Vnpu | None = None
    vnpu_action: Literal["created", "destroyed"] | None = None
    gap: GapData | None = None


class StreamHello(Answer):
    """First message of every event stream (SSE event `hello`, no id)."""

    run_id: str
    subscription: SubscriptionState
    last_event_id: str | None


class ResetChannel(StrEnum):
    INBAND = "inband"
    OUTBAND = "outband"


class JobState(StrEnum):
    PENDING = "pending"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"


class JobError(Answer):
    code: int
    message: str


class ResetJob(Answer):
    id: str
    logic_ids: list[int]  # the reset group, by logic id
    phy_ids: list[int]
    channel: ResetChannel
    state: JobState
    boot_status: dict[int, int | None]  # logic id -> last boot status read
    error: JobError | None = None
    created_at: float
    finished_at: float | None = None


class ResetRequest(Request):
    channel: Literal["auto", "inband", "outband"] = "auto"


class VnpuCreateRequest(Request):
    template: Annotated[str, Field(min_length=1, max_length=32)]
    vdev_id: Annotated[int, Field(ge=0, le=65535)] | None = None  # None: the library chooses
    vfg_id: Annotated[int, Field(ge=0, le=65535)] | None = None


K8sName = Annotated[str, Field(min_length=1, max_length=253)]


class ContainerHolder(Request):
    """A container that holds a chip (the device plugin's PodResources view)."""

    namespace: K8sName
    pod: K8sName
    container: K8sName


class ChipHolders(Request):
    phy_id: Annotated[int, Field(ge=0, le=65535)]
    containers: Annotated[list[ContainerHolder], Field(max_length=64)]


# The vdev ids a vNPU may have (npu-exporter's MinVDevID .. MaxVDevID - 1).
VDEV_ID_MIN = 100
VDEV_ID_MAX = 1123


class VnpuHolders(Request):
    vdev_id: Annotated[int, Field(ge=VDEV_ID_MIN, le=VDEV_ID_MAX)]
    containers: Annotated[list[ContainerHolder], Field(max_length=64)]


class ContainerMapping(Request):
    """`PUT /v1/containers`: who holds which chip, and which vNPU by its vdev id, the whole node at
    once (a chip or vNPU left out is held by none). `vnpus` may be left out (a plugin of an older
    release sends chips only)."""

    chips: Annotated[list[ChipHolders], Field(max_length=1024)]
    vnpus: Annotated[list[VnpuHolders], Field(max_length=1024)] = []

    @model_validator(mode="after")
    def _one_entry_per_vnpu(self) -> ContainerMapping:
        # Two entries for one vNPU would leave which holders count to their order. (A chip listed
        # twice stays accepted, the last entry counting, as before vNPUs were added.)
        seen: set[int] = set()
        for entry in self.vnpus:
            if entry.vdev_id in seen:
                raise ValueError(f"vdev_id {entry.vdev_id} is listed twice")
            seen.add(entry.vdev_id)
        return self


class ApiError(Answer):
    detail: str  # one readable sentence
    errors: list[dict[str, object]] | None = None  # per-field validation errors, when there are any


ExporterEvent.model_rebuild()
