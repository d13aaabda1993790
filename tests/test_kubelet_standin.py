"""The local mode's kubelet stand-in (tools/kubelet_standin.py), against a tiny plugin served here."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import socket
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest
from ascend_common.adapters.kubelet import constants
from ascend_common.adapters.kubelet import deviceplugin_pb2 as dp
from ascend_common.adapters.kubelet import deviceplugin_pb2_grpc as dp_grpc
from ascend_common.adapters.kubelet import podresources_pb2 as pr
from ascend_common.adapters.kubelet import podresources_pb2_grpc as pr_grpc

from tests.support.fake_kubelet import short_tmp_dir
from tests.support.waiting import START_S, until, until_sync
from tools import kubelet_standin

ROOT = Path(__file__).resolve().parents[1]
RESOURCE = "huawei.com/Ascend910"


class Plugin(dp_grpc.DevicePluginServicer):
    def __init__(self, n: int) -> None:
        self.health = {f"Ascend910-{i}": constants.HEALTHY for i in range(n)}
        self._changed = asyncio.Event()

    def set_health(self, device_id: str, health: str) -> None:
        self.health[device_id] = health
        self._changed.set()
        self._changed = asyncio.Event()

    async def GetDevicePluginOptions(self, request: dp.Empty, context: Any) -> dp.DevicePluginOptions:
        return dp.DevicePluginOptions()

    async def ListAndWatch(self, request: dp.Empty, context: Any) -> AsyncIterator[dp.ListAndWatchResponse]:
        while True:
            changed = self._changed
            yield dp.ListAndWatchResponse(devices=[dp.Device(ID=i, health=h) for i, h in self.health.items()])
            await changed.wait()

    # The stand-in never allocates; these only complete the servicer.
    async def GetPreferredAllocation(
        self, request: dp.PreferredAllocationRequest, context: Any
    ) -> dp.PreferredAllocationResponse:
        return dp.PreferredAllocationResponse()

    async def Allocate(self, request: dp.AllocateRequest, context: Any) -> dp.AllocateResponse:
        return dp.AllocateResponse()

    async def PreStartContainer(
        self, request: dp.PreStartContainerRequest, context: Any
    ) -> dp.PreStartContainerResponse:
        return dp.PreStartContainerResponse()


@contextlib.asynccontextmanager
async def serve(plugin_dir: Path, endpoint: str, plugin: Plugin) -> AsyncIterator[None]:
    server = grpc.aio.server()
    dp_grpc.add_DevicePluginServicer_to_server(plugin, server)
    server.add_insecure_port(f"unix://{plugin_dir / endpoint}")
    await server.start()
    try:
        yield
    finally:
        await server.stop(None)


async def register(plugin_dir: Path, endpoint: str, version: str = constants.VERSION) -> None:
    async with grpc.aio.insecure_channel(f"unix://{plugin_dir / constants.KUBELET_SOCKET}") as channel:
        request = dp.RegisterRequest(version=version, endpoint=endpoint, resource_name=RESOURCE)
        await dp_grpc.RegistrationStub(channel).Register(request, timeout=10)


class Lines:
    """Collects the stand-in's output lines and waits for one."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self._queue: asyncio.Queue[str] = asyncio.Queue()

    def __call__(self, line: str) -> None:
        self.lines.append(line)
        self._queue.put_nowait(line)

    async def next(self, within: float = 5.0) -> str:
        async with asyncio.timeout(within):
            return await self._queue.get()


@pytest.fixture
def dirs() -> Iterator[tuple[Path, Path]]:
    with short_tmp_dir("ks-") as root:
        (root / "dp").mkdir()
        yield root / "dp", root / "pr"


@contextlib.asynccontextmanager
async def standin(dirs: tuple[Path, Path], lines: Lines) -> AsyncIterator[asyncio.Task[None]]:
    stop = asyncio.Event()
    task = asyncio.create_task(kubelet_standin.run(dirs[0], lines, stop, podresources_dir=dirs[1]))
    await until((dirs[0] / constants.KUBELET_SOCKET).exists, what="the stand-in's kubelet.sock", interval=0.01)
    try:
        yield task
    finally:
        stop.set()
        async with asyncio.timeout(10):
            await task


def test_update_line_format() -> None:
    devices = [dp.Device(ID=f"Ascend910-{i}", health=constants.HEALTHY) for i in range(12)]
    assert kubelet_standin.format_update(RESOURCE, devices) == "huawei.com/Ascend910: 12 devices, 12 Healthy"
    devices[10].health = devices[2].health = constants.UNHEALTHY
    devices[3].health = ""  # not "Healthy": the kubelet counts it as unhealthy
    assert kubelet_standin.format_update(RESOURCE, devices) == (
        "huawei.com/Ascend910: 12 devices, 9 Healthy; Unhealthy: Ascend910-2, Ascend910-3, Ascend910-10"
    )


