"""The node's baseDeviceInfos levelList follows its inputs without a chip change (fake API server):
the exporter's NodeInfo (NIC addresses: the follower's on_node calls `relabel`) and the Node's
InternalIP (seen by the watch of its Node, kube.node) re-render it, and it is written only when its bytes
differ."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from ascend_common.faults import default_fault_code_table
from ascend_common.schemas.exporter import Chip, NodeInfo, UrmaDevice
from ascend_device_plugin.inventory.views import ViewBoard
from ascend_device_plugin.kube.connection import ApiConnection
from ascend_device_plugin.kube.edge import KubeEdge
from ascend_device_plugin.kube.feed import PodFeed
from ascend_device_plugin.kube.labels import NodeLabels
from ascend_device_plugin.kube.node import NodeFollower
from ascend_device_plugin.kube.pods import NodePods
from ascend_device_plugin.kube.retire import OldResources
from ascend_device_plugin.levels.level_source import LevelSource
from ascend_device_plugin.metrics import PluginMetrics
from ascend_device_plugin.resources.manager import ResourceManager

from tests.support.chips import node_950
from tests.support.eids import mesh_eid
from tests.support.fake_apiserver import FakeApiServer, write_kubeconfig
from tests.support.fake_kubelet import short_tmp_dir
from tests.support.waiting import until

NODE = "node-a"
NODE_PATCH = f"/api/v1/nodes/{NODE}"


# A plain 950 server (no super pod): level 0 is named by the Node's InternalIP (die 1's device).
SERVER_URMA = [UrmaDevice(index=0, eids=[mesh_eid(1, 4, 2), mesh_eid(1, 0x3F, 2)])]


def server_chips() -> dict[int, Chip]:
    chips = node_950(4, super_pod_type=None)
    return {
        k: c.model_copy(update={"static": c.static.model_copy(update={"urma": SERVER_URMA})}) for k, c in chips.items()
    }


def node_info(address: str) -> NodeInfo:
    return NodeInfo(
        backend="sim", profile=None, run_id="r", dcmi_version={"status": "ok", "value": "1"},
        card_count=0, chip_count=4, chips_by_state={}, subscription="live", poll_period_s=1.0,
        started_at=0.0, updated_at=0.0, last_event_id=None,
        npu_nics={i: ["ens1f2"] for i in range(4)}, nic_addresses={"ens1f2": [address]},
    )  # fmt: skip


@dataclass
class Setup:
    server: FakeApiServer
    edge: KubeEdge
    manager: ResourceManager
    info: list[NodeInfo]  # the follower's node, as LevelSource reads it

    def levels(self, phy: int = 1) -> list[dict[str, Any]]:
        node = self.server.get_object("nodes", NODE) or {}
        raw = (node.get("metadata", {}).get("annotations") or {}).get("baseDeviceInfos")
        if raw is None:
            return []
        return list(json.loads(raw)[f"npu-{phy}"].get("levelList") or [])

    def level0_id(self) -> str | None:
        found = [lv["info"]["UB"]["net_instance_id"] for lv in self.levels() if lv["level"] == 0]
        return found[0] if found else None

    def level3_addr(self) -> str | None:
        found = [lv["info"]["ROCE"]["rank_addr_list"][0]["addr"] for lv in self.levels() if lv["level"] == 3]
        return found[0] if found else None

    def patches(self) -> int:
        return self.server.count("PATCH", NODE_PATCH) - self.server.count("PATCH", NODE_PATCH + "/status")


@pytest.fixture
async def setup() -> AsyncIterator[Setup]:
    with FakeApiServer() as server, short_tmp_dir("lv-") as tmp:
        server.add_node(NODE, internal_ip="10.1.2.3")
        # Wired as DevicePlugin.build wires them.
        connection = ApiConnection(write_kubeconfig(Path(tmp) / "kc", server.url))
        retire = OldResources(connection, NODE)
        node = NodeFollower(NODE, on_change=[lambda old, new: labels.node_changed(old, new), retire.node_changed])
        info = [node_info("10.0.0.7")]
        labels = NodeLabels(connection, node, LevelSource(NODE, lambda: info[0], node.internal_ip))
        edge = KubeEdge(connection, PodFeed(NodePods(), NODE, lambda: None), node, labels, retire)
        manager = ResourceManager(ViewBoard(), default_fault_code_table(), PluginMetrics())
        manager.set_chips(server_chips())
        await edge.start()
        try:
            yield Setup(server, edge, manager, info)
        finally:
            await edge.stop()


async def test_a_nic_address_change_rewrites_the_level_list_once(setup: Setup) -> None:
    s = setup
    s.edge.chips_changed(s.manager, "25.0")
    await until(lambda: s.level3_addr() == "10.0.0.7", 5.0, "the first levelList")
    assert s.level0_id() == "10.1.2.3"
    written = s.patches()

    s.edge.labels.relabel()  # NodeInfo re-read, nothing in it changed: the same bytes, no write
    s.info[0] = node_info("10.0.0.7")
    s.edge.labels.relabel()
    await until(lambda: s.edge.labels.settled(), 5.0, "the render")
    assert s.patches() == written

    s.info[0] = node_info("10.0.0.8")
    s.edge.labels.relabel()
    await until(lambda: s.level3_addr() == "10.0.0.8", 5.0, "level 3 with the new NIC address")
    assert s.patches() == written + 1
    assert s.level0_id() == "10.1.2.3"


async def test_a_change_asked_while_a_write_runs_is_rendered_after_it(setup: Setup) -> None:
    s = setup
    s.server.delay(0.5)  # the first write's PATCH is still under way when the address changes
    s.edge.chips_changed(s.manager, "25.0")
    await until(lambda: s.server.count("PATCH", NODE_PATCH) >= 1, 5.0, "the first write under way")
    assert s.level3_addr() is None
    s.info[0] = node_info("10.0.0.9")
    s.edge.labels.relabel()
    await until(lambda: s.level3_addr() == "10.0.0.7", 5.0, "the first write's render")
    s.server.delay(0)
    await until(lambda: s.level3_addr() == "10.0.0.9", 5.0, "the later address written after it")


async def test_an_internal_ip_change_rewrites_level_0(setup: Setup) -> None:
    s = setup
    s.edge.chips_changed(s.manager, "25.0")
    await until(lambda: s.level0_id() == "10.1.2.3", 5.0, "the first levelList")
    written = s.patches()
    s.server.modify(
        "nodes", NODE, mutate=lambda n: n["status"].update(addresses=[{"type": "InternalIP", "address": "10.9.9.9"}])
    )
    await until(lambda: s.level0_id() == "10.9.9.9", 5.0, "level 0 named by the new InternalIP")
    assert s.level3_addr() == "10.0.0.7"
    await until(lambda: s.edge.labels.settled(), 5.0, "the render")
    assert s.patches() == written + 1


async def test_the_node_is_watched_by_name_not_read_on_a_timer(setup: Setup) -> None:
    s = setup
    s.edge.chips_changed(s.manager, "25.0")
    await until(lambda: s.level0_id() == "10.1.2.3", 5.0, "the first levelList")
    await until(lambda: s.server.live_watches == 2, 5.0, "the pod and node watches")
    mark = len(s.server.requests)
    # The plugin used to read its Node every 60 s; nothing in it changes here, so nothing is asked.
    await asyncio.sleep(2.0)
    assert s.server.verb_counts(since=mark) == {}
    node_requests = [r for r in s.server.requests if r.path == "/api/v1/nodes"]
    assert {r.verb for r in node_requests} == {"LIST", "WATCH"}
    assert {r.query["fieldSelector"] for r in node_requests} == {f"metadata.name={NODE}"}
    # The one GET of the Node: a 950 node's once-only RemoveOldResource (from the watch cache, rv 0).
    reads = [r for r in s.server.requests if r.method == "GET" and r.path == NODE_PATCH]
    assert [r.query for r in reads] == [{"resourceVersion": "0"}]
