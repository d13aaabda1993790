"""The fake kubelet itself, against a tiny device plugin served in the test."""

from __future__ import annotations

import asyncio
import contextlib
import socket
import stat
from collections.abc import AsyncIterator, Iterator, Sequence
from pathlib import Path
from typing import Any

import grpc
import pytest
from ascend_common.adapters.kubelet import constants
from ascend_common.adapters.kubelet import deviceplugin_pb2 as dp
from ascend_common.adapters.kubelet import deviceplugin_pb2_grpc as dp_grpc
from ascend_common.adapters.kubelet import podresources_pb2 as pr
from ascend_common.adapters.kubelet import podresources_pb2_grpc as pr_grpc

from tests.support.fake_kubelet import FakeKubelet, Outcome, is_extended_resource_name, short_tmp_dir
from tests.support.waiting import until

RESOURCE = "huawei.com/Ascend910"
IDS = [f"Ascend910-{i}" for i in range(4)]


class TinyPlugin(dp_grpc.DevicePluginServicer):
    """Just enough of a device plugin: a health map streamed on change, echoing Allocate."""

    def __init__(self, ids: Sequence[str]) -> None:
        self.health = dict.fromkeys(ids, constants.HEALTHY)
        self.pre_started: list[list[str]] = []
        self._changed = asyncio.Event()

    def set_health(self, device_id: str, health: str) -> None:
        self.health[device_id] = health
        self._changed.set()
        self._changed = asyncio.Event()

    async def GetDevicePluginOptions(self, request: dp.Empty, context: Any) -> dp.DevicePluginOptions:
        return dp.DevicePluginOptions(pre_start_required=True, get_preferred_allocation_available=True)

    async def ListAndWatch(self, request: dp.Empty, context: Any) -> AsyncIterator[dp.ListAndWatchResponse]:
        while True:
            changed = self._changed
            yield dp.ListAndWatchResponse(devices=[dp.Device(ID=i, health=h) for i, h in self.health.items()])
            await changed.wait()

    async def GetPreferredAllocation(
        self, request: dp.PreferredAllocationRequest, context: Any
    ) -> dp.PreferredAllocationResponse:
        out = dp.PreferredAllocationResponse()
        for req in request.container_requests:
            rest = [i for i in sorted(req.available_deviceIDs) if i not in req.must_include_deviceIDs]
            picked = list(req.must_include_deviceIDs) + rest
            out.container_responses.add(deviceIDs=picked[: req.allocation_size])
        return out

    async def Allocate(self, request: dp.AllocateRequest, context: Any) -> dp.AllocateResponse:
        return dp.AllocateResponse(
            container_responses=[
                dp.ContainerAllocateResponse(envs={"IDS": ",".join(c.devices_ids)}) for c in request.container_requests
            ]
        )

    async def PreStartContainer(
        self, request: dp.PreStartContainerRequest, context: Any
    ) -> dp.PreStartContainerResponse:
        self.pre_started.append(list(request.devices_ids))
        return dp.PreStartContainerResponse()


@contextlib.asynccontextmanager
async def serve_plugin(plugin_dir: Path, endpoint: str, plugin: TinyPlugin) -> AsyncIterator[Any]:
    server = grpc.aio.server()
    dp_grpc.add_DevicePluginServicer_to_server(plugin, server)
    server.add_insecure_port(f"unix://{plugin_dir / endpoint}")
    await server.start()
    try:
        yield server
    finally:
        await server.stop(None)


async def register(plugin_dir: Path, endpoint: str, resource: str = RESOURCE, version: str = constants.VERSION) -> None:
    """Register like a plugin should: retry a refused dial every 20 ms (kubelet.sock may not listen yet)."""
    request = dp.RegisterRequest(
        version=version,
        endpoint=endpoint,
        resource_name=resource,
        options=dp.DevicePluginOptions(pre_start_required=True, get_preferred_allocation_available=True),
    )

    async def registered() -> bool:
        async with grpc.aio.insecure_channel(f"unix://{plugin_dir / constants.KUBELET_SOCKET}") as channel:
            try:
                await dp_grpc.RegistrationStub(channel).Register(request, timeout=12)
            except grpc.aio.AioRpcError as exc:
                if exc.code() != grpc.StatusCode.UNAVAILABLE:
                    raise
                return False
        return True

    await until(registered, 15, f"kubelet.sock to accept the registration of {resource}", interval=0.02)


@pytest.fixture
def dirs() -> Iterator[tuple[Path, Path]]:
    with short_tmp_dir() as root:
        yield root / "dp", root / "pr"


