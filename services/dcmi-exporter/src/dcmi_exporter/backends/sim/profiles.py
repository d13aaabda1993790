"""Simulated node layouts: which chips a node has and how DCMI numbers them.

DCMI addresses a chip by (card, device), the node by logic id and every report by phy id.
Real nodes number logic ids in card order while phy ids follow the board wiring, so the
profiles that model such boards use a fixed permutation: code that confuses the two ids
breaks visibly in the simulator instead of on a customer's node.

The 950 (A5) profiles answer as the library's v2 calls do (`dcmiv2_*`): a chip is its logic id
and belongs to no card (card and device id -1), and there is no product type, device IP, partner
card or vNPU call.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from ascend_common.chip_traits import Network, SuperPodFields, traits
from ascend_common.chips import A3_BOARD_IDS, ChipAddress, ChipFamily, detect_family
from ascend_common.products import ProductType

from dcmi_exporter.backends.dieid import DieType


@dataclass(frozen=True)
class Profile:
    name: str
    chip_name: str  # what dcmi_get_device_chip_info_v2 reports, e.g. "910B3"
    board_id: int
    product_type: str | None  # dcmi_get_product_type; None: the library has no such call (v2)
    cards: int  # physical cards; a v2 library reports none of them
    chips_per_card: int
    aicore: int
    hbm_mb: int
    logic_to_phy: tuple[int, ...]  # index = logic id
    power_idle_w: float
    power_max_w: float
    outband: bool  # out-of-band reset channel available (BMC path on 910B / A3 boards)
    # Phy-id groups that share an HCCS interconnect; informative (reset groups are computed by
    # ascend_common.reset_groups from the static data, not from this field).
    hccs_groups: tuple[tuple[int, ...], ...] = ()
    partner_cards: bool = False  # A3: cards are paired (dcmi_get_netdev_brother_device)
    switch_faults: bool = False  # A3: the node has L1/L2 switches that raise switch events
    # A3 / 950: the node's place in its super pod (dcmi_spod_info, the library's uint32 values);
    # None: the chips report no super pod.
    super_pod_id: int | None = None
    server_index: int | None = None
    # 950 only: dcmi_spod_info.chassis_id, super_pod_type (ProductType) and scale_type.
    rack_id: int | None = None
    super_pod_type: int | None = None
    scale_type: int | None = None
    main_board_id: int | None = None  # dcmi_get_mainboard_id; None: not supported
    dcmi_version: str = "24.1.rc2"
    chip_type: str = "Ascend"
    chip_version: str = "V1"
    hbm_frequency_mhz: int | None = 1600
    # 950: the URMA devices every chip lists (urma_devices); None: the chips list none (a read fails).
    urma: Literal["pod", "server"] | None = None

    def __post_init__(self) -> None:
        n = self.cards * self.chips_per_card
        if sorted(self.logic_to_phy) != list(range(n)):
            raise ValueError(f"profile {self.name}: logic_to_phy must be a permutation of 0..{n - 1}")
        family = detect_family(self.chip_name, self.board_id)  # raises for an unknown chip name
        pod = (self.super_pod_id, self.server_index)
        fields = traits(family).super_pod
        if pod != (None, None) and (None in pod or fields is SuperPodFields.NONE):
            raise ValueError(f"profile {self.name}: only an A3 or 950 profile has a super pod, and then both its ids")
        rack = (self.rack_id, self.super_pod_type, self.scale_type)
        if rack != (None, None, None) and (None in rack or None in pod or fields is not SuperPodFields.RACK):
            raise ValueError(f"profile {self.name}: only a 950 super pod has a rack, type and size, and then all three")
        if self.urma is not None and not traits(family).urma:
            raise ValueError(f"profile {self.name}: only a 950 chip has URMA devices")
        if self.library_v2 and self.product_type is not None:
            raise ValueError(f"profile {self.name}: the v2 library reports no product type")

    @property
    def family(self) -> ChipFamily:
        return detect_family(self.chip_name, self.board_id)

    @property
    def chip_count(self) -> int:
        return self.cards * self.chips_per_card

    @property
    def library_v2(self) -> bool:
        """The chips answer the library's v2 calls (the 950 generation)."""
        return traits(self.family).library_v2

    @property
    def has_network(self) -> bool:
        """910 and 950 chips have a network port (network health); 310 cards have none."""
        return traits(self.family).network is not Network.NONE

    def addresses(self) -> list[ChipAddress]:
        """Every chip, by logic id: logic ids follow card order, as the driver assigns them."""
        out: list[ChipAddress] = []
        for card in range(self.cards):
            for dev in range(self.chips_per_card):
                logic = card * self.chips_per_card + dev
                card_id, device_id = (NO_CARD, NO_CARD) if self.library_v2 else (card, dev)
                out.append(
                    ChipAddress(card_id=card_id, device_id=device_id, logic_id=logic, phy_id=self.logic_to_phy[logic])
                )
        return out

    def partner_card(self, card: int) -> int | None:
        return card ^ 1 if self.partner_cards else None

    def super_device_id(self, phy_id: int) -> int | None:
        """The chip's SDID: the server index in bits 22..31 and the device in bits 0..15, the A3
        encoding the reference's fault diagnosis decodes (faultdiag-online netfault_api.go); the
        950 profiles use it too (the reference decodes no 950 SDID), with server 0 outside a pod."""
        if self.server_index is None:
            return None
        server = 0 if self.server_index == UINT32_NONE else self.server_index
        return (server << SDID_SERVER_SHIFT) | phy_id

    def numa_node(self, phy_id: int) -> int:
        # Two-socket hosts: the first half of the chips hang off socket 0.
        return 0 if phy_id < self.chip_count // 2 else 1

    def die_id_words(self, phy_id: int, die_type: DieType) -> tuple[int, ...] | None:
        """The chip's die id (struct dcmi_die_id): a VDIE on every chip, a DDIE on the 950 alone (the
        v2 library's type); deterministic and distinct per chip. Phy 0 answers the issue-23 example
        [0x1, 0xABCD, 0, 0, 0x12], the C double (tests/cdouble) the same words."""
        if die_type is DieType.VDIE:
            return (0x1, 0xABCD, 0, 0, 0x12 + phy_id)
        if die_type is DieType.DDIE and self.library_v2:
            return (0x2, 0xDD1E, 0, 0, 0x12 + phy_id)
        return None

    def urma_devices(self, phy_id: int) -> list[list[str]] | None:
        """The chip's URMA devices, each its EIDs (32 lower-case hex digits), in index order.

        Every chip of a pod lists the issue's "Must show" 1D-pod devices: {fe 1, die 0: ports 1, 2
        and the PG EID}, {fe 2, die 0: port 5, PG}, {fe 2, die 1: port 7, PG}; a server's chip lists
        them too, plus a UBoE device whose IPv4 is 10.20.<phy>.1 (phy 0: the issue's UBoE example
        0000000000000ac00000000014000105). Byte 8, which no EID field reads, carries 0x80 | phy so
        that no two chips share an EID; phy 1 of the pod keeps the issue's EIDs verbatim (byte 8 zero).
        """
        if self.urma is None:
            return None
        mark = 0 if (self.urma == "pod" and phy_id == 1) else 0x80 | phy_id

        def eid(die: int, port: int, fe: int) -> str:
            return f"0000000000{die << 6 | port:02x}{fe:02x}00{mark:02x}{0:014x}"

        devices = [
            [eid(0, 1, 1), eid(0, 2, 1), eid(0, PG_PORT, 1)],
            [eid(0, 5, 2), eid(0, PG_PORT, 2)],
            [eid(1, 7, 2), eid(1, PG_PORT, 2)],
        ]
        if self.urma == "server":
            devices.append([f"0000000000000ac00000000014{phy_id:02x}0105"])
        return devices

    def device_ip(self, phy_id: int) -> str | None:
        """The RoCE IP of a 910 chip; the v2 library has no IP call."""
        return f"192.168.100.{phy_id + 1}" if traits(self.family).network is Network.ROCE else None


