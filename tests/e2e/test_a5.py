"""Drill: an Atlas 950 super-pod server (the a5-superpod-8 profile): a chip fault and its recovery,
a Volcano Allocate with its ascend-npu-configuration (each device's levelList too), and a hot reset
of one chip."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ascend_common.gojson import go_json
from ascend_common.products import HCCL_TOPO_FILES, ProductType
from ascend_device_plugin.levels.rank_levels import NodeFacts, RankLevel, level_list, level_list_json, render_level_list
from ascend_device_plugin.model.eid import UrmaEids

from tests.e2e.stack import node_stack
from tests.support.exporter import ExporterProc
from tests.support.fake_apiserver import FakeApiServer
from tests.support.waiting import until

GOLDEN = {
    v["name"]: v["go_json"]
    for v in map(
        json.loads,
        (Path(__file__).resolve().parents[1] / "golden" / "rank_levels_vectors.jsonl").read_text("utf-8").splitlines(),
    )
}
NPU = "huawei.com/npu"
CONFIG_KEY = "ascend.kubectl.kubernetes.io/ascend-npu-configuration"
RESTART_NPU = "8C1FA006"
TAKEN = "18446744073709551615"


def pod_annotations(api: FakeApiServer, name: str) -> dict[str, str]:
    pod = api.get_object("pods", name, "ml")
    return dict(pod["metadata"].get("annotations") or {}) if pod else {}


def expected_levels(chip: dict[str, Any], node: dict[str, Any]) -> list[RankLevel]:
    """The chip's levels as ranklevels builds them for the sim's EIDs: the profile's 2D pod (super
    pod 5, server 1, size 8192, main board 0x03) and the NICs the exporter serves."""
    facts = NodeFacts(
        super_pod_id=5, server_index=1, super_pod_type=ProductType.POD_2D, super_pod_size=8192, main_board_id=0x03,
        card_type=None, internal_ip="192.0.2.10", npu_nics={int(k): v for k, v in node["npu_nics"].items()},
        nic_addresses=node["nic_addresses"],
    )  # fmt: skip
    devices = [UrmaEids(d["index"], tuple(d["eids"])) for d in chip["static"]["urma"]]
    return level_list(facts, chip["phy_id"], devices)


async def test_a5_super_pod_node_fault_volcano_allocate_and_hot_reset(tmp_path: Path) -> None:
    chips: list[dict[str, Any]] = []
    chosen: list[str] = []
    node_info: dict[str, Any] = {}
    # The reference's mapping file: each NPU tries ens1f0 (the sim host's link-local only), then ens1f2.
    mapping = tmp_path / "npu-nic-mapping.json"
    mapping.write_text(json.dumps({"npuNics": [{"npuId": i, "nicNames": ["ens1f0", "ens1f2"]} for i in range(8)]}))

    async def schedule(api: FakeApiServer, exporter: ExporterProc) -> None:
        async with exporter.client() as client:
            chips.extend((await client.get("/v1/chips")).json()["chips"])
            node_info.update((await client.get("/v1/node")).json())
        chosen.extend(sorted((c["name"] for c in chips), key=lambda n: int(n.split("-")[1]))[:2])
        # Volcano's 950 plugin annotates the chosen chips by logic id (baseDeviceInfos' DeviceID).
        logic = {c["name"]: c["logic_id"] for c in chips}
        annotated = ",".join(f"npu-{logic[c]}" for c in chosen)
        api.add_pod("train-0", "ml", phase="Pending", requests={NPU: 2},
                    annotations={NPU: annotated, "predicate-time": "1000"})  # fmt: skip

    async with node_stack(
        profile="a5-superpod-8",
        resource=NPU,
        hot_reset=True,
        plugin_args=("--volcano-type",),
        prepare=schedule,
        exporter_args=("--npu-nic-mapping", str(mapping)),
    ) as s:
        names = set(s.names.values())
        assert names == {f"npu-{c['phy_id']}" for c in chips}
        info = s.device_info(NPU)
        assert info is not None and info.healthy == names
        await s.agree(set(), resource=NPU)

        # The node: its place in the 2D pod as labels and annotations.
        def node_meta() -> dict[str, Any]:
            node = s.api.get_object("nodes", "node-a")
            return dict((node or {}).get("metadata") or {})

        await until(lambda: "huawei.com/topotree.rackid" in (node_meta().get("labels") or {}), 10, "the node's labels")
        labels, annotations = node_meta()["labels"], node_meta()["annotations"]
        assert {k: v for k, v in labels.items() if k.startswith("huawei.com/topotree.")} == {
            "huawei.com/topotree.superpodid": "5",
            "huawei.com/topotree.rackid": "3",
            "huawei.com/topotree.serverid": "1",
        }
        assert (labels["servertype"], labels["accelerator"]) == ("npu-25", "huawei-npu")
        assert {k: annotations[k] for k in ("superPodID", "serverIndex", "serverType", "rackID")} == {
            "superPodID": "5", "serverIndex": "1", "serverType": "npu", "rackID": "3",
        }  # fmt: skip
        # Each chip's levelList, last in its baseDeviceInfos entry: levels 0 and 1 from its EIDs, level 3
        # the mapped NIC's address (ens1f2's 10.0.0.7: ens1f0 has only a link-local one).
        assert node_info["npu_nics"] == {str(i): ["ens1f0", "ens1f2"] for i in range(8)}
        base = json.loads(annotations["baseDeviceInfos"])
        by_name = {c["name"]: c for c in chips}
        for name, entry in base.items():
            assert list(entry) == ["DeviceID", "IP", "SuperDeviceID", "levelList"], entry
            levels = entry["levelList"]
            assert go_json(levels) == level_list_json(expected_levels(by_name[name], node_info))
            assert [lv["level"] for lv in levels] == [0, 1, 3]
            assert levels[2]["info"]["ROCE"]["rank_addr_list"][0]["addr"] == "10.0.0.7"
            assert levels[0]["info"]["UB"]["net_instance_id"] == "5_1"
        # Phy 1 has the URMA devices: its levels 0 and 1 are the Go golden `pod_1d_phy1` (a 1D pod's
        # server 2; this node is server 1 of a 2D pod, which has the same keys and builders), its level 3
        # the golden `device_with_levels`'s: byte for byte as Go encodes the reference's structs.
        golden_pod = GOLDEN["pod_1d_phy1"].replace('"net_instance_id":"5_2"', '"net_instance_id":"5_1"')
        golden_l3 = go_json(json.loads(GOLDEN["device_with_levels"])["levelList"][0])
        assert go_json(base["npu-1"]["levelList"]) == golden_pod[:-1] + "," + golden_l3 + "]"

        # A Volcano Allocate: the annotated chips pass through to the runtime, with the topology file
        # of the node's 2D pod; the pod gets the 950's rank configuration.
        kubelet_ids = sorted(names)[-2:]
        resp = await s.kubelet.allocate(NPU, [kubelet_ids])
        envs = dict(resp.container_responses[0].envs)
        assert envs == {
            "ASCEND_VISIBLE_DEVICES": ",".join(str(c["logic_id"]) for n in chosen for c in chips if c["name"] == n),
            "ASCEND_RUNTIME_OPTIONS": "",
            "HCCL_TOPO_FILE_PATH": HCCL_TOPO_FILES[ProductType.POD_2D],
        }
        assert pod_annotations(s.api, "train-0").get("predicate-time") == TAKEN
        await until(lambda: CONFIG_KEY in pod_annotations(s.api, "train-0"), 15, "the allocation report")
        ann = pod_annotations(s.api, "train-0")
        assert ann["huawei.com/AscendReal"] == ",".join(sorted(chosen))
        assert "ascend.kubectl.kubernetes.io/ascend-910-configuration" not in ann
        config = json.loads(ann[CONFIG_KEY])
        assert list(config) == [
            "pod_name", "server_id", "host_ip", "super_pod_id", "devices", "rack_id", "server_index", "server_ip",
        ]  # fmt: skip
        assert (config["super_pod_id"], config["rack_id"], config["server_index"]) == (5, 3, "1")
        assert config["devices"] == [
            {
                "device_id": c.split("-")[1], "device_ip": "", "super_device_id": str(1 << 22 | int(c.split("-")[1])),
                "levelList": json.loads(level_list_json(expected_levels(by_name[c], node_info))),
            }
            for c in chosen
        ]  # fmt: skip
        # Byte for byte: each device's levelList is the one ranklevels renders, after super_device_id.
        raw = ann[CONFIG_KEY]
        for c in chosen:
            device = {
                "device_id": c.split("-")[1], "device_ip": "", "super_device_id": str(1 << 22 | int(c.split("-")[1])),
                "levelList": render_level_list(expected_levels(by_name[c], node_info)),
            }  # fmt: skip
            assert go_json(device) in raw

        # A chip fault and its recovery: the kubelet, the verdicts and the ConfigMap (under
        # huawei.com/npu) agree each time.
        free_logic = next(lg for lg, n in s.names.items() if n not in chosen)
        victim = s.names[free_logic]
        await s.fault(free_logic, RESTART_NPU)
        await s.agree({victim}, resource=NPU)
        info = s.device_info(NPU)
        assert info is not None and victim in info.fault_chips
        cfg = json.loads(info.raw["DeviceInfoCfg"])
        assert (cfg["SuperPodID"], cfg["ServerIndex"], cfg["RackID"]) == (5, 1, 3), cfg  # a 2D super pod: RackID
        assert list(cfg)[-2:] == ["CheckCode", "RackID"]  # after CheckCode, as the Go struct writes it
        await s.fault(free_logic, RESTART_NPU, "recover")
        await s.agree(set(), resource=NPU)

        # A hot reset: a RestartNPU fault on a free chip resets that chip alone (a 950's reset ring
        # is one chip) once it has been idle for the idle period, and it comes back everywhere.
        await s.fault(free_logic, RESTART_NPU)
        await s.agree({victim}, resource=NPU)

        async def attempts() -> list[dict[str, Any]]:
            async with s.fm.client() as client:
                return list((await client.get("/v1/resets")).json()["attempts"])

        async def reset_done() -> list[dict[str, Any]] | None:
            done = [a for a in await attempts() if a["outcome"] == "succeeded"]
            return done or None

        [attempt] = await until(reset_done, 20, "the chip to be reset")
        assert attempt["chips"] == [victim], attempt
        await s.agree(set(), resource=NPU)
        assert s.kubelet.registration_count(NPU) == 1
