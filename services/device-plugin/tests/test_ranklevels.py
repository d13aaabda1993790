"""A 950 chip's rank levels (`levelList`): the key table, the builders and the rendering.

Ported from the reference's pkg/server/npu_base_v2_test.go and manager_v2_test.go (tests named
after theirs), plus issue 25's "Must show" cases, which are also checked byte for byte against
vectors a real Go toolchain writes from the reference's structs (tests/golden/rank_levels_vectors.go).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import re
from collections.abc import Mapping, Sequence
from pathlib import Path

import pytest
from ascend_common.gojson import go_json
from ascend_device_plugin.levels.rank_levels import (
    NO_LEVEL,
    ROCE,
    UB,
    UBG,
    UBOE,
    NodeFacts,
    RankAddr,
    RankLevel,
    TopoEdge,
    card_level0,
    level_list,
    level_list_json,
    net_instance_id,
    pod_level0,
    pod_level1,
    rank_level_keys,
    render_level_list,
    roce_level3,
    server_level0,
    server_level1,
    server_level2,
)
from ascend_device_plugin.model.eid import UrmaEids, parse_urma_devices

from tests.support.eids import POD_1D_DEVICES, mesh_eid
from tests.support.golang import run_go

GOLDEN = Path(__file__).resolve().parents[3] / "tests" / "golden"
PROGRAM = GOLDEN / "rank_levels_vectors.go"
VECTORS = GOLDEN / "rank_levels_vectors.jsonl"
GO_VERSION = GOLDEN / "rank_levels_vectors.goversion"
ALL = {v["name"]: v for v in (json.loads(line) for line in VECTORS.read_text(encoding="utf-8").splitlines())}

INVALID = 0xFFFFFFFF


def node(**changes: object) -> NodeFacts:
    """A plain 950 server (no super pod, main board 0x23) with `changes`."""
    base = NodeFacts(
        super_pod_id=None, server_index=None, super_pod_type=0, super_pod_size=None, main_board_id=0x23,
        card_type=None, internal_ip="10.0.0.5",
    )  # fmt: skip
    return dataclasses.replace(base, **changes)  # type: ignore[arg-type]


POD_1D = node(super_pod_id=5, server_index=2, super_pod_type=1, super_pod_size=64, main_board_id=0x03)


UBOE_EID = "0000000000000ac00000000014000105"
SERVER_DEVICES = (
    UrmaEids(0, (mesh_eid(1, 1, 3), mesh_eid(1, 0x3F, 3))),
    UrmaEids(1, (UBOE_EID,)),
)
NIC_MAPPING: Mapping[int, Sequence[str]] = {1: ("ens1f0", "ens1f2")}
NIC_ADDRESSES: Mapping[str, Sequence[str]] = {"ens1f0": ("fe80::1",), "ens1f2": ("10.0.0.7",)}


# --- Must show (issue 25) -----------------------------------------------------------------------


def test_must_show_1d_pod_phy1() -> None:
    levels = level_list(POD_1D, 1, POD_1D_DEVICES)
    assert [(lv.level, lv.key, lv.net_instance_id, lv.net_type) for lv in levels] == [
        (0, UB, "5_2", "TOPO_FILE_DESC"),
        (1, UB, "5", "CLOS"),
    ]  # no level 2: a pod's UBG level has no builder
    assert levels[0].rank_addr_list == (RankAddr("EID", "00000000000502000000000000000000", ("0/5",), "0"),)
    assert levels[1].rank_addr_list == (
        RankAddr("EID", mesh_eid(1, 0x3F, 2), ("1/0", "1/1", "1/2", "1/3", "1/5", "1/6"), "0"),
        RankAddr("EID", mesh_eid(0, 0x3F, 2), ("0/1", "0/2"), "1"),
    )
    assert level_list_json(levels) == ALL["pod_1d_phy1"]["go_json"]


def test_must_show_1d_pod_phy5_takes_die_1() -> None:
    levels = level_list(POD_1D, 5, POD_1D_DEVICES)
    assert levels[0].rank_addr_list == (RankAddr("EID", "00000000004702000000000000000000", ("1/7",), "1"),)
    assert level_list_json(levels) == ALL["pod_1d_phy5"]["go_json"]


def test_must_show_plain_server_and_level3() -> None:
    server = node(npu_nics=NIC_MAPPING, nic_addresses=NIC_ADDRESSES)
    levels = level_list(server, 9, SERVER_DEVICES)  # phy 9 of 8 chips: NPU 1
    assert levels[0].net_instance_id == "10.0.0.5"
    assert levels[1] == RankLevel(2, UBOE, "CLUSTER1", "CLOS", (RankAddr("IPV4", "10.20.0.1", ("1/8",), "CLUSTER"),))
    # ens1f0 has only a link-local address: the next NIC's is taken.
    assert levels[2] == RankLevel(3, ROCE, "CLUSTER1", "CLOS", (RankAddr("IPV4", "10.0.0.7", ("d2h",), "CLUSTER"),))
    assert level_list_json(levels) == ALL["plain_server"]["go_json"]


def test_must_show_a_1p_card_without_a_mapping_has_no_level_list() -> None:
    card = node(card_type="300I-Atlas350", main_board_id=0x68)
    assert level_list(card, 0, ()) == []
    # A device with no levels is written without the key (omitempty), as the Go struct is.
    device = {"device_id": "0", "device_ip": "", "super_device_id": "0"}
    assert go_json(device) == ALL["card_1p_no_mapping"]["go_json"]


def test_a_1p_card_with_an_ipv6_nic() -> None:
    card = node(card_type="300I-Atlas350", main_board_id=0x68, npu_nics={0: ("eth0",)},
                nic_addresses={"eth0": ("::1", "fe80::2", "2001:db8::7/64")})  # fmt: skip
    assert level_list_json(level_list(card, 0, ())) == ALL["card_1p_ipv6"]["go_json"]


def test_a_device_carries_its_level_list_as_the_go_struct() -> None:
    server = node(npu_nics=NIC_MAPPING, nic_addresses=NIC_ADDRESSES)
    levels = [lv for lv in level_list(server, 9, SERVER_DEVICES) if lv.level == 3]
    device = {"device_id": "9", "device_ip": "", "levelList": render_level_list(levels)}
    assert go_json(device) == ALL["device_with_levels"]["go_json"]


# --- npu_base_v2_test.go -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("facts", "keys"),
    [
        (node(super_pod_type=2, super_pod_id=0, server_index=0), (UB, UB, UBG, ROCE)),  # "02" 2D pod
        (node(super_pod_type=1, super_pod_id=0, server_index=0), (UB, UB, UBG, ROCE)),
        (node(super_pod_id=0, super_pod_size=0), (UB, UB, UBOE, ROCE)),  # "03" server in a super pod
        (node(super_pod_id=INVALID, super_pod_size=INVALID), (UB, NO_LEVEL, UBOE, ROCE)),  # "04"
        (node(), (UB, NO_LEVEL, UBOE, ROCE)),  # unread: no super pod (reference bug 2)
        (node(super_pod_id=3, super_pod_size=INVALID), (UB, NO_LEVEL, UBOE, ROCE)),
        (node(super_pod_type=3, super_pod_id=0, super_pod_size=0), (UB, NO_LEVEL, UBOE, ROCE)),  # 16P
        (node(super_pod_type=4, super_pod_id=0, super_pod_size=0), (UB, NO_LEVEL, UBOE, ROCE)),  # 32P
        (node(super_pod_type=None), (UB, NO_LEVEL, UBOE, ROCE)),
        (node(card_type="300I-Atlas350"), (NO_LEVEL, NO_LEVEL, NO_LEVEL, ROCE)),  # "05" 1P card
        (node(card_type="300I-Atlas350-4p"), (UB, NO_LEVEL, NO_LEVEL, ROCE)),  # "06" 4P card
    ],
)
def test_npu_base_method_get_rank_level_info_key_arr(facts: NodeFacts, keys: tuple[str, ...]) -> None:
    assert rank_level_keys(facts) == keys


@pytest.mark.parametrize(
    ("facts", "is_pod", "is_super_server"),
    [
        (node(super_pod_type=2, super_pod_id=0, server_index=0, super_pod_size=0), True, False),
        (node(super_pod_id=INVALID, super_pod_size=INVALID), False, False),
        (node(super_pod_id=0, super_pod_size=0), False, True),
    ],
)
def test_product_base_method_is_server_is_super_server_is_pod_scene(
    facts: NodeFacts, is_pod: bool, is_super_server: bool
) -> None:  # TestProductBaseMethodIsServer / IsSuperServer / IsPodScene
    assert (facts.is_pod, facts.is_super_server) == (is_pod, is_super_server)


@pytest.mark.parametrize(
    ("facts", "ids"),
    [
        (POD_1D, ("5_2", "5", "CLUSTER1", "CLUSTER1")),
        (node(super_pod_id=7, server_index=1, super_pod_size=16), ("7_1", "7", "CLUSTER1", "CLUSTER1")),
        (node(), ("10.0.0.5", "", "CLUSTER1", "CLUSTER1")),
        (node(card_type="300I-Atlas350-4p", super_pod_id=7, server_index=1, super_pod_size=16),
         ("10.0.0.5", "7", "CLUSTER1", "CLUSTER1")),
    ],
)  # fmt: skip
def test_get_id(facts: NodeFacts, ids: tuple[str, ...]) -> None:  # ProductBase.getID
    assert tuple(net_instance_id(facts, level) for level in range(4)) == ids
    assert net_instance_id(facts, 4) == ""


def test_a_pod_node_without_its_super_pod_id_is_refused() -> None:
    with pytest.raises(ValueError, match="needs its super-pod id and server index"):
        node(super_pod_type=1, super_pod_id=None, server_index=2)


def test_get_pod_level1_config_halves() -> None:  # TestGetPodLevel1Config, TestBuildPodLevel1Parsed
    pg = parse_urma_devices([UrmaEids(0, (mesh_eid(0, 0x3F, 2),))])
    board_07 = dataclasses.replace(POD_1D, main_board_id=0x07)
    assert pod_level1(board_07, 1, pg) == [RankAddr("EID", mesh_eid(0, 0x3F, 2), ("0/1", "0/2"), "1")]
    assert pod_level1(board_07, 12, pg)[0].ports == ("0/0", "0/1", "0/2", "0/3", "0/4", "0/5")  # 12 % 8: upper half
    assert pod_level1(dataclasses.replace(POD_1D, main_board_id=0x23), 1, pg) == []


def test_build_pod_level1_parsed_keeps_the_devices_order_on_ties() -> None:
    # Two PG EIDs with as many ports: the reference's sort.Slice may swap them (bug 4), ours does not.
    devices = [UrmaEids(0, (mesh_eid(0, 0x3F, 2),)), UrmaEids(1, (f"{mesh_eid(0, 0x3F, 2)[:-1]}1",))]
    assert [a.addr[-1] for a in pod_level1(POD_1D, 0, parse_urma_devices(devices))] == ["0", "1"]


def test_build_pod_level0_parsed() -> None:  # TestBuildPodLevel0Parsed
    parsed = parse_urma_devices([UrmaEids(0, (mesh_eid(0, 1, 3),))])
    assert pod_level0(POD_1D, 1, parsed) == [RankAddr("EID", mesh_eid(0, 1, 3), ("0/1",), "0")]
    assert pod_level0(POD_1D, 4, parsed) == []  # upper half: die 0 is not this half's


def test_select_mesh_dev_skips_uboe_and_takes_the_first_highest_fe() -> None:
    devices = [
        UrmaEids(0, (mesh_eid(0, 1, 4),)),
        UrmaEids(1, (f"{mesh_eid(0, 2, 9)[:14]}c{'0' * 17}",)),  # UBoE, fe 9: never a mesh device
        UrmaEids(2, (mesh_eid(0, 3, 4),)),
    ]
    assert pod_level0(POD_1D, 0, parse_urma_devices(devices))[0].ports == ("0/1",)


def test_build_server_level0_parsed() -> None:  # TestBuildServerLevel0Parsed, TestBuildServerRankAddrListParsed
    parsed = parse_urma_devices(
        [UrmaEids(0, (mesh_eid(1, 1, 3), mesh_eid(1, 0x3F, 3))), UrmaEids(1, (mesh_eid(0, 2, 5),))]
    )
    assert server_level0(parsed) == [RankAddr("EID", mesh_eid(1, 1, 3), ("1/1",), "1")]


def test_build_server_level1_parsed() -> None:  # TestBuildServerLevel1Parsed, TestGetServerLevel1Config
    parsed = parse_urma_devices([UrmaEids(0, (mesh_eid(0, 1, 3), mesh_eid(0, 0x3F, 3)))])
    ports = tuple(f"0/{p}" for p in range(1, 9))
    for board in (0x25, 0x27):
        assert server_level1(node(main_board_id=board), parsed) == [RankAddr("EID", mesh_eid(0, 0x3F, 3), ports, "0")]
    assert server_level1(node(main_board_id=0x23), parsed) == []


def test_build_server_level2_parsed() -> None:  # TestBuildServerLevel2Parsed
    assert server_level2(parse_urma_devices([UrmaEids(0, (UBOE_EID,))])) == [
        RankAddr("IPV4", "10.20.0.1", ("1/8",), "CLUSTER")
    ]
    link_local = f"{UBOE_EID[:12]}fe{UBOE_EID[14:]}"
    assert server_level2(parse_urma_devices([UrmaEids(0, (link_local,))])) == []


def test_a_super_server_has_levels_0_1_2() -> None:
    facts = node(super_pod_id=7, server_index=1, super_pod_size=16, main_board_id=0x25)
    devices = (*SERVER_DEVICES, UrmaEids(2, (mesh_eid(0, 1, 3), mesh_eid(0, 0x3F, 3))))
    levels = level_list(facts, 0, devices)
    assert [(lv.level, lv.key, lv.net_instance_id) for lv in levels] == [
        (0, UB, "7_1"), (1, UB, "7"), (2, UBOE, "CLUSTER1"),
    ]  # fmt: skip
    assert level_list_json(levels) == ALL["super_server"]["go_json"]


def test_get_ports_list_card_level0() -> None:  # TestGetPortsList "04", TestNpuBaseMethodGetEidListByFeIDAndRankLevel
    card = node(card_type="300I-Atlas350-4p", main_board_id=0x6C, topo_edges=(
        TopoEdge(1, ("0/1", "0/2", "1/3", "0/1"), 0, "PEER2NET"),
        TopoEdge(1, ("0/4",), 0, "PEER2PEER"),  # not PEER2NET
        TopoEdge(2, ("0/5",), 0, "PEER2NET"),  # another chip
        TopoEdge(1, ("0/6",), 1, "PEER2NET"),  # another layer
    ))  # fmt: skip
    usable = "0" * 30 + "0a"  # fe 0, die 0, port 1, for die-to-die; plane of byte 10: die 1
    not_d2d = "0" * 28 + "0808"
    pg_port = "0" * 30 + "51"  # port 10: over the limit of 8
    other_fe = "00000000000000200000000000000008"  # fe 1
    assert card_level0(card, 1, [UrmaEids(0, (usable, not_d2d, pg_port, other_fe))]) == [
        RankAddr("EID", usable, ("0/1", "0/1", "0/2"), "1")  # the EID's own port is not de-duplicated
    ]
    assert card_level0(dataclasses.replace(card, topo_edges=None), 1, [UrmaEids(0, (usable,))]) == []
    levels = level_list(card, 1, [UrmaEids(0, (usable,))])
    assert [(lv.level, lv.key, lv.net_instance_id, lv.net_type) for lv in levels] == [
        (0, UB, "10.0.0.5", "TOPO_FILE_DESC")
    ]


def test_a_4p_card_level_list() -> None:
    card = node(
        card_type="300I-Atlas350-4p", main_board_id=0x6C, internal_ip="10.0.0.9",
        topo_edges=(TopoEdge(1, ("0/2", "0/3", "1/3"), 0, "PEER2NET"),),
        npu_nics={1: ("eth0",)}, nic_addresses={"eth0": ("10.0.1.9",)},
    )  # fmt: skip
    levels = level_list(card, 1, [UrmaEids(0, ("0" * 30 + "0a",))])
    assert level_list_json(levels) == ALL["card_4p"]["go_json"]


# --- manager_v2_test.go ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("addresses", "expected"),
    [
        ({"eth0": ("192.168.1.10",)}, ("IPV4", "192.168.1.10")),  # first nic has IP
        ({"eth1": ("2001:db8::1",)}, ("IPV6", "2001:db8::1")),  # second nic when the first is empty
        ({"eth0": ("127.0.0.1", "169.254.1.1", "::1", "fe80::1", "ff02::1", "224.0.0.5"), "eth1": ("10.1.1.1",)},
         ("IPV4", "10.1.1.1")),  # loopback and link-local skipped
        ({"eth0": ("2001:0db8:85a3:0000:0000:8a2e:0370:7334",)}, ("IPV6", "2001:db8:85a3::8a2e:370:7334")),
        ({"eth0": ("::ffff:10.2.3.4",)}, ("IPV4", "10.2.3.4")),  # Go writes a mapped address as IPv4
        ({"eth0": ("10.3.0.1/24",)}, ("IPV4", "10.3.0.1")),
        ({"eth0": ("224.0.1.1",)}, ("IPV4", "224.0.1.1")),  # multicast past the link-local block
        ({}, None),  # all nics empty
    ],
)  # fmt: skip
def test_get_interface_ips_by_priority(
    addresses: Mapping[str, Sequence[str]], expected: tuple[str, str] | None
) -> None:
    facts = node(npu_nics={0: ("eth0", "eth1")}, nic_addresses=addresses)
    got = roce_level3(facts, 8)
    assert got == ([] if expected is None else [RankAddr(expected[0], expected[1], ("d2h",), "CLUSTER")])


def test_get_npu_to_nic_names() -> None:  # TestGetNpuToNicNames_*, TestGetROCEAddrList_*
    addresses = {"eth0": ("10.0.0.1",), "eth2": ("10.0.0.2",)}
    assert roce_level3(node(npu_nics={1: ("eth2",)}, nic_addresses=addresses), 1)[0].addr == "10.0.0.2"
    assert roce_level3(node(npu_nics={0: ("eth0",)}, nic_addresses=addresses), 2) == []  # NPU not found
    assert roce_level3(node(npu_nics=None, nic_addresses=addresses), 0) == []  # no mapping file


def test_a_nic_address_that_is_not_an_ip_is_refused_naming_the_nic() -> None:
    with pytest.raises(ValueError, match="NIC eth0: 'bogus'"):
        roce_level3(node(npu_nics={0: ("eth0",)}, nic_addresses={"eth0": ("bogus",)}), 0)


def test_npu_base_method_get_net_type_for_level() -> None:  # TestNpuBaseMethodGetNetTypeForLevel
    levels = level_list(POD_1D, 1, POD_1D_DEVICES)
    assert [lv.net_type for lv in levels] == ["TOPO_FILE_DESC", "CLOS"]


def test_a_chip_without_urma_devices_has_only_level3() -> None:
    server = node(npu_nics=NIC_MAPPING, nic_addresses=NIC_ADDRESSES)
    assert [lv.level for lv in level_list(server, 1, ())] == [3]
    assert level_list(node(), 1, ()) == []
    assert level_list_json([]) == "[]"


# --- The golden vectors --------------------------------------------------------------------------


def test_vector_file_is_well_formed() -> None:
    assert len(ALL) == len(VECTORS.read_text(encoding="utf-8").splitlines())
    for vector in ALL.values():
        assert set(vector) == {"name", "kind", "go_json", "sha256"} and vector["kind"] in {"level_list", "device"}
        assert hashlib.sha256(vector["go_json"].encode("utf-8")).hexdigest() == vector["sha256"]
    assert re.match(r"go version go1\.\d+", GO_VERSION.read_text(encoding="utf-8"))


def test_every_vector_is_rebuilt_by_a_test() -> None:
    source = Path(__file__).read_text(encoding="utf-8")
    assert all(f'ALL["{name}"]' in source for name in ALL)


def test_committed_vectors_are_current(tmp_path: Path) -> None:
    assert run_go(PROGRAM, tmp_path) == VECTORS.read_text(encoding="utf-8"), (
        "tests/golden/rank_levels_vectors.jsonl is stale: regenerate it with the command in rank_levels_vectors.go"
    )


# --- manager_v2_test.go: getIPAddressType, getInterfaceIPs ----------------------------------------
# Ours has no separate typing function: roce_level3 types the address it keeps, and drops the
# loopback and link-local ones first, as getInterfaceIPs does before getIPAddressType is reached.


@pytest.mark.parametrize(
    ("address", "kind", "text"),
    [
        ("192.168.1.10", "IPV4", "192.168.1.10"),  # standard IPv4
        ("2001:db8::1", "IPV6", "2001:db8::1"),  # standard IPv6
        ("2001:0db8:85a3:0000:0000:8a2e:0370:7334", "IPV6", "2001:db8:85a3::8a2e:370:7334"),  # full IPv6
    ],
)
def test_get_ip_address_type(address: str, kind: str, text: str) -> None:
    # TestGetIPAddressType_ShouldReturnIPv4_WhenIPv4Address, ..._ShouldReturnIPv6_WhenIPv6Address
    facts = node(npu_nics={0: ("eth0",)}, nic_addresses={"eth0": (address,)})
    assert roce_level3(facts, 0) == [RankAddr(kind, text, ("d2h",), "CLUSTER")]


@pytest.mark.parametrize(
    ("nic", "addresses", "expected"),
    [
        ("nonexistent0", {"eth0": ("10.0.0.1",)}, None),  # non-existent interface
        ("", {"eth0": ("10.0.0.1",)}, None),  # empty interface name
        ("eth0", {"eth0": ("10.0.0.1",)}, "10.0.0.1"),  # only IPv4
        ("eth0", {"eth0": ("2001:db8::1",)}, "2001:db8::1"),  # only IPv6
        ("eth0", {"eth0": ("127.0.0.1", "10.0.0.1")}, "10.0.0.1"),  # skip loopback
        ("eth0", {"eth0": ("169.254.0.9", "10.0.0.1")}, "10.0.0.1"),  # skip link-local
    ],
)
def test_get_interface_ips(nic: str, addresses: Mapping[str, Sequence[str]], expected: str | None) -> None:
    # TestGetInterfaceIPs_ShouldReturnEmpty_WhenInterfaceNotFound, ..._ShouldReturnValidIPs_WhenInterfaceExists
    got = roce_level3(node(npu_nics={0: (nic,)}, nic_addresses=addresses), 0)
    assert [a.addr for a in got] == ([] if expected is None else [expected])