@pytest.fixture
async def kubelet(dirs: tuple[Path, Path]) -> AsyncIterator[FakeKubelet]:
    kl = FakeKubelet(*dirs)
    await kl.start()
    yield kl
    await kl.stop()
    assert kl.running_tasks() == 0
    assert asyncio.all_tasks() == {asyncio.current_task()}, "the fake left tasks running"


@pytest.mark.parametrize(
    ("name", "ok"),
    [
        ("huawei.com/Ascend910", True),
        ("huawei.com/Ascend910-10c.3cpu.16g.ndvpp", True),
        ("huawei.com/npu-core", True),
        ("Ascend910", False),
        ("kubernetes.io/npu", False),
        ("requests.huawei.com/npu", False),
        ("Huawei.com/npu", False),
        ("huawei.com/a/b", False),
        ("huawei.com/", False),
        ("huawei.com/-npu", False),
    ],
)
def test_resource_name_validation(name: str, ok: bool) -> None:
    assert is_extended_resource_name(name) is ok


async def test_registration_is_recorded_and_the_plugin_connected(kubelet: FakeKubelet) -> None:
    assert stat.S_ISSOCK(kubelet.socket_path.stat().st_mode)
    plugin = TinyPlugin(IDS)
    async with serve_plugin(kubelet.plugin_dir, "Ascend910.sock", plugin):
        await register(kubelet.plugin_dir, "Ascend910.sock")
        (reg,) = kubelet.registrations
        assert (reg.instance, reg.resource_name, reg.endpoint, reg.version, reg.outcome) == (
            1,
            RESOURCE,
            "Ascend910.sock",
            "v1beta1",
            Outcome.ACCEPTED,
        )
        assert reg.options.pre_start_required and reg.options.get_preferred_allocation_available
        assert await kubelet.wait_registered(RESOURCE) == reg
        options = kubelet.options_of(RESOURCE)
        assert options is not None and options.get_preferred_allocation_available  # fetched by the kubelet
        msg = await kubelet.wait_for(RESOURCE)
        assert msg.instance == 1 and msg.devices == dict.fromkeys(IDS, "Healthy") and msg.at >= reg.at
        assert kubelet.registration_count(RESOURCE) == 1
        assert kubelet.connected(RESOURCE)
        assert (kubelet.capacity(RESOURCE), kubelet.allocatable(RESOURCE)) == (4, 4)
    await until(lambda: not kubelet.connected(RESOURCE), what="the stream closed")
    assert (kubelet.capacity(RESOURCE), kubelet.allocatable(RESOURCE)) == (4, 0)


@pytest.mark.parametrize(
    ("version", "resource", "why"),
    [("v1alpha", RESOURCE, "not supported"), ("v1beta1", "Ascend910", "invalid")],
)
async def test_bad_registration_gets_an_error(kubelet: FakeKubelet, version: str, resource: str, why: str) -> None:
    async with serve_plugin(kubelet.plugin_dir, "x.sock", TinyPlugin(IDS)):
        with pytest.raises(grpc.aio.AioRpcError) as info:
            await register(kubelet.plugin_dir, "x.sock", resource=resource, version=version)
    assert why in (info.value.details() or "")
    (reg,) = kubelet.registrations
    assert reg.outcome is Outcome.REJECTED
    assert not kubelet.connected(resource) and kubelet.streams == {}


async def test_unreachable_endpoint_fails_the_registration(dirs: tuple[Path, Path]) -> None:
    async with FakeKubelet(dirs[0], dial_timeout=0.3) as kubelet:
        with pytest.raises(grpc.aio.AioRpcError) as info:
            await register(kubelet.plugin_dir, "nobody.sock")
        assert "failed to dial" in (info.value.details() or "")
        assert [r.outcome for r in kubelet.registrations] == [Outcome.FAILED]
        assert not kubelet.connected(RESOURCE)


