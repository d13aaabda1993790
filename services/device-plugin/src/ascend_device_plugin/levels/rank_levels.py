"""A 950 (A5) chip's rank levels, the `levelList` of `baseDeviceInfos` and `ascend-npu-configuration`.

The ascend-operator's A5 rank table v2.0 is built from these lists (Volcano copies them from the
node's `baseDeviceInfos` into the pod's annotation; ClusterD flattens them into its super-pod
view), so the rendering must be the bytes Go's encoding/json writes for the reference's structs
(ascend-common api/superpoddevice_v2.go RankLevel, LevelElement, RankAddrItem).
Reference: device-plugin pkg/server/manager_v2.go `getLevelList`, `getRankAddrList`,
`getROCEAddrList`, `getRankAddrListOriginal`; pkg/server/npu_base_v2.go (`getID`,
`getRankLevelInfoKeyArr`, the `build*Parsed` builders, the card path `getRandAddrByFuncEntityID`).

Pure: every input is a plain value the exporter reads and the plugin forwards (URMA devices,
super-pod facts, the main board, the card type, the Node's InternalIP, the topology file's edges,
the NPU-to-NIC mapping and the NICs' addresses).
"""

from __future__ import annotations

import ipaddress
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Final

from ascend_common.gojson import GoJSON, go_json
from ascend_common.products import ATLAS_350_4P_CARD, ATLAS_350_CARD, ProductType, max_chips_per_node

from ascend_device_plugin.model.eid import (
    ParsedUrma,
    UrmaEids,
    card_d2d,
    card_die,
    card_fe,
    card_plane_id,
    card_port,
    parse_urma_devices,
)

# The keys of a level's `info` (api LevelInfoType*); "" is a level the node does not have.
UB: Final = "UB"
UBG: Final = "UBG"
UBOE: Final = "UBOE"
ROCE: Final = "ROCE"
NO_LEVEL: Final = ""

NET_TYPE_TOPO: Final = "TOPO_FILE_DESC"  # level 0
NET_TYPE_CLOS: Final = "CLOS"  # every other level
CLUSTER_NAME: Final = "CLUSTER1"  # api.DefaultClusterName, the id of levels 2 and 3
DEFAULT_PLANE: Final = "CLUSTER"  # api.DefaultRandAddrPlaneID
ADDR_EID: Final = "EID"
ADDR_IPV4: Final = "IPV4"
ADDR_IPV6: Final = "IPV6"
PEER2NET: Final = "PEER2NET"  # a topology edge's link type that carries level-0 card ports

# Main boards (api const_v2.go): a 1D pod's, the 950 pod's, the Atlas 850 servers with a level 1.
ATLAS_950_1D_MAIN_BOARD: Final = 0x03
ATLAS_950_MAIN_BOARD: Final = 0x07
ATLAS_850_MAIN_BOARDS_WITH_L1: Final = frozenset({0x25, 0x27})

INVALID_SUPER_POD: Final = 0xFFFFFFFF  # dcmi's "no super pod" id and size

_CARD_KEYS: Final = {
    ATLAS_350_CARD: (NO_LEVEL, NO_LEVEL, NO_LEVEL, ROCE),
    ATLAS_350_4P_CARD: (UB, NO_LEVEL, NO_LEVEL, ROCE),
}
_POD_KEYS: Final = (UB, UB, UBG, ROCE)
_SUPER_SERVER_KEYS: Final = (UB, UB, UBOE, ROCE)
_SERVER_KEYS: Final = (UB, NO_LEVEL, UBOE, ROCE)

# Level 1 of a pod (`getPodLevel1Config`): per half of the node, (die, fe) -> the PG EID's ports.
_POD_L1_LOWER: Final = {(0, 2): (1, 2), (1, 2): (0, 1, 2, 3, 5, 6)}
_POD_L1_UPPER: Final = {(1, 2): (1, 2), (0, 2): (0, 1, 2, 3, 4, 5)}
_POD_PLANE_PORTS: Final = 6  # a pod's level-1 address with six ports is on plane "0", else "1"
# Level 1 of an Atlas 850 server (`getServerLevel1Config`).
_SERVER_L1: Final = {(0, 3): (1, 2, 3, 4, 5, 6, 7, 8)}
_SERVER_L2_UBOE_PORT: Final = "1/8"  # common.A5ServerLevel2UboePort
_CARD_MAX_PORT: Final = 8  # common.PortIdLimit: a higher card port is the PG port
_CARD_L0_FE: Final = 0


