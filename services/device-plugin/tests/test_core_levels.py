"""Each 950 chip's `levelList` (issue 25 part A) as the plugin publishes it: the node's facts from
the inventory and the exporter's NodeInfo, the list in `baseDeviceInfos` (NpuBaseInfo's last field)
and in the `ascend-npu-configuration` devices (proto.go Device's last field), omitted when empty;
and the shell that caches them per inventory and reads a card's topology file."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from types import MappingProxyType

import pytest
from ascend_common.chips import ChipFamily, ResourceType
from ascend_common.gojson import go_json
from ascend_common.schemas.exporter import NodeInfo
from ascend_common.superpod import NO_SUPER_POD, SuperPod
from ascend_device_plugin.allocation.annotations import ConfigDevice, config_devices, device_configuration
from ascend_device_plugin.inventory.snapshot import Inventory
from ascend_device_plugin.levels.level_lists import chip_levels, node_facts, rendered
from ascend_device_plugin.levels.level_source import LevelSource
from ascend_device_plugin.levels.rank_levels import level_list_json, render_level_list
from ascend_device_plugin.model.chip_pod import ChipInfo
from ascend_device_plugin.model.eid import UrmaEids
from ascend_device_plugin.node_labels import node_annotations

from tests.support.eids import POD_1D_DEVICES

GOLDEN = Path(__file__).resolve().parents[3] / "tests" / "golden"
LEVELS = {
    v["name"]: v
    for v in (json.loads(line) for line in (GOLDEN / "rank_levels_vectors.jsonl").read_text("utf-8").splitlines())
}


POD_1D = SuperPod(super_pod_id=5, server_index=2, rack_id=0, super_pod_type=1, scale_type=64)
POD_MAIN_BOARD = 0x03


def chip(
    logic: int, phy: int, *, family: ChipFamily = ChipFamily.ASCEND950, urma: tuple[UrmaEids, ...] = POD_1D_DEVICES
) -> ChipInfo:
    return ChipInfo(
        logic_id=logic, phy_id=phy, card_id=-1, name=f"npu-{phy}", rtype=ResourceType.NPU, family=family,
        aicore=25, healthy=True, board_id=0x1A, urma=urma,
    )  # fmt: skip


def inventory(chips: list[ChipInfo], pod: SuperPod = POD_1D, main_board: int | None = POD_MAIN_BOARD) -> Inventory:
    return Inventory(
        ResourceType.NPU, MappingProxyType({c.phy_id: c for c in chips}), MappingProxyType({}),
        MappingProxyType({}), pod, main_board,
    )  # fmt: skip


# --- levels/level_lists ----------------------------------------------------------------------------------


def test_node_facts_take_the_super_pod_and_leave_unread_values_none() -> None:
    facts = node_facts([chip(0, 1)], POD_1D, POD_MAIN_BOARD, "10.0.0.5", npu_nics={1: ["eth0"]})
    assert (facts.super_pod_id, facts.server_index, facts.super_pod_type, facts.super_pod_size) == (5, 2, 1, 64)
    assert (facts.main_board_id, facts.card_type, facts.internal_ip) == (POD_MAIN_BOARD, None, "10.0.0.5")
    assert facts.npu_nics == {1: ["eth0"]} and facts.nic_addresses == {} and facts.topo_edges is None
    plain = node_facts([chip(0, 1)], NO_SUPER_POD, None, "10.0.0.5")
    assert (plain.super_pod_id, plain.server_index, plain.super_pod_type, plain.super_pod_size) == (None,) * 4


def test_node_facts_name_the_card_type_of_an_atlas_350_card() -> None:
    assert node_facts([chip(0, 0)], NO_SUPER_POD, 0x68, "10.0.0.5").card_type == "300I-Atlas350"


def test_a_pod_node_without_its_super_pod_id_is_refused() -> None:
    with pytest.raises(ValueError, match="super-pod id and server index"):
        node_facts([chip(0, 1)], SuperPod(super_pod_type=1), POD_MAIN_BOARD, "10.0.0.5")


def test_chip_levels_are_the_golden_lists_for_950_chips_only() -> None:
    facts = node_facts([], POD_1D, POD_MAIN_BOARD, "10.0.0.5")
    chips = [chip(0, 1), chip(1, 5), chip(2, 3, urma=()), chip(3, 7, family=ChipFamily.ASCEND910A3)]
    levels = chip_levels(chips, facts)
    assert sorted(levels) == [1, 5]  # phy 3 has no URMA device (no level), phy 7 is no 950
    assert level_list_json(levels[1]) == LEVELS["pod_1d_phy1"]["go_json"]
    assert level_list_json(levels[5]) == LEVELS["pod_1d_phy5"]["go_json"]
    assert rendered(levels, 3) is None


# --- The two renderings ---------------------------------------------------------------------------


def test_base_device_infos_end_with_the_level_list_and_omit_it_when_empty() -> None:
    facts = node_facts([], POD_1D, POD_MAIN_BOARD, "")
    chips = [chip(0, 1), chip(1, 3, urma=())]
    annotations = node_annotations(chips, POD_1D, POD_MAIN_BOARD, levels=chip_levels(chips, facts))
    expected = (
        '{"npu-1":{"DeviceID":0,"IP":"","SuperDeviceID":0,"levelList":' + LEVELS["pod_1d_phy1"]["go_json"] + "},"
        '"npu-3":{"DeviceID":1,"IP":"","SuperDeviceID":0}}'
    )
    assert annotations["baseDeviceInfos"] == expected
    # Without levels (an older caller) the infos are as before.
    assert '"levelList"' not in node_annotations(chips, POD_1D, POD_MAIN_BOARD)["baseDeviceInfos"]


def test_configuration_devices_end_with_the_level_list_and_omit_it_when_empty() -> None:
    chips = [chip(0, 1), chip(1, 3, urma=())]
    levels = chip_levels(chips, node_facts([], POD_1D, POD_MAIN_BOARD, ""))
    devices, vnpu = config_devices(["npu-3", "npu-1"], {c.phy_id: c for c in chips}, levels)
    assert devices[1] == ConfigDevice(1, "", 0, render_level_list(levels[1]))
    assert devices[0].level_list is None
    value = device_configuration("p", "u", "10.0.0.5", devices, vnpu=vnpu, super_pod_id=5, server_index="2")
    assert (
        '"devices":[{"device_id":"1","device_ip":"","super_device_id":"0","levelList":'
        + LEVELS["pod_1d_phy1"]["go_json"]
        + '},{"device_id":"3","device_ip":"","super_device_id":"0"}]'
    ) in value


def test_a_device_with_levels_is_the_go_struct_byte_for_byte() -> None:
    """The golden `device_with_levels` (proto.go Device: no super_device_id, then levelList)."""
    level3 = json.loads(LEVELS["device_with_levels"]["go_json"])["levelList"]
    value = device_configuration("p", "u", "", [ConfigDevice(9, "", None, level3)], vnpu=False)
    assert '"devices":[' + LEVELS["device_with_levels"]["go_json"] + "]" in value
    assert go_json(json.loads(value)["devices"][0]) == LEVELS["device_with_levels"]["go_json"]


def test_a_vnpu_carries_no_level_list() -> None:
    chips = {1: chip(0, 1)}
    levels = chip_levels(chips.values(), node_facts([], POD_1D, POD_MAIN_BOARD, ""))
    devices, vnpu = config_devices(["npu-4c-100-1"], chips, levels)
    assert vnpu and devices[0].level_list is None
    assert "levelList" not in device_configuration("p", "u", "", devices, vnpu=vnpu)


# --- levels/level_source.LevelSource ------------------------------------------------------------------


def node_info(**update: object) -> NodeInfo:
    base = NodeInfo(
        backend="sim", profile=None, run_id="r", dcmi_version={"status": "ok", "value": "1"},
        card_count=0, chip_count=0, chips_by_state={}, subscription="live",
        poll_period_s=1.0, started_at=0.0, updated_at=0.0, last_event_id=None,
    )  # fmt: skip
    return base.model_copy(update=update)


def test_level_source_builds_level_3_from_node_info_and_caches_per_inventory() -> None:
    info = node_info(npu_nics={1: ["ens1f2"]}, nic_addresses={"ens1f2": ["10.0.0.7"]})
    source = LevelSource("node-a", lambda: info, lambda: "10.0.0.5")
    inv = inventory([chip(0, 1)])
    first = source.levels(inv)
    assert [lv.level for lv in first[1]] == [0, 1, 3]
    assert first[1][2].rank_addr_list[0].addr == "10.0.0.7"
    assert source.levels(inv) is first  # same inputs: not rebuilt
    info = node_info(npu_nics={1: ["ens1f2"]}, nic_addresses={"ens1f2": ["10.0.0.8"]})
    assert source.levels(inv)[1][2].rank_addr_list[0].addr == "10.0.0.8"  # a changed input: rebuilt


def test_level_source_logs_a_refused_pod_node_once_naming_it(caplog: pytest.LogCaptureFixture) -> None:
    source = LevelSource("node-a", lambda: None, lambda: "10.0.0.5")
    broken = SuperPod(super_pod_type=1)
    for _ in range(3):
        assert source.levels(inventory([chip(0, 1)], broken)) == {}
    refused = [r for r in caplog.records if r.getMessage() == "no levelList for the node's chips"]
    assert len(refused) == 1 and refused[0].levelno == 40 and vars(refused[0])["node"] == "node-a"
    assert source.levels(inventory([chip(0, 1)])) != {}  # the facts are read: levels again


def test_level_source_refuses_a_nic_address_that_is_no_ip(caplog: pytest.LogCaptureFixture) -> None:
    info = node_info(npu_nics={1: ["eth0"]}, nic_addresses={"eth0": ["not-an-ip"]})
    source = LevelSource("node-a", lambda: info, lambda: "10.0.0.5")
    assert source.levels(inventory([chip(0, 1)])) == {}
    [record] = [r for r in caplog.records if r.getMessage() == "no levelList for the node's chips"]
    assert vars(record)["node"] == "node-a" and "eth0" in vars(record)["error"]


CARD_EID = "0" * 30 + "0a"  # fe 0, die 0, port 1, for die-to-die (the golden `card_4p`'s)


def test_level_source_reads_a_card_topology_in_a_thread_and_logs_an_unreadable_one_once(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    card = inventory([chip(0, 1, urma=(UrmaEids(0, (CARD_EID,)),))], NO_SUPER_POD, 0x6C)  # a 4P card
    source = LevelSource("node-a", lambda: None, lambda: "10.0.0.9", source_root=tmp_path)
    asyncio.run(source.load_topology(card))
    asyncio.run(source.load_topology(card))
    errors = [r for r in caplog.records if r.getMessage().startswith("topology file unreadable")]
    assert len(errors) == 1 and vars(errors[0])["node"] == "node-a"
    assert vars(errors[0])["path"].endswith("/usr/local/Ascend/driver/topo/950/atlas_350_3.json")
    assert source.levels(card) == {}  # no edges: the card's level 0 is dropped, as the reference's

    topo = tmp_path / "usr/local/Ascend/driver/topo/950/atlas_350_3.json"
    topo.parent.mkdir(parents=True)
    edge = {"local_a": 1, "local_a_ports": ["0/2", "0/3", "1/3"], "net_layer": 0, "link_type": "PEER2NET"}
    topo.write_text(json.dumps({"version": "1", "edge_list": [edge]}))
    asyncio.run(source.load_topology(card))
    levels = source.levels(card)
    assert [(lv.level, lv.net_instance_id) for lv in levels[1]] == [(0, "10.0.0.9")]
    assert levels[1][0].rank_addr_list[0].ports == ("0/1", "0/2", "0/3")
    # The golden 4P card's level 0 (its level 3 needs a NIC mapping, which this node has none of).
    assert render_level_list(levels[1]) == json.loads(LEVELS["card_4p"]["go_json"])[:1]


def test_a_node_without_a_card_reads_no_topology(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    source = LevelSource("node-a", lambda: None, lambda: "", source_root=tmp_path)
    asyncio.run(source.load_topology(inventory([chip(0, 1)])))
    assert not caplog.records