async def test_restart_deletes_sockets_and_bumps_the_instance(kubelet: FakeKubelet) -> None:
    plugin_dir = kubelet.plugin_dir
    (plugin_dir / "kubelet_internal_checkpoint").write_text("{}")
    (plugin_dir / "notes.txt").write_text("not a socket")
    plugin = TinyPlugin(IDS)
    async with serve_plugin(plugin_dir, "Ascend910.sock", plugin):
        await register(plugin_dir, "Ascend910.sock")
        await kubelet.wait_for(RESOURCE)
        assert (plugin_dir / "Ascend910.sock").exists()

        await kubelet.restart()
        assert kubelet.instance == 2
        assert sorted(kubelet.removed_sockets[-1]) == ["Ascend910.sock", "kubelet.sock"]
        assert not (plugin_dir / "Ascend910.sock").exists()
        assert (plugin_dir / "kubelet_internal_checkpoint").exists() and (plugin_dir / "notes.txt").exists()
        assert stat.S_ISSOCK((plugin_dir / "kubelet.sock").stat().st_mode)
        # The old stream is gone; the kubelet keeps capacity but nothing is allocatable until re-registration.
        assert not kubelet.connected(RESOURCE)
        assert (kubelet.capacity(RESOURCE), kubelet.allocatable(RESOURCE)) == (4, 0)

    async with serve_plugin(plugin_dir, "Ascend910.sock", plugin):
        await register(plugin_dir, "Ascend910.sock")
        await kubelet.wait_for(RESOURCE, instance=2)
        assert kubelet.allocatable(RESOURCE) == 4
        assert kubelet.registration_counts == {(1, RESOURCE): 1, (2, RESOURCE): 1}


async def test_kubelet_sock_exists_before_it_listens(kubelet: FakeKubelet) -> None:
    restart = asyncio.create_task(kubelet.restart(listen_delay=0.5))
    try:
        await until(lambda: kubelet.instance == 2 and kubelet.socket_path.exists(), what="the second instance to bind")
        assert not kubelet.listening
        with socket.socket(socket.AF_UNIX) as sock, pytest.raises(ConnectionRefusedError):
            sock.connect(str(kubelet.socket_path))
        async with asyncio.timeout(5):
            await restart
        assert kubelet.listening
        with socket.socket(socket.AF_UNIX) as sock:
            sock.connect(str(kubelet.socket_path))
    finally:
        restart.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await restart


async def test_list_and_watch_messages_are_recorded(kubelet: FakeKubelet) -> None:
    plugin = TinyPlugin(IDS)
    async with serve_plugin(kubelet.plugin_dir, "Ascend910.sock", plugin):
        await register(kubelet.plugin_dir, "Ascend910.sock")
        await kubelet.wait_for(RESOURCE)
        plugin.set_health("Ascend910-3", constants.UNHEALTHY)
        msg = await kubelet.wait_for(RESOURCE, lambda m: m.devices["Ascend910-3"] == constants.UNHEALTHY)
        assert msg.unhealthy == {"Ascend910-3"} and len(msg.healthy) == 3
        assert kubelet.devices(RESOURCE)["Ascend910-3"] == "Unhealthy"
        assert (kubelet.capacity(RESOURCE), kubelet.allocatable(RESOURCE)) == (4, 3)
        seen = len(kubelet.streams[RESOURCE])
        plugin.set_health("Ascend910-3", constants.HEALTHY)
        back = await kubelet.wait_for(RESOURCE, lambda m: not m.unhealthy, after=seen)
        times = [m.at for m in kubelet.streams[RESOURCE]]
        assert times == sorted(times) and back.at >= msg.at
        assert kubelet.allocatable(RESOURCE) == 4


async def test_wait_for_is_bounded(kubelet: FakeKubelet) -> None:
    with pytest.raises(TimeoutError, match="a ListAndWatch message of"):
        await kubelet.wait_for(RESOURCE, lambda m: False, timeout=0.2)


async def test_second_registration_while_the_old_stream_is_open_is_dropped(kubelet: FakeKubelet) -> None:
    old, new = TinyPlugin(IDS), TinyPlugin(IDS[:2])
    async with serve_plugin(kubelet.plugin_dir, "old.sock", old):
        await register(kubelet.plugin_dir, "old.sock")
        await kubelet.wait_for(RESOURCE)
        async with serve_plugin(kubelet.plugin_dir, "new.sock", new):
            await register(kubelet.plugin_dir, "new.sock")  # the plugin is told nothing
            (dropped,) = kubelet.dropped_registrations
            assert dropped.endpoint == "new.sock" and dropped.instance == 1
            assert kubelet.registration_count(RESOURCE) == 2
            assert kubelet.allocatable(RESOURCE) == 0
            # The kubelet stays with the old stream: updates from it still arrive.
            old.set_health("Ascend910-0", constants.UNHEALTHY)
            msg = await kubelet.wait_for(RESOURCE, lambda m: bool(m.unhealthy))
            assert set(msg.devices) == set(IDS)
            assert kubelet.allocatable(RESOURCE) == 0

    # Stopping the old server first is the way to re-register in one kubelet instance.
    async with serve_plugin(kubelet.plugin_dir, "new.sock", new):
        await register(kubelet.plugin_dir, "new.sock")
        assert kubelet.registrations[-1].outcome is Outcome.ACCEPTED
        await kubelet.wait_for(RESOURCE, lambda m: set(m.devices) == set(IDS[:2]))
        assert kubelet.allocatable(RESOURCE) == 2


