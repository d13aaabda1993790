"""The plugin against the fake kubelet and the sim exporter, as real processes on real sockets."""

from __future__ import annotations

import asyncio
from pathlib import Path

import grpc
import httpx
import psutil
import pytest

from tests.plugin.conftest import Node, close_node, make_node
from tests.support.exporter import auth
from tests.support.plugin import wait_ready

R = "huawei.com/Ascend910"
ALL = {f"Ascend910-{i}" for i in range(8)}


async def test_registers_and_lists_every_chip_healthy(node: Node) -> None:
    reg = await node.kubelet.wait_registered(R)
    assert (reg.endpoint, reg.version) == ("Ascend910.sock", "v1beta1")
    assert reg.options.get_preferred_allocation_available
    msg = await node.kubelet.wait_for(R, lambda m: set(m.devices) == ALL)
    assert msg.healthy == ALL
    # NUMA topology is advertised when known.
    assert all(d.topology.nodes for d in msg.response.devices)
    mode = (node.workdir / "dp" / "Ascend910.sock").stat().st_mode & 0o777
    assert mode == 0o600


async def inject(node: Node, logic_id: int, code: str, assertion: str) -> None:
    transport = httpx.AsyncHTTPTransport(uds=str(node.exporter.socket))
    async with httpx.AsyncClient(transport=transport, base_url="http://x") as client:
        r = await client.post(
            f"/v1/sim/chips/{logic_id}/faults", json={"code": code, "assertion": assertion}, headers=auth("sim")
        )
        assert r.status_code == 204, r.text


async def phy_of(node: Node, logic_id: int) -> int:
    transport = httpx.AsyncHTTPTransport(uds=str(node.exporter.socket))
    async with httpx.AsyncClient(transport=transport, base_url="http://x") as client:
        return int((await client.get(f"/v1/chips/{logic_id}")).json()["phy_id"])


async def test_fault_turns_the_chip_unhealthy_and_recovery_back_without_idle_sends(node: Node) -> None:
    await node.kubelet.wait_for(R, lambda m: m.healthy == ALL)
    chip = f"Ascend910-{await phy_of(node, 2)}"
    seen = len(node.kubelet.streams[R])
    await inject(node, 2, "8C1FA006", "occur")  # a RestartNPU code
    msg = await node.kubelet.wait_for(R, lambda m: chip in m.unhealthy, after=seen)
    assert msg.unhealthy == {chip}
    seen = len(node.kubelet.streams[R])
    await inject(node, 2, "8C1FA006", "recover")
    recovered = await node.kubelet.wait_for(R, lambda m: m.healthy == ALL, after=seen)
    # Quiet node: over 5 s (one list-watch period) after the recovery no message is sent. The
    # behaviour under test is an absence, so this is a time.
    quiet_from = node.kubelet.streams[R].index(recovered) + 1
    await asyncio.sleep(5.5)
    assert len(node.kubelet.streams[R]) == quiet_from


async def test_twenty_kubelet_restarts_register_exactly_once_each(node: Node) -> None:
    await node.kubelet.wait_for(R, lambda m: set(m.devices) == ALL)
    proc = psutil.Process(node.plugin.proc.pid)
    fds_after_first = rss_after_first = 0
    for round_ in range(1, 21):
        await node.kubelet.restart()
        await node.kubelet.wait_registered(R)
        await node.kubelet.wait_for(R, lambda m: set(m.devices) == ALL, instance=node.kubelet.instance)
        await asyncio.sleep(0.1)  # an absence, so a time: a second registration would arrive now
        assert node.kubelet.registration_count(R) == 1, f"restart {round_}: registered twice"
        assert node.kubelet.allocatable(R) == 8
        if round_ == 1:
            fds_after_first, rss_after_first = proc.num_fds(), proc.memory_info().rss
    assert not node.kubelet.dropped_registrations
    assert proc.num_fds() == fds_after_first
    assert proc.memory_info().rss - rss_after_first < 5 * 1024 * 1024


async def test_allocate_plain_path_with_phy_ids_and_bad_ids(node: Node) -> None:
    await node.kubelet.wait_for(R, lambda m: set(m.devices) == ALL)
    resp = await node.kubelet.allocate(R, [["Ascend910-5", "Ascend910-0"], ["Ascend910-3"]])
    assert [dict(c.envs) for c in resp.container_responses] == [
        {"ASCEND_VISIBLE_DEVICES": "5,0", "ASCEND_RUNTIME_OPTIONS": ""},  # the kubelet's order
        {"ASCEND_VISIBLE_DEVICES": "3", "ASCEND_RUNTIME_OPTIONS": ""},
    ]
    with pytest.raises(grpc.aio.AioRpcError) as err:
        await node.kubelet.allocate(R, [["Ascend910-42"]])
    assert err.value.code() is grpc.StatusCode.INVALID_ARGUMENT
    assert "Ascend910-42" in (err.value.details() or "")


async def test_direct_mount_mode(workdir: Path) -> None:
    n = await make_node(workdir, "--use-ascend-docker", "false")
    try:
        await wait_ready(n.plugin)
        resp = await n.kubelet.allocate(R, [["Ascend910-6"]])
        [c] = resp.container_responses
        assert [(d.container_path, d.host_path, d.permissions) for d in c.devices] == [
            ("/dev/davinci6", "/dev/davinci6", "rw")
        ]
    finally:
        await close_node(n)


async def test_preferred_allocation_keeps_910a_rings(workdir: Path) -> None:
    n = await make_node(workdir, profile="910a-8")
    try:
        await wait_ready(n.plugin)
        available = [f"Ascend910-{i}" for i in range(8) if i != 1]
        assert await n.kubelet.preferred(R, available, [], 4) == [f"Ascend910-{i}" for i in (4, 5, 6, 7)]
        pair = await n.kubelet.preferred(R, available, ["Ascend910-2"], 2)
        assert "Ascend910-2" in pair and all(int(d.rsplit("-", 1)[1]) < 4 for d in pair)
        [one] = await n.kubelet.preferred(R, available, [], 1)
        assert int(one.rsplit("-", 1)[1]) < 4, "the ring with fewer free chips"
    finally:
        await close_node(n)
