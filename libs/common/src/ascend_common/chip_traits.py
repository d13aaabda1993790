"""Every fact that differs by chip family, in one table (issue 36 item 3).

The services used to ask `family is ChipFamily.X` wherever a family behaves apart, so a new
generation meant finding each such branch. Each of those facts is a field of `FamilyTraits`
here, `TRAITS` holds one row per family, and the services read the row (`traits(family)`). A new
generation is a row of this table plus the library calls its backend needs; what a field means
and where the reference decides it is said beside the field.

The table is data: no I/O, no service's types. A fact that is a library call (which DCMI function
a generation answers, how its ports are read) stays in the exporter's backend, gated by a field.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from types import MappingProxyType
from typing import Final, Literal

from ascend_common.chips import ChipFamily, ResourceType

__all__ = [
    "TRAITS",
    "FamilyTraits",
    "IdScheme",
    "MetricGroup",
    "Network",
    "ResetScope",
    "SuperPodFields",
    "SwitchInfo",
    "families_with",
    "resource_type",
    "traits",
]


class ResetScope(StrEnum):
    """Which chips a hot reset takes down with a chip (hot_reset_manager.go `getResetRingDevices`)."""

    RING = "ring"  # a fixed ring of `ring_size` logic ids (a ring of 1: the chip alone)
    HCCS = "hccs"  # the 910B's ring, sized by board and chip count (reset_groups.ring_size)
    BROTHER_CARDS = "brother-cards"  # A3: both dies of the card and of its brother card


class IdScheme(StrEnum):
    """Which id the container runtime is told and Volcano annotates (`getFinalVisibleDevices`)."""

    PHY = "phy"
    LOGIC = "logic"  # the 950: logic ids, and its fault Events name the logic id


class SuperPodFields(StrEnum):
    """What a chip reports of its super pod (dcmi_get_spod_info and the labels built on it)."""

    NONE = "none"
    POD = "pod"  # super-pod id, server index, SDID
    RACK = "rack"  # those and the rack id, super-pod type and size (the 950's rack scale)


class Network(StrEnum):
    """The chip's own network ports, which the exporter reads through hccn_tool."""

    NONE = "none"  # the 310 cards
    ROCE = "roce"  # npu-exporter's RoceCollector, the RoCE lost link-down round
    UB = "ub"  # the 950's UB ports: UbCollector, the UB / UBoE code round, hang traffic


class SwitchInfo(StrEnum):
    """The device-info ConfigMap's SwitchInfoCfg."""

    NONE = "none"  # no key
    WATCHED = "watched"  # A3: the switch library's faults (liblingqu-dcmi.so)
    UNWATCHED = "unwatched"  # 950: the key the reference writes, with no switch fault watched


class MetricGroup(StrEnum):
    """npu-exporter's supported-device maps (collector_for_*.go): the chip families that get each group."""

    HBM = "hbm"
    DDR = "ddr"
    OVERALL_UTIL = "overall_util"
    CUBE_UTIL = "cube_util"
    VECTOR_UTIL = "vector_util"
    PCIE = "pcie"
    HCCS = "hccs"
    SIO = "sio"
    PRODUCT_TYPE = "product_type"
    UB = "ub"  # UbCollector.IsSupported: Ascend910A5 only
    VNPU = "vnpu"  # VnpuCollector's supportedVnpuDevices: the 310P's vNPU families