def _shifted(n: int, by: int) -> tuple[int, ...]:
    return tuple((i + by) % n for i in range(n))


def _identity(n: int) -> tuple[int, ...]:
    return tuple(range(n))


PG_PORT = 0x3F  # the port field of a PG EID (the reference's eid.go)
NO_CARD = -1  # the card and device id of a chip the v2 library reports
A3_BOARD_ID = min(A3_BOARD_IDS)
A900_A3_SUPER_POD_MAIN_BOARD_ID = 0x18  # the reference's A900A3SuperPodMainBoardId1
SDID_SERVER_SHIFT = 22
# The 950 profiles. Chip name and AI cores as the reference's tests have them ("Ascend950PR", 25
# AI cores); HBM as Huawei states it (950PR 128 GB, 950DT 144 GB). The servers' board and main
# board ids are arbitrary ones outside the A3 and Atlas 350 sets and the customised main boards.
A5_SERVER_BOARD_ID = 0x50
A5_SERVER_MAIN_BOARD_ID = 0x03  # the reference's device-discovery test's mockMainBoardId
# An Atlas 850 server's main board (the reference's Atlas850MainBoardID2): one with a UBoE device, so
# its bonding ports raise the UBoE codes and its lost UBoE events are looked for (issue 25's board 0x25).
A5_850_MAIN_BOARD_ID = 0x25
UINT32_NONE = 0xFFFFFFFF  # the library's "none" (the reference's InvalidSuperPodID / InvalidSuperPodSize)
A5_SUPER_POD_SIZE = 8192  # the reference's setSuperPodInfo test