async def test_kubelet_calls_round_trip(kubelet: FakeKubelet) -> None:
    plugin = TinyPlugin(IDS)
    async with serve_plugin(kubelet.plugin_dir, "Ascend910.sock", plugin):
        await register(kubelet.plugin_dir, "Ascend910.sock")
        response = await kubelet.allocate(RESOURCE, [["Ascend910-1", "Ascend910-0"], ["Ascend910-3"]])
        assert [c.envs["IDS"] for c in response.container_responses] == ["Ascend910-1,Ascend910-0", "Ascend910-3"]
        assert await kubelet.preferred(RESOURCE, IDS, ["Ascend910-2"], 2) == ["Ascend910-2", "Ascend910-0"]
        assert (await kubelet.options(RESOURCE)).pre_start_required
        await kubelet.pre_start(RESOURCE, ["Ascend910-1"])
        assert plugin.pre_started == [["Ascend910-1"]]
    with pytest.raises(LookupError):
        await kubelet.allocate("huawei.com/Ascend310", [["Ascend310-0"]])


async def test_pod_resources_list_returns_what_was_set(kubelet: FakeKubelet) -> None:
    assert kubelet.podresources_socket is not None
    kubelet.set_pod_resources(
        [
            ("default", "train-0", "main", RESOURCE, ["Ascend910-0", "Ascend910-1"]),
            ("default", "train-0", "main", "huawei.com/Ascend910-2c", ["Ascend910-2c-100-3"]),
            ("default", "train-0", "sidecar", "", []),
            ("ml", "infer-1", "app", RESOURCE, ["Ascend910-2"]),
        ]
    )
    async with grpc.aio.insecure_channel(f"unix://{kubelet.podresources_socket}") as channel:
        stub = pr_grpc.PodResourcesListerStub(channel)
        response: pr.ListPodResourcesResponse = await stub.List(pr.ListPodResourcesRequest(), timeout=5)
    got = {
        (p.namespace, p.name, c.name): [(d.resource_name, list(d.device_ids)) for d in c.devices]
        for p in response.pod_resources
        for c in p.containers
    }
    assert got == {
        ("default", "train-0", "main"): [
            (RESOURCE, ["Ascend910-0", "Ascend910-1"]),
            ("huawei.com/Ascend910-2c", ["Ascend910-2c-100-3"]),
        ],
        ("default", "train-0", "sidecar"): [],
        ("ml", "infer-1", "app"): [(RESOURCE, ["Ascend910-2"])],
    }
    assert kubelet.podresources_calls == 1


async def test_allocatable_resources_lists_the_healthy_devices(kubelet: FakeKubelet) -> None:
    assert kubelet.podresources_socket is not None
    plugin = TinyPlugin(IDS)
    async with serve_plugin(kubelet.plugin_dir, "Ascend910.sock", plugin):
        await register(kubelet.plugin_dir, "Ascend910.sock")
        plugin.set_health("Ascend910-1", constants.UNHEALTHY)
        await kubelet.wait_for(RESOURCE, lambda m: bool(m.unhealthy))
        async with grpc.aio.insecure_channel(f"unix://{kubelet.podresources_socket}") as channel:
            stub = pr_grpc.PodResourcesListerStub(channel)
            response = await stub.GetAllocatableResources(pr.AllocatableResourcesRequest(), timeout=5)
    assert [(d.resource_name, list(d.device_ids)) for d in response.devices] == [
        (RESOURCE, ["Ascend910-0", "Ascend910-2", "Ascend910-3"])
    ]


async def test_stop_closes_plugin_streams_and_keeps_kubelet_sock(kubelet: FakeKubelet) -> None:
    plugin = TinyPlugin(IDS)
    async with serve_plugin(kubelet.plugin_dir, "Ascend910.sock", plugin):
        await register(kubelet.plugin_dir, "Ascend910.sock")
        await kubelet.wait_for(RESOURCE)
        await kubelet.stop()
        assert kubelet.running_tasks() == 0
        assert not kubelet.connected(RESOURCE)
        # A stopped (or killed) kubelet leaves its socket; the next start deletes it.
        assert kubelet.socket_path.exists()
        with socket.socket(socket.AF_UNIX) as sock, pytest.raises(ConnectionRefusedError):
            sock.connect(str(kubelet.socket_path))
