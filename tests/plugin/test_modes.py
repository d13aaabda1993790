"""Static vNPU resources, 310P sharing, the exporter's grace period, metrics, path checks."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import httpx
import pytest
from ascend_device_plugin.kubelet.registrar import UnsafePath, check_path
from prometheus_client.parser import text_string_to_metric_families

from tests.plugin.conftest import Node, close_node, make_node
from tests.plugin.test_kubelet_flow import ALL, R
from tests.support.exporter import auth, start_exporter
from tests.support.plugin import wait_ready


async def test_static_vnpu_resource_is_served_with_virtual_runtime(workdir: Path) -> None:
    # The administrator makes a vNPU (preset mode); the plugin serves it as its own resource.
    n = await make_node(workdir)
    try:
        transport = httpx.AsyncHTTPTransport(uds=str(n.exporter.socket))
        async with httpx.AsyncClient(transport=transport, base_url="http://x") as client:
            r = await client.post("/v1/chips/0/vnpus", json={"template": "vir05_1c_16g"}, headers=auth("vnpu"))
            assert r.status_code == 201, r.text
            vnpu = r.json()
            phy = (await client.get("/v1/chips/0")).json()["phy_id"]
        await wait_ready(n.plugin)
        resource = "huawei.com/Ascend910-5c.1cpu.16g"
        device = f"Ascend910-5c.1cpu.16g-{vnpu['vdev_id']}-{phy}"
        reg = await n.kubelet.wait_registered(resource)
        assert reg.endpoint == "Ascend910-5c.1cpu.16g.sock"
        msg = await n.kubelet.wait_for(resource, lambda m: bool(m.devices))
        assert msg.devices == {device: "Healthy"}
        resp = await n.kubelet.allocate(resource, [[device]])
        envs = dict(resp.container_responses[0].envs)
        assert envs == {"ASCEND_VISIBLE_DEVICES": str(vnpu["vdev_id"]), "ASCEND_RUNTIME_OPTIONS": "VIRTUAL"}
    finally:
        await close_node(n)


async def test_310p_sharing_advertises_copies_and_maps_them_back(workdir: Path) -> None:
    n = await make_node(workdir, "--share-dev-count", "3", profile="310p-4")
    try:
        await wait_ready(n.plugin)
        resource = "huawei.com/Ascend310P"
        msg = await n.kubelet.wait_for(resource, lambda m: len(m.devices) == 12)
        assert msg.healthy == {f"Ascend310P-{p}-{i}" for p in range(4) for i in range(3)}
        resp = await n.kubelet.allocate(resource, [["Ascend310P-2-1"]])
        assert resp.container_responses[0].envs["ASCEND_VISIBLE_DEVICES"] == "2"
        # Two copies of one chip in one container: the chip is listed twice, as the reference lists it.
        resp = await n.kubelet.allocate(resource, [["Ascend310P-3-2", "Ascend310P-1-0", "Ascend310P-3-0"]])
        assert resp.container_responses[0].envs["ASCEND_VISIBLE_DEVICES"] == "3,1,3"
    finally:
        await close_node(n)


async def test_exporter_loss_turns_devices_unhealthy_after_the_grace_and_recovers(workdir: Path) -> None:
    n = await make_node(workdir, "--exporter-grace", "1")
    try:
        await wait_ready(n.plugin)
        await n.kubelet.wait_for(R, lambda m: m.healthy == ALL)
        n.exporter.stop()
        seen = len(n.kubelet.streams[R])
        # Kept during the grace period (an absence, so a time), Unhealthy after it.
        await asyncio.sleep(0.6)
        assert len(n.kubelet.streams[R]) == seen
        await n.kubelet.wait_for(R, lambda m: m.unhealthy == ALL, timeout=3, after=seen)
        n.exporter = start_exporter(workdir / "exporter", profile="910b-8")
        await n.kubelet.wait_for(R, lambda m: m.healthy == ALL, timeout=10)
    finally:
        await close_node(n)


async def test_metrics_count_what_happened(node: Node) -> None:
    await node.kubelet.wait_for(R, lambda m: m.healthy == ALL)
    await node.kubelet.allocate(R, [["Ascend910-1"]])
    samples = {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(node.plugin.metrics())
        for s in family.samples
    }
    assert samples[("ascend_device_plugin_registrations_total", (("resource", "Ascend910"),))] >= 1
    assert samples[("ascend_device_plugin_list_and_watch_sends_total", (("resource", "Ascend910"),))] >= 1
    assert samples[("ascend_device_plugin_allocations_total", (("resource", "Ascend910"), ("result", "ok")))] == 1
    assert samples[("ascend_device_plugin_allocate_seconds_count", (("resource", "Ascend910"),))] == 1
    assert samples[("ascend_device_plugin_devices", (("health", "Healthy"), ("resource", "Ascend910")))] == 8


def test_unsafe_plugin_paths_are_refused(tmp_path: Path) -> None:
    real = tmp_path / "real"
    real.mkdir()
    link = tmp_path / "link"
    link.symlink_to(real)
    with pytest.raises(UnsafePath, match="symlink"):
        check_path(link, require_root=False, want_dir=True)
    with pytest.raises(UnsafePath, match="not a socket"):
        check_path(real, require_root=False, want_dir=False)
    check_path(real, require_root=False, want_dir=True)
    if os.geteuid() == 0:
        os.chown(real, 65534, 65534)
        with pytest.raises(UnsafePath, match="owned by uid 65534"):
            check_path(real, require_root=True, want_dir=True)