@dataclass(frozen=True)
class FamilyTraits:
    """One family's row. (Not the simulator's `ChipTraits`, a simulated chip's temperatures.)"""

    resource_type: ResourceType  # advertised as huawei.com/<type>
    device_type: str  # the reference's dev type (devmanager GetDevType): the DRA `deviceType`
    on_chip_memory: bool  # HBM (common.HasOnChipMemory); the 310 cards have DDR
    reset_scope: ResetScope
    ring_size: int  # getRingSize (the 910B's default; its board and chip-count sizes in reset_groups)
    id_scheme: IdScheme
    super_pod: SuperPodFields
    server_type: str  # the `serverType` annotation: "A3", "npu", "" on older chips
    # The servertype label's prefix (`<prefix>-<aicore>`), and whether it is written over an
    # administrator's value (the 950 always writes its generic name).
    server_label_prefix: str
    server_label_forced: bool
    accelerator_label: bool  # acceleratorLabelMap has the family (no entry for the 310B)
    infer_card_boards: frozenset[int]  # boards labelled accelerator-type card-910b-infer (300I A2)
    vnpu_templates: tuple[str, ...]  # the vNPU templates the family can create, none: no vNPU
    share_dev: bool  # common.ShareDev copies a chip `--share-dev-count` times (310P / 310B)
    allow_link: bool  # ASCEND_ALLOW_LINK=True in the runtime's environment (310B)
    manager_docker_node: bool  # /dev/davinci_manager from davinci_manager_docker when present (310B)
    device_ip: bool  # the library answers a device IP (the 950's has no IP call: "" everywhere)
    rank_levels: bool  # the 950's levelList, and DeviceID in baseDeviceInfos
    hccl_topo_file: bool  # HCCL_TOPO_FILE_PATH for the containers (setHcclTopoFilePathEnv)
    shm_die: Literal["VDIE", "DDIE"]  # the die id naming the soft-share memory file; a DDIE is read only there
    urma: bool  # URMA devices (the reference's "urma device API for A5")
    network: Network
    switch_info: SwitchInfo
    die_policy: bool  # the A3's single-die / union policy (dcmi_set_multi_die_policy)
    library_v2: bool  # the chips answer the library's v2 calls (the simulator's profiles)
    metrics: frozenset[MetricGroup]
    # The main boards whose PCIe bandwidth is read (the 950's supportedPcieA5MainBoards: Atlas 350
    # 1P/2P/4P, UBX); None: every board of a family with the PCIe group.
    pcie_main_boards: frozenset[int] | None


def _row(
    resource: ResourceType,
    device_type: str,
    *,
    metrics: frozenset[MetricGroup],
    on_chip_memory: bool = False,
    reset_scope: ResetScope = ResetScope.RING,
    ring_size: int = 1,
    id_scheme: IdScheme = IdScheme.PHY,
    super_pod: SuperPodFields = SuperPodFields.NONE,
    server_type: str = "",
    server_label_prefix: str | None = None,
    server_label_forced: bool = False,
    accelerator_label: bool = True,
    infer_card_boards: frozenset[int] = frozenset(),
    vnpu_templates: tuple[str, ...] = (),
    share_dev: bool = False,
    allow_link: bool = False,
    manager_docker_node: bool = False,
    device_ip: bool = True,
    rank_levels: bool = False,
    hccl_topo_file: bool = False,
    shm_die: Literal["VDIE", "DDIE"] = "VDIE",
    urma: bool = False,
    network: Network = Network.NONE,
    switch_info: SwitchInfo = SwitchInfo.NONE,
    die_policy: bool = False,
    library_v2: bool = False,
    pcie_main_boards: frozenset[int] | None = None,
) -> FamilyTraits:
    # The defaults are the older chips' answers, so that each row says only where it differs.
    return FamilyTraits(
        resource_type=resource,
        device_type=device_type,
        on_chip_memory=on_chip_memory,
        reset_scope=reset_scope,
        ring_size=ring_size,
        id_scheme=id_scheme,
        super_pod=super_pod,
        server_type=server_type,
        server_label_prefix=device_type if server_label_prefix is None else server_label_prefix,
        server_label_forced=server_label_forced,
        accelerator_label=accelerator_label,
        infer_card_boards=infer_card_boards,
        vnpu_templates=vnpu_templates,
        share_dev=share_dev,
        allow_link=allow_link,
        manager_docker_node=manager_docker_node,
        device_ip=device_ip,
        rank_levels=rank_levels,
        hccl_topo_file=hccl_topo_file,
        shm_die=shm_die,
        urma=urma,
        network=network,
        switch_info=switch_info,
        die_policy=die_policy,
        library_v2=library_v2,
        metrics=metrics,
        pcie_main_boards=pcie_main_boards,
    )


_M = MetricGroup
_CARD_310 = frozenset({_M.DDR, _M.VECTOR_UTIL})