@dataclass(frozen=True, slots=True)
class TopoEdge:
    """One `edge_list` entry of the HCCL topology file (the card path reads level-0 ports from it)."""

    local_a: int
    local_a_ports: tuple[str, ...]
    net_layer: int
    link_type: str


@dataclass(frozen=True, slots=True)
class NodeFacts:
    """What the node is. `super_pod_id` / `super_pod_size` None when unread (the reference's -2 or
    0xFFFFFFFF: ours then has no super pod, issue 25 reference bug 2); `super_pod_type` None when no
    chip answered (a plain server). `topo_edges` None when the topology file is unreadable, which
    drops a 4P card's level-0 addresses as in the reference."""

    super_pod_id: int | None
    server_index: int | None
    super_pod_type: int | None
    super_pod_size: int | None
    main_board_id: int | None
    card_type: str | None
    internal_ip: str
    topo_edges: tuple[TopoEdge, ...] | None = None
    # NPU id (phy id modulo the chips per node) -> NIC names in priority order; None without
    # /user/mindx-dl/npu/npu-nic-mapping.json. And each host NIC's addresses.
    npu_nics: Mapping[int, Sequence[str]] | None = None
    nic_addresses: Mapping[str, Sequence[str]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.is_pod and (self.super_pod_id is None or self.server_index is None):
            raise ValueError(
                f"a node of super-pod type {self.super_pod_type} needs its super-pod id and server index, "
                f"got {self.super_pod_id} and {self.server_index}"
            )

    @property
    def is_card(self) -> bool:
        """`isStandCard`: an Atlas 350 card."""
        return self.card_type in _CARD_KEYS

    @property
    def is_pod(self) -> bool:
        """`isPodScene`: a node of a 1D or 2D pod."""
        return self.super_pod_type in (ProductType.POD_1D, ProductType.POD_2D)

    @property
    def is_super_server(self) -> bool:
        """`isSuperServer`: a server (not a 16P / 32P one) in a super pod."""
        if self.is_pod or self.super_pod_type in (ProductType.SERVER_16P, ProductType.SERVER_32P):
            return False
        return self.super_pod_id not in (None, INVALID_SUPER_POD) and self.super_pod_size not in (
            None,
            INVALID_SUPER_POD,
        )

    @property
    def max_npu(self) -> int:
        return max_chips_per_node(self.main_board_id)


@dataclass(frozen=True, slots=True)
class RankAddr:
    """`api.RankAddrItem`."""

    addr_type: str
    addr: str
    ports: tuple[str, ...]
    plane_id: str


@dataclass(frozen=True, slots=True)
class RankLevel:
    """`api.RankLevel` with its one `info` entry: the key (UB, UBG, UBOE, ROCE) and `api.LevelElement`."""

    level: int
    key: str
    net_instance_id: str
    net_type: str
    rank_addr_list: tuple[RankAddr, ...]
    net_attr: str = ""


def rank_level_keys(node: NodeFacts) -> tuple[str, str, str, str]:
    """`getRankLevelInfoKeyArr`: the info key of levels 0..3, NO_LEVEL for a level the node lacks."""
    if node.card_type in _CARD_KEYS:
        return _CARD_KEYS[node.card_type]
    if node.is_pod:
        return _POD_KEYS
    return _SUPER_SERVER_KEYS if node.is_super_server else _SERVER_KEYS


def net_instance_id(node: NodeFacts, level: int) -> str:
    """`getID`: L0 the InternalIP on a card or a plain server, else "<spid>_<sidx>"; L1 "<spid>"
    ("" on a plain server); L2 and L3 "CLUSTER1"."""
    if level == 0:
        if node.is_card or not (node.is_pod or node.is_super_server):
            return node.internal_ip
        return f"{node.super_pod_id}_{node.server_index}"
    if level == 1:
        return str(node.super_pod_id) if node.is_pod or node.is_super_server else ""
    return CLUSTER_NAME if level in (2, 3) else ""


# --- Pods and servers (the mesh reading of the EIDs) ----------------------------------------------


def _mesh_device(parsed: Sequence[ParsedUrma], keep: Callable[[ParsedUrma], bool]) -> ParsedUrma | None:
    """`selectMeshDev`: the first non-UBoE device kept with the highest fe (ties: the first)."""
    best: ParsedUrma | None = None
    for device in parsed:
        if device.is_uboe or not keep(device):
            continue
        if device.fe > (best.fe if best is not None else -1):
            best = device
    return best


def _mesh_addrs(device: ParsedUrma | None) -> list[RankAddr]:
    """`buildRankListFromMesh`: each non-PG EID of the device, on its own die and port."""
    if device is None:
        return []
    return [
        RankAddr(ADDR_EID, e.eid, (f"{e.die}/{e.port}",), str(e.die))
        for e in device.eids
        if not e.is_pg and e.die >= 0 and e.port >= 0
    ]


def _level1_addrs(
    parsed: Sequence[ParsedUrma], ports_of: Mapping[tuple[int, int], tuple[int, ...]], *, skip_uboe: bool,
    plane: Callable[[ParsedUrma, tuple[int, ...]], str],
) -> list[RankAddr]:  # fmt: skip
    """`buildLevel1ParsedGeneric`: the PG EID of each device whose (die, fe) has ports, most ports
    first. The reference's sort.Slice is unstable (bug 4); ours keeps the devices' order on ties."""
    addrs: list[RankAddr] = []
    for device in parsed:
        if not device.pg_eid or (skip_uboe and device.is_uboe):
            continue
        ports = ports_of.get((device.die, device.fe), ())
        if ports:
            addrs.append(
                RankAddr(ADDR_EID, device.pg_eid, tuple(f"{device.die}/{p}" for p in ports), plane(device, ports))
            )
    return sorted(addrs, key=lambda a: -len(a.ports))


def _lower_half(node: NodeFacts, phy_id: int) -> bool:
    return phy_id % node.max_npu < node.max_npu // 2


def pod_level0(node: NodeFacts, phy_id: int, parsed: Sequence[ParsedUrma]) -> list[RankAddr]:
    """`buildPodLevel0Parsed`: the mesh device of this half's die (lower half: not die 1; upper: not die 0)."""
    excluded = 1 if _lower_half(node, phy_id) else 0
    return _mesh_addrs(_mesh_device(parsed, lambda d: d.die != excluded))


def pod_level1(node: NodeFacts, phy_id: int, parsed: Sequence[ParsedUrma]) -> list[RankAddr]:
    """`buildPodLevel1Parsed`: on boards 0x03 / 0x07, the PG EIDs of the (die, fe) of this half."""
    if node.main_board_id not in (ATLAS_950_1D_MAIN_BOARD, ATLAS_950_MAIN_BOARD):
        return []
    table = _POD_L1_LOWER if _lower_half(node, phy_id) else _POD_L1_UPPER
    return _level1_addrs(
        parsed, table, skip_uboe=False, plane=lambda _d, ports: "0" if len(ports) == _POD_PLANE_PORTS else "1"
    )


def server_level0(parsed: Sequence[ParsedUrma]) -> list[RankAddr]:
    """`buildServerLevel0Parsed`: the mesh device not on die 0."""
    return _mesh_addrs(_mesh_device(parsed, lambda d: d.die != 0))


def server_level1(node: NodeFacts, parsed: Sequence[ParsedUrma]) -> list[RankAddr]:
    """`buildServerLevel1Parsed`: on boards 0x25 / 0x27, the PG EID of the (0, 3) device, ports 1..8."""
    if node.main_board_id not in ATLAS_850_MAIN_BOARDS_WITH_L1:
        return []
    return _level1_addrs(parsed, _SERVER_L1, skip_uboe=True, plane=lambda d, _ports: str(d.die))


def server_level2(parsed: Sequence[ParsedUrma]) -> list[RankAddr]:
    """`buildServerLevel2Parsed`: the first UBoE device with an address."""
    for device in parsed:
        if device.is_uboe and device.ipv4:
            return [RankAddr(ADDR_IPV4, device.ipv4, (_SERVER_L2_UBOE_PORT,), DEFAULT_PLANE)]
    return []


# --- Atlas 350 cards (`getRankAddrListOriginal`, the card reading of the EIDs) --------------------


def card_level0(node: NodeFacts, phy_id: int, devices: Sequence[UrmaEids]) -> list[RankAddr]:
    """A card's level 0: every fe-0 EID used for die-to-die with a port up to 8, on its own die/port
    and the PEER2NET level-0 ports of this chip's topology edges on the same die. Without the topology
    file the reference drops the address (its port lookup fails)."""
    if node.topo_edges is None:
        return []
    addrs: list[RankAddr] = []
    for device in devices:
        for eid in device.eids:
            if card_fe(eid) != _CARD_L0_FE or not card_d2d(eid) or card_port(eid) > _CARD_MAX_PORT:
                continue
            die = card_die(eid)
            ports = [f"{die}/{card_port(eid)}"]
            seen: set[str] = set()  # as `savePortsResultByDieId`: only the edges' ports are de-duplicated
            for edge in node.topo_edges:
                if edge.net_layer != 0 or edge.local_a != phy_id or edge.link_type != PEER2NET:
                    continue
                for port in edge.local_a_ports:
                    parts = port.split("/")
                    if port not in seen and len(parts) == 2 and parts[0] == str(die):
                        ports.append(port)
                        seen.add(port)
            addrs.append(RankAddr(ADDR_EID, eid, tuple(ports), card_plane_id(eid)))
    return addrs


# --- Level 3: RoCE through the host's NICs ------------------------------------------------------


def _usable_ip(text: str, nic: str) -> str | None:
    """The address as Go's net.IP.String() writes it, None for loopback or link-local (unicast or
    multicast), which `getInterfaceIPs` skips. A CIDR suffix is allowed and dropped."""
    try:
        ip = ipaddress.ip_interface(text).ip
    except ValueError:
        raise ValueError(f"NIC {nic}: {text!r} is not an IP address") from None
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped  # Go keeps an IPv4-mapped address as IPv4
    if ip.is_loopback or ip.is_link_local:
        return None
    if isinstance(ip, ipaddress.IPv4Address):
        link_local_multicast = ip in ipaddress.IPv4Network("224.0.0.0/24")
    else:
        link_local_multicast = ip.packed[0] == 0xFF and ip.packed[1] & 0x0F == 0x02
    return None if link_local_multicast else str(ip)


def roce_level3(node: NodeFacts, phy_id: int) -> list[RankAddr]:
    """`getROCEAddrList`: the first usable address of the first mapped NIC that has one, on port "d2h";
    nothing without a mapping, for an NPU not in it, or when no mapped NIC has a usable address."""
    if node.npu_nics is None:
        return []
    for nic in node.npu_nics.get(phy_id % node.max_npu, ()):
        for text in node.nic_addresses.get(nic, ()):
            ip = _usable_ip(text, nic)
            if ip is not None:
                kind = ADDR_IPV4 if ipaddress.ip_address(ip).version == 4 else ADDR_IPV6
                return [RankAddr(kind, ip, ("d2h",), DEFAULT_PLANE)]
    return []


# --- The list --------------------------------------------------------------------------------------


def rank_addrs(node: NodeFacts, level: int, phy_id: int, devices: Sequence[UrmaEids]) -> list[RankAddr]:
    """`getRankAddrList`: one level's addresses."""
    if level == 3:
        return roce_level3(node, phy_id)
    if node.is_card:
        return card_level0(node, phy_id, devices) if level == 0 else []
    parsed = parse_urma_devices(devices)
    if not parsed:
        return []
    if node.is_pod:
        if level == 0:
            return pod_level0(node, phy_id, parsed)
        return pod_level1(node, phy_id, parsed) if level == 1 else []  # a pod's UBG level has no builder
    if level == 0:
        return server_level0(parsed)
    if level == 1:
        return server_level1(node, parsed)
    return server_level2(parsed) if level == 2 else []


def level_list(node: NodeFacts, phy_id: int, devices: Sequence[UrmaEids]) -> list[RankLevel]:
    """`getLevelList`: every level the node has and the chip has an address for."""
    levels: list[RankLevel] = []
    for level, key in enumerate(rank_level_keys(node)):
        if key == NO_LEVEL:
            continue
        addrs = rank_addrs(node, level, phy_id, devices)
        if addrs:
            net_type = NET_TYPE_TOPO if level == 0 else NET_TYPE_CLOS
            levels.append(RankLevel(level, key, net_instance_id(node, level), net_type, tuple(addrs)))
    return levels


# --- Rendering -------------------------------------------------------------------------------------


def render_level_list(levels: Sequence[RankLevel]) -> list[GoJSON]:
    """The list as gojson values in the Go structs' field order (RankLevel, LevelElement, RankAddrItem);
    a device's `levelList` is omitempty, so a caller leaves the key out when this is empty."""
    return [
        {
            "level": lv.level,
            "info": {
                lv.key: {
                    "net_layer": lv.level,
                    "net_instance_id": lv.net_instance_id,
                    "net_type": lv.net_type,
                    "net_attr": lv.net_attr,
                    "rank_addr_list": [
                        {"addr_type": a.addr_type, "addr": a.addr, "ports": list(a.ports), "plane_id": a.plane_id}
                        for a in lv.rank_addr_list
                    ],
                }
            },
        }
        for lv in levels
    ]


def level_list_json(levels: Sequence[RankLevel]) -> str:
    """The list exactly as Go's json.Marshal writes a `[]api.RankLevel` (an empty one is `[]`)."""
    return go_json(render_level_list(levels))
