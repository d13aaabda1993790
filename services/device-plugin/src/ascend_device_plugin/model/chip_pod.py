"""What the pure device-plugin rules see of chips and pods.

The I/O layer builds these from the exporter's snapshot, the fault-manager's verdicts and the
pod cache; every pure rule works on them alone, so the rules are testable without a
cluster, a kubelet or a chip.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from ascend_common.chips import ChipFamily, ResourceType
from ascend_common.schemas.exporter import Vnpu

from ascend_device_plugin.model.eid import UrmaEids


@dataclass(frozen=True)
class ChipHealth:
    """The plugin's decision on one chip: schedulable or not, and why."""

    healthy: bool
    reason: str


@dataclass(frozen=True, kw_only=True)
class ChipInfo:
    """One physical chip as the plugin advertises it.

    Keyword-only so that adding a field never silently shifts a positional argument.
    """

    logic_id: int
    phy_id: int
    card_id: int
    name: str  # "<type>-<phyID>", e.g. "Ascend910-3"
    rtype: ResourceType
    family: ChipFamily
    aicore: int
    healthy: bool  # final: the exporter sees the chip AND its verdict is schedulable
    fault: str = ""  # not healthy: why (resources.health.HealthDecision.fault), the value of its DRA taint
    numa_node: int | None = None
    device_ip: str | None = None
    board_id: int | None = None
    product_type: str | None = None
    partner_card: int | None = None  # A3: dcmi_get_netdev_brother_device
    # A3 super pod: the chip's SDID; None: not read (dcmi_get_super_pod_info failed or was not asked),
    # which the rank configuration writes as 0, as the reference does.
    super_device_id: int | None = None
    vnpus: tuple[Vnpu, ...] = ()
    # Die ids as the exporter serves them (ChipStatic): the soft-share shm id is the VDIE, the DDIE on
    # the 950; None when the exporter could not read it (a soft-share Allocate then refuses).
    vdie_id: str | None = None
    ddie_id: str | None = None
    # The 950's super-pod type as this chip answered it (dcmi_spod_info.super_pod_type); None when the
    # read failed or the chip does not report one. HCCL_TOPO_FILE_PATH asks the lowest logic id's.
    super_pod_type: int | None = None
    # The 950's URMA devices and their EIDs (ChipStatic.urma), the input of its `levelList`.
    urma: tuple[UrmaEids, ...] = ()


@dataclass(frozen=True, kw_only=True)
class PodView:
    """The slim record of a pod that the Allocate path needs."""

    namespace: str
    name: str
    uid: str
    phase: str
    # Left out of the hash (mappings are not hashable) but not out of equality, so pods can go in sets.
    annotations: Mapping[str, str] = field(hash=False)
    requests: Mapping[str, int] = field(hash=False)  # "huawei.com/Ascend910" -> count, summed over containers
    labels: Mapping[str, str] = field(hash=False, default_factory=dict)  # soft share: the job labels
    deleting: bool = False
    created: float = 0.0  # unix seconds of the creation timestamp

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    def request(self, resource_name: str) -> int:
        return self.requests.get(resource_name, 0)