TRAITS: Final[Mapping[ChipFamily, FamilyTraits]] = MappingProxyType(
    {
        ChipFamily.ASCEND310: _row(ResourceType.ASCEND310, "Ascend310", metrics=_CARD_310),
        ChipFamily.ASCEND310B: _row(
            ResourceType.ASCEND310,
            "Ascend310B",
            metrics=_CARD_310,
            accelerator_label=False,
            share_dev=True,
            allow_link=True,
            manager_docker_node=True,
        ),
        ChipFamily.ASCEND310P: _row(
            ResourceType.ASCEND310P,
            "Ascend310P",
            metrics=_CARD_310 | {_M.PRODUCT_TYPE, _M.VNPU},
            share_dev=True,
            vnpu_templates=("vir01", "vir02", "vir04", "vir02_1c", "vir04_3c", "vir04_3c_ndvpp", "vir04_4c_dvpp"),
        ),
        ChipFamily.ASCEND910: _row(
            ResourceType.ASCEND910,
            "Ascend910",
            metrics=frozenset({_M.HBM, _M.DDR}),
            on_chip_memory=True,
            ring_size=4,  # Ascend910RingsNum
            network=Network.ROCE,
            vnpu_templates=("vir01", "vir02", "vir04", "vir08", "vir16"),
        ),
        ChipFamily.ASCEND910B: _row(
            ResourceType.ASCEND910,
            "Ascend910B",
            metrics=frozenset({_M.HBM, _M.OVERALL_UTIL, _M.CUBE_UTIL, _M.VECTOR_UTIL, _M.PCIE, _M.HCCS}),
            on_chip_memory=True,
            reset_scope=ResetScope.HCCS,
            ring_size=8,  # Ascend910BRingsNumTrain
            infer_card_boards=frozenset({0x28, 0x29}),  # Atlas 300I A2 (32 GB, 64 GB)
            network=Network.ROCE,
            vnpu_templates=(
                "vir03_1c_8g",
                "vir05_1c_8g",
                "vir05_1c_16g",
                "vir06_1c_16g",
                "vir10_3c_16g",
                "vir10_3c_16g_nm",
                "vir10_3c_32g",
                "vir10_4c_16g_m",
                "vir12_3c_32g",
            ),
        ),
        ChipFamily.ASCEND910A3: _row(
            ResourceType.ASCEND910,
            "Ascend910A3",
            metrics=frozenset({_M.HBM, _M.OVERALL_UTIL, _M.CUBE_UTIL, _M.VECTOR_UTIL, _M.HCCS, _M.SIO}),
            on_chip_memory=True,
            reset_scope=ResetScope.BROTHER_CARDS,
            # Ascend910A3RingsNum: what getRingSize answers for A3, which never reaches it (A3 takes
            # the associated dies first); kept so that ring_size answers as getRingSize does.
            ring_size=16,
            super_pod=SuperPodFields.POD,
            server_type="A3",
            network=Network.ROCE,
            switch_info=SwitchInfo.WATCHED,
            die_policy=True,
            vnpu_templates=("vir12_3c_32g", "vir06_1c_16g", "vir05_1c_16g", "vir10_3c_32g"),
        ),
        ChipFamily.ASCEND950: _row(
            ResourceType.NPU,
            "Ascend910A5",  # the reference calls the 950 generation Ascend910A5
            metrics=frozenset({_M.HBM, _M.OVERALL_UTIL, _M.VECTOR_UTIL, _M.PCIE, _M.SIO, _M.UB}),
            on_chip_memory=True,
            ring_size=1,  # Ascend910A5RingsNum
            id_scheme=IdScheme.LOGIC,
            super_pod=SuperPodFields.RACK,
            server_type="npu",
            server_label_prefix="npu",
            server_label_forced=True,
            device_ip=False,
            rank_levels=True,
            hccl_topo_file=True,
            shm_die="DDIE",
            urma=True,
            network=Network.UB,
            switch_info=SwitchInfo.UNWATCHED,
            library_v2=True,
            pcie_main_boards=frozenset({0x68, 0x6B, 0x6C, 0x44}),
        ),
    }
)


def traits(family: ChipFamily) -> FamilyTraits:
    """The family's row."""
    return TRAITS[family]


def resource_type(family: ChipFamily) -> ResourceType:
    """The physical resource the family's chips are advertised under."""
    return TRAITS[family].resource_type


def families_with(test: Callable[[FamilyTraits], bool]) -> frozenset[ChipFamily]:
    """The families whose row passes `test`: for the rules kept as a set of families."""
    return frozenset(family for family, row in TRAITS.items() if test(row))
