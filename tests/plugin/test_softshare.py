"""Soft share (issue 23) as the kubelet sees it: the plugin process on the sim's 910b-8."""

from __future__ import annotations

import asyncio
from pathlib import Path

import grpc
import pytest

from tests.plugin.conftest import close_node, make_node
from tests.plugin.test_kubelet_flow import R, inject, phy_of
from tests.support.plugin import wait_ready

SOFT_SHARE = ("--share-dev-count", "100", "--volcano-type")


async def test_soft_share_lists_100_ids_per_chip_and_a_fault_takes_exactly_its_100(workdir: Path) -> None:
    n = await make_node(workdir, *SOFT_SHARE, "--soft-share-dev-config-dir", str(workdir / "ss"))
    try:
        await wait_ready(n.plugin)
        every = {f"Ascend910-{p}-{i}" for p in range(8) for i in range(100)}
        msg = await n.kubelet.wait_for(R, lambda m: set(m.devices) == every)
        assert msg.healthy == every
        assert all(d.topology.nodes for d in msg.response.devices)  # each id keeps its chip's NUMA node
        phy = await phy_of(n, 2)
        seen = len(n.kubelet.streams[R])
        await inject(n, 2, "8C1FA006", "occur")  # a RestartNPU code
        msg = await n.kubelet.wait_for(R, lambda m: bool(m.unhealthy), after=seen)
        assert msg.unhealthy == {f"Ascend910-{phy}-{i}" for i in range(100)}
        assert len(msg.devices) == 800
        # Allocate of soft-share ids is not built yet: a clear refusal, not a wrong answer.
        with pytest.raises(grpc.aio.AioRpcError) as err:
            await n.kubelet.allocate(R, [[f"Ascend910-0-{i}" for i in range(30)]])
        assert err.value.code() is grpc.StatusCode.FAILED_PRECONDITION
        assert "soft-share ids is not supported yet" in (err.value.details() or "")
    finally:
        await close_node(n)


async def test_count_100_without_a_dir_lists_one_id_per_910b_chip(workdir: Path) -> None:
    n = await make_node(workdir, *SOFT_SHARE)
    try:
        await wait_ready(n.plugin)
        msg = await n.kubelet.wait_for(R, lambda m: bool(m.devices))
        assert set(msg.devices) == {f"Ascend910-{p}" for p in range(8)}
        assert "share count ignored" in n.plugin.log_path.read_text()
    finally:
        await close_node(n)


async def test_soft_share_on_310p_chips_refuses_to_start(workdir: Path) -> None:
    n = await make_node(workdir, *SOFT_SHARE, "--soft-share-dev-config-dir", str(workdir / "ss"), profile="310p-4")
    try:
        # Waited for off the loop: the fake kubelet serves on it meanwhile.
        assert await asyncio.to_thread(n.plugin.proc.wait, 30) == 2
        log = n.plugin.log_path.read_text()
        assert "soft share (--soft-share-dev-config-dir) is not supported on Ascend310P chips" in log
    finally:
        n.plugin.stop()
        await n.kubelet.stop()
        n.exporter.stop()