async def test_prints_one_line_per_update_and_cleans_up(dirs: tuple[Path, Path]) -> None:
    plugin_dir = dirs[0]
    stale = socket.socket(socket.AF_UNIX)
    stale.bind(str(plugin_dir / "old-plugin.sock"))
    stale.close()
    (plugin_dir / "kubelet_internal_checkpoint").write_text("{}")
    lines = Lines()
    plugin = Plugin(8)
    async with standin(dirs, lines) as task:
        assert not (plugin_dir / "old-plugin.sock").exists(), "stale sockets are deleted, as by the kubelet"
        assert (plugin_dir / "kubelet_internal_checkpoint").exists()
        async with serve(plugin_dir, "Ascend910.sock", plugin):
            await register(plugin_dir, "Ascend910.sock")
            assert await lines.next() == "huawei.com/Ascend910: 8 devices, 8 Healthy"
            plugin.set_health("Ascend910-3", constants.UNHEALTHY)
            assert await lines.next() == "huawei.com/Ascend910: 8 devices, 7 Healthy; Unhealthy: Ascend910-3"
        assert not task.done()
    assert len(lines.lines) == 2
    assert not (plugin_dir / constants.KUBELET_SOCKET).exists()
    assert not (dirs[1] / constants.KUBELET_SOCKET).exists()
    assert asyncio.all_tasks() == {asyncio.current_task()}, "the stand-in left tasks running"


async def test_rejects_a_wrong_version(dirs: tuple[Path, Path]) -> None:
    async with standin(dirs, Lines()):
        with pytest.raises(grpc.aio.AioRpcError, match="not supported"):
            await register(dirs[0], "Ascend910.sock", version="v1alpha")


async def test_drops_a_second_registration_while_the_first_stream_is_open(
    dirs: tuple[Path, Path], caplog: pytest.LogCaptureFixture
) -> None:
    lines = Lines()
    old, new = Plugin(4), Plugin(2)
    async with standin(dirs, lines):
        async with serve(dirs[0], "old.sock", old), serve(dirs[0], "new.sock", new):
            await register(dirs[0], "old.sock")
            assert await lines.next() == "huawei.com/Ascend910: 4 devices, 4 Healthy"
            with caplog.at_level(logging.WARNING, logger="kubelet-standin"):
                await register(dirs[0], "new.sock")
            assert "dropped" in caplog.text
            old.set_health("Ascend910-0", constants.UNHEALTHY)
            assert await lines.next() == "huawei.com/Ascend910: 4 devices, 3 Healthy; Unhealthy: Ascend910-0"
        assert lines.lines == [
            "huawei.com/Ascend910: 4 devices, 4 Healthy",
            "huawei.com/Ascend910: 4 devices, 3 Healthy; Unhealthy: Ascend910-0",
        ]


async def test_serves_pod_resources(dirs: tuple[Path, Path]) -> None:
    lines = Lines()
    plugin = Plugin(3)
    async with standin(dirs, lines), serve(dirs[0], "Ascend910.sock", plugin):
        await register(dirs[0], "Ascend910.sock")
        plugin.set_health("Ascend910-1", constants.UNHEALTHY)
        await lines.next()
        async with grpc.aio.insecure_channel(f"unix://{dirs[1] / constants.KUBELET_SOCKET}") as channel:
            stub = pr_grpc.PodResourcesListerStub(channel)
            assert list((await stub.List(pr.ListPodResourcesRequest(), timeout=5)).pod_resources) == []
            await until(lambda: "Unhealthy" in (lines.lines[-1] if lines.lines else ""), what="the Unhealthy line")
            response = await stub.GetAllocatableResources(pr.AllocatableResourcesRequest(), timeout=5)
        assert [(d.resource_name, list(d.device_ids)) for d in response.devices] == [
            (RESOURCE, ["Ascend910-0", "Ascend910-2"])
        ]


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_cli_stops_on_signal_and_removes_its_socket(sig: int) -> None:
    with short_tmp_dir("ksc-") as root:
        sock = root / "dp" / constants.KUBELET_SOCKET
        proc = subprocess.Popen(
            [sys.executable, "-m", "tools.kubelet_standin", "--plugin-dir", str(root / "dp")],
            cwd=ROOT,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        try:

            def listening() -> bool:
                assert proc.poll() is None, proc.communicate()[1].decode()
                return sock.exists()

            until_sync(listening, START_S, "kubelet.sock")
            proc.send_signal(sig)
            _, err = proc.communicate(timeout=10)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait(5)
        assert proc.returncode == 0, err.decode()
        assert not sock.exists()