PROFILES: dict[str, Profile] = {
    p.name: p
    for p in (
        Profile(
            name="910b-8",
            chip_name="910B3",
            board_id=0x22,  # an HCCS board (not in NO_HCCS_910B_BOARD_IDS): one reset group of 8
            product_type="Atlas 800T A2",
            cards=8,
            chips_per_card=1,
            aicore=20,
            hbm_mb=65536,
            logic_to_phy=_shifted(8, 4),
            power_idle_w=90.0,
            power_max_w=350.0,
            outband=True,
            hccs_groups=(tuple(range(8)),),
        ),
        Profile(
            # Atlas 300I A2 inference cards: 910B chips on PCIe boards without HCCS, so each chip is its
            # own reset group, and the node is labelled accelerator-type=card-910b-infer.
            name="910b-infer-4",
            chip_name="910B4",
            board_id=0x28,  # the 32 GB board (0x29 is the 64 GB one)
            product_type="Atlas 300I A2",
            cards=4,
            chips_per_card=1,
            aicore=20,
            hbm_mb=32768,
            logic_to_phy=_identity(4),
            power_idle_w=40.0,
            power_max_w=150.0,
            outband=False,
        ),
        Profile(
            name="910a-8",
            chip_name="910A",
            board_id=0x00,
            product_type="Atlas 800 (Model 9000)",
            cards=8,
            chips_per_card=1,
            aicore=32,
            hbm_mb=32768,
            logic_to_phy=_identity(8),
            power_idle_w=70.0,
            power_max_w=310.0,
            outband=False,
            hccs_groups=((0, 1, 2, 3), (4, 5, 6, 7)),
            hbm_frequency_mhz=1200,
        ),
        Profile(
            name="a3-16",
            chip_name="910B3",
            board_id=A3_BOARD_ID,
            product_type="Atlas 900 A3 SuperPoD",
            cards=8,
            chips_per_card=2,
            aicore=24,
            hbm_mb=65536,
            logic_to_phy=_shifted(16, 8),
            power_idle_w=90.0,
            power_max_w=350.0,
            outband=True,
            hccs_groups=(tuple(range(16)),),
            partner_cards=True,
            switch_faults=True,
            super_pod_id=3,
            server_index=1,
            main_board_id=A900_A3_SUPER_POD_MAIN_BOARD_ID,
        ),
        Profile(
            name="310p-duo-4",
            chip_name="310P3",
            board_id=0x67,
            product_type="Atlas 300I Duo",
            cards=2,
            chips_per_card=2,
            aicore=8,
            hbm_mb=24576,
            logic_to_phy=_identity(4),
            power_idle_w=20.0,
            power_max_w=70.0,
            outband=False,
            hbm_frequency_mhz=None,  # LPDDR: the driver reports no HBM frequency
        ),
        Profile(
            # An Atlas 950 super-pod server: a node of a 2D pod, in rack 3 of super pod 5.
            name="a5-superpod-8",
            chip_name="Ascend950DT",
            board_id=A5_SERVER_BOARD_ID,
            product_type=None,
            cards=8,
            chips_per_card=1,
            aicore=25,
            hbm_mb=147456,
            logic_to_phy=_shifted(8, 4),
            power_idle_w=100.0,
            power_max_w=600.0,
            outband=True,
            super_pod_id=5,
            server_index=1,
            rack_id=3,
            super_pod_type=ProductType.POD_2D,
            scale_type=A5_SUPER_POD_SIZE,
            main_board_id=A5_SERVER_MAIN_BOARD_ID,
            urma="pod",
        ),
        Profile(
            # An 8-chip 950 server outside any super pod (an Atlas 850, UBoE main board 0x25): the chips
            # answer "none" for pod, server, rack and size.
            name="a5-8",
            chip_name="Ascend950PR",
            board_id=A5_SERVER_BOARD_ID,
            product_type=None,
            cards=8,
            chips_per_card=1,
            aicore=25,
            hbm_mb=131072,
            logic_to_phy=_shifted(8, 2),
            power_idle_w=90.0,
            power_max_w=550.0,
            outband=True,
            super_pod_id=UINT32_NONE,
            server_index=UINT32_NONE,
            rack_id=UINT32_NONE,
            super_pod_type=ProductType.SERVER,
            scale_type=UINT32_NONE,
            main_board_id=A5_850_MAIN_BOARD_ID,
            urma="server",
        ),
        Profile(
            # Four Atlas 350 cards, each on its own (cardType 300I-Atlas350, product type 1P card).
            name="a5-atlas350-4",
            chip_name="Ascend950PR",
            board_id=0x1B,
            product_type=None,
            cards=4,
            chips_per_card=1,
            aicore=25,
            hbm_mb=131072,
            logic_to_phy=_identity(4),
            power_idle_w=60.0,
            power_max_w=300.0,
            outband=False,
            super_pod_id=UINT32_NONE,
            server_index=UINT32_NONE,
            rack_id=UINT32_NONE,
            super_pod_type=ProductType.CARD_1P,
            scale_type=UINT32_NONE,
            main_board_id=0x68,  # the 300I-Atlas350 main board
        ),
        Profile(
            # Four Atlas 350 cards on the 4P main board (cardType 300I-Atlas350-4p, product type 4P card).
            name="a5-atlas350-4p",
            chip_name="Ascend950PR",
            board_id=0x1C,
            product_type=None,
            cards=4,
            chips_per_card=1,
            aicore=25,
            hbm_mb=131072,
            logic_to_phy=_shifted(4, 1),
            power_idle_w=60.0,
            power_max_w=300.0,
            outband=False,
            super_pod_id=UINT32_NONE,
            server_index=UINT32_NONE,
            rack_id=UINT32_NONE,
            super_pod_type=ProductType.CARD_4P,
            scale_type=UINT32_NONE,
            main_board_id=0x6C,  # the 300I-Atlas350-4p main board
        ),
        Profile(
            name="310p-4",
            chip_name="310P3",
            board_id=0x64,
            product_type="Atlas 300I Pro",
            cards=4,
            chips_per_card=1,
            aicore=8,
            hbm_mb=24576,
            logic_to_phy=_identity(4),
            power_idle_w=20.0,
            power_max_w=70.0,
            outband=False,
            hbm_frequency_mhz=None,
        ),
    )
}


# The simulated host's NICs and their addresses (what getifaddrs lists on a real node), named as the
# reference's shipped npu-nic-mapping.json names them. ens1f0 has only a link-local address and
# ens1f2 has 10.0.0.7: the L3 example (mapping 1 -> [ens1f0, ens1f2] picks 10.0.0.7).
SIM_HOST_NICS: dict[str, list[str]] = {
    "lo": ["127.0.0.1", "::1"],
    "ens0f0": ["10.0.0.1", "fe80::1:1"],
    "ens0f1": ["10.0.0.2"],
    "ens0f2": ["10.0.0.3"],
    "ens0f3": ["10.0.0.4"],
    "ens1f0": ["fe80::1"],
    "ens1f1": ["10.0.0.6"],
    "ens1f2": ["10.0.0.7"],
    "ens1f3": ["fd00::8"],
}


def get_profile(name: str) -> Profile:
    try:
        return PROFILES[name]
    except KeyError:
        raise ValueError(f"unknown simulator profile {name!r}; known: {', '.join(sorted(PROFILES))}") from None
