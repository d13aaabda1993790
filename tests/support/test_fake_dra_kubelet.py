"""The fake DRA kubelet holds to the 1.36 plugin watcher and DRA manager where our driver could tell
(each rule checked against pkg/kubelet/cm/dra of v1.32 and 1.36 and, where it showed, a run of the
1.32 code under our driver made while reading it; no project test builds it)."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import os
import time
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from ascend_common.adapters.kubelet import dra_health_pb2 as health_pb
from ascend_common.adapters.kubelet import dra_health_pb2_grpc as health_grpc
from ascend_common.adapters.kubelet import dra_pb2 as dra
from ascend_common.adapters.kubelet import dra_pb2_grpc as dra_grpc
from ascend_common.adapters.kubelet import dra_v1_pb2 as dra_v1
from ascend_common.adapters.kubelet import dra_v1_pb2_grpc as dra_v1_grpc
from ascend_common.adapters.kubelet import pluginregistration_pb2 as reg
from ascend_common.adapters.kubelet import pluginregistration_pb2_grpc as reg_grpc
from grpc import aio

from tests.support.fake_apiserver import FakeApiServer
from tests.support.fake_dra_kubelet import (
    REAL_RECONCILE_S,
    SERVICES_1_32,
    SERVICES_1_36,
    DraCallError,
    FakeDraKubelet,
    allocated_claim,
    pod_using,
)
from tests.support.fake_kubelet import short_tmp_dir
from tests.support.waiting import until

Ctx = aio.ServicerContext[Any, Any]


class Registration(reg_grpc.RegistrationServicer):
    def __init__(self, info: reg.PluginInfo) -> None:
        self.info = info
        self.statuses: list[reg.RegistrationStatus] = []

    async def GetInfo(self, request: reg.InfoRequest, context: Ctx) -> reg.PluginInfo:
        return self.info

    async def NotifyRegistrationStatus(
        self, request: reg.RegistrationStatus, context: Ctx
    ) -> reg.RegistrationStatusResponse:
        self.statuses.append(request)
        return reg.RegistrationStatusResponse()


class Plugin(dra_grpc.DRAPluginServicer):
    """Answers what `answer` makes of the request."""

    def __init__(self, answer: Callable[[dra.NodePrepareResourcesRequest], dra.NodePrepareResourcesResponse]) -> None:
        self.answer = answer

    async def NodePrepareResources(
        self, request: dra.NodePrepareResourcesRequest, context: Ctx
    ) -> dra.NodePrepareResourcesResponse:
        return self.answer(request)

    async def NodeUnprepareResources(
        self, request: dra.NodeUnprepareResourcesRequest, context: Ctx
    ) -> dra.NodeUnprepareResourcesResponse:
        return dra.NodeUnprepareResourcesResponse(
            claims={c.uid: dra.NodeUnprepareResourceResponse() for c in request.claims}
        )


class PluginV1(dra_v1_grpc.DRAPluginServicer):
    """The v1 service: one device per claim, and a count of its calls."""

    def __init__(self) -> None:
        self.calls = 0

    async def NodePrepareResources(
        self, request: dra_v1.NodePrepareResourcesRequest, context: Ctx
    ) -> dra_v1.NodePrepareResourcesResponse:
        self.calls += 1
        device = dra_v1.Device(pool_name="node-a", device_name="d0", cdi_device_ids=["x.example.com/d=0"])
        return dra_v1.NodePrepareResourcesResponse(
            claims={c.uid: dra_v1.NodePrepareResourceResponse(devices=[device]) for c in request.claims}
        )

    async def NodeUnprepareResources(
        self, request: dra_v1.NodeUnprepareResourcesRequest, context: Ctx
    ) -> dra_v1.NodeUnprepareResourcesResponse:
        self.calls += 1
        return dra_v1.NodeUnprepareResourcesResponse(
            claims={c.uid: dra_v1.NodeUnprepareResourceResponse() for c in request.claims}
        )


class Health(health_grpc.DRAResourceHealthServicer):
    """Streams what the test puts in `messages`; counts the streams opened."""

    def __init__(self) -> None:
        self.messages: asyncio.Queue[health_pb.NodeWatchResourcesResponse | None] = asyncio.Queue()
        self.opened = 0

    async def NodeWatchResources(
        self, request: health_pb.NodeWatchResourcesRequest, context: Ctx
    ) -> AsyncIterator[health_pb.NodeWatchResourcesResponse]:
        self.opened += 1
        while (message := await self.messages.get()) is not None:
            yield message


def health_of(*devices: tuple[str, int, str, int]) -> health_pb.NodeWatchResourcesResponse:
    """(device, health, message, timeout s) in pool node-a."""
    return health_pb.NodeWatchResourcesResponse(
        devices=[
            health_pb.DeviceHealth(
                device=health_pb.DeviceIdentifier(pool_name=NODE, device_name=name), health=health,  # type: ignore[arg-type]
                message=message, health_check_timeout_seconds=timeout,
            )
            for name, health, message, timeout in devices
        ]
    )  # fmt: skip


def prepared_all(request: dra.NodePrepareResourcesRequest) -> dra.NodePrepareResourcesResponse:
    return dra.NodePrepareResourcesResponse(claims={c.uid: dra.NodePrepareResourceResponse() for c in request.claims})


def one_device_each(request: dra.NodePrepareResourcesRequest) -> dra.NodePrepareResourcesResponse:
    device = dra.Device(pool_name="node-a", device_name="d0", cdi_device_ids=["x.example.com/d=0"])
    return dra.NodePrepareResourcesResponse(
        claims={c.uid: dra.NodePrepareResourceResponse(devices=[device]) for c in request.claims}
    )


@contextlib.asynccontextmanager
async def serving(path: Path, *servicers: Any) -> AsyncIterator[None]:
    server = aio.server()
    for servicer in servicers:
        if isinstance(servicer, Registration):
            reg_grpc.add_RegistrationServicer_to_server(servicer, server)
        elif isinstance(servicer, PluginV1):
            dra_v1_grpc.add_DRAPluginServicer_to_server(servicer, server)
        elif isinstance(servicer, Health):
            health_grpc.add_DRAResourceHealthServicer_to_server(servicer, server)
        else:
            dra_grpc.add_DRAPluginServicer_to_server(servicer, server)
    server.add_insecure_port(f"unix://{path}")
    await server.start()
    try:
        yield
    finally:
        await server.stop(None)
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)


NODE = "node-a"
DRIVER = "x.example.com"


@pytest.fixture
def fake() -> Iterator[FakeApiServer]:
    with FakeApiServer(resource_api_versions=("v1beta1",)) as server:
        server.add_node(NODE)
        yield server


@pytest.fixture
async def kubelet(fake: FakeApiServer) -> AsyncIterator[FakeDraKubelet]:
    with short_tmp_dir("fdk-") as root:
        k = FakeDraKubelet(root, api=fake.api_client(), node=NODE)
        await k.start()
        try:
            yield k
        finally:
            await k.stop()


def info(**kw: Any) -> reg.PluginInfo:
    base: dict[str, Any] = {"type": "DRAPlugin", "name": DRIVER, "supported_versions": ["v1beta1.DRAPlugin"]}
    return reg.PluginInfo(**{**base, **kw})


def ours(device: str = "d0", driver: str = DRIVER) -> dict[str, str]:
    return {"request": "r", "driver": driver, "pool": NODE, "device": device}


def pod_with_claim(fake: FakeApiServer, pod: str, claim: str, *, driver: str = DRIVER) -> tuple[dict[str, Any], str]:
    """A pod and its claim, allocated and reserved for it, in the API server; the claim's uid."""
    spec = pod_using(pod, [claim])
    stored = fake.put_object("resourceclaims", allocated_claim(claim, [ours(driver=driver)], spec))
    return spec, stored["metadata"]["uid"]


async def test_registers_a_dra_plugin_on_its_registration_socket_alone(
    kubelet: FakeDraKubelet, fake: FakeApiServer
) -> None:
    # The kubelet's start wipes the node's slices through the API server, in the background.
    await until(lambda: kubelet.wipes == [f"spec.nodeName={NODE}"], what="the start wipe")
    registration = Registration(info())  # no endpoint: the registration socket serves the DRA service too
    socket = kubelet.registry_dir / "x-reg.sock"
    async with serving(socket, registration, Plugin(prepared_all)):
        await until(lambda: DRIVER in kubelet.plugins, what="registration")
        assert kubelet.plugins[DRIVER].endpoint == str(socket)
        await until(lambda: registration.statuses, what="the status")
        assert registration.statuses[0].plugin_registered
        pod, uid = pod_with_claim(fake, "p", "c")
        assert await kubelet.prepare(pod) == {"main": []}
        assert [(c.method, c.driver, c.uids) for c in kubelet.calls] == [("NodePrepareResources", DRIVER, [uid])]
    await until(lambda: DRIVER not in kubelet.plugins, what="deregistration when the socket goes")
    assert kubelet.deregistered == [DRIVER]
    # The handler's wipes, through the API server: the node's slices at start, the driver's when it went.
    await until(lambda: len(kubelet.wipes) == 2, what="the two slice wipes")
    assert kubelet.wipes == [f"spec.nodeName={NODE}", f"spec.driver={DRIVER},spec.nodeName={NODE}"]
    deletes = [r.query.get("fieldSelector") for r in fake.requests if r.method == "DELETE"]
    assert deletes == kubelet.wipes


@pytest.mark.parametrize(
    ("plugin_info", "error"),
    [
        pytest.param(info(type="CSIPlugin"), "no handler registered for plugin type: CSIPlugin", id="wrong type"),
        pytest.param(info(supported_versions=[]), "empty list of supported gRPC services", id="no services"),
    ],
)
async def test_a_plugin_it_cannot_take_is_told_why(
    kubelet: FakeDraKubelet, plugin_info: reg.PluginInfo, error: str
) -> None:
    registration = Registration(plugin_info)
    async with serving(kubelet.registry_dir / "bad-reg.sock", registration):
        await until(lambda: registration.statuses, what="the refusal")
    assert not registration.statuses[0].plugin_registered
    assert error in registration.statuses[0].error
    assert not kubelet.plugins


@pytest.fixture
async def kubelet_1_32(fake: FakeApiServer) -> AsyncIterator[FakeDraKubelet]:
    with short_tmp_dir("fdk-") as root:
        k = FakeDraKubelet(root, api=fake.api_client(), node=NODE, services=SERVICES_1_32, health=False)
        await k.start()
        try:
            yield k
        finally:
            await k.stop()


async def test_without_v1beta1_the_kubelet_falls_back_to_v1alpha4(
    kubelet_1_32: FakeDraKubelet, fake: FakeApiServer
) -> None:
    kubelet = kubelet_1_32  # 1.32 still had the alpha API to fall back to
    async with serving(kubelet.registry_dir / "old-reg.sock", Registration(info(supported_versions=["v9.Other"]))):
        await until(lambda: DRIVER in kubelet.plugins, what="registration")
        assert kubelet.plugins[DRIVER].service == "v1alpha4.Node"
        pod, _ = pod_with_claim(fake, "p", "c")
        with pytest.raises(DraCallError, match="unsupported chosen service"):
            await kubelet.prepare(pod)


async def test_a_1_36_kubelet_refuses_a_driver_without_a_service_it_serves(kubelet: FakeDraKubelet) -> None:
    registration = Registration(info(supported_versions=["v9.Other"]))
    async with serving(kubelet.registry_dir / "old-reg.sock", registration):
        await until(lambda: registration.statuses, what="the refusal")
    assert not registration.statuses[0].plugin_registered
    assert "none of services supported by the plugin (['v9.Other']) are supported" in registration.statuses[0].error
    assert not kubelet.plugins


@pytest.mark.parametrize(
    ("kubelet_services", "driver_services", "chosen"),
    [
        pytest.param(SERVICES_1_36, ["v1.DRAPlugin", "v1beta1.DRAPlugin"], "v1.DRAPlugin", id="1.36, v1 first"),
        pytest.param(SERVICES_1_36, ["v1beta1.DRAPlugin", "v1.DRAPlugin"], "v1beta1.DRAPlugin", id="1.36, order"),
        pytest.param(SERVICES_1_36, ["v1beta1.DRAPlugin"], "v1beta1.DRAPlugin", id="1.36, v1beta1 driver"),
        pytest.param(SERVICES_1_32, ["v1.DRAPlugin", "v1beta1.DRAPlugin"], "v1beta1.DRAPlugin", id="1.32"),
    ],
)
async def test_the_chosen_service_is_the_first_of_the_drivers_list_the_kubelet_serves(
    fake: FakeApiServer, kubelet_services: tuple[str, ...], driver_services: list[str], chosen: str
) -> None:
    with short_tmp_dir("fdk-") as root:
        kubelet = FakeDraKubelet(root, api=fake.api_client(), node=NODE, services=kubelet_services, health=False)
        await kubelet.start()
        v1, v1beta1 = PluginV1(), Plugin(one_device_each)
        try:
            registration = Registration(info(supported_versions=driver_services))
            async with serving(kubelet.registry_dir / "x-reg.sock", registration, v1, v1beta1):
                await until(lambda: DRIVER in kubelet.plugins, what="registration")
                assert kubelet.plugins[DRIVER].service == chosen
                pod, uid = pod_with_claim(fake, "p", "c")
                # The calls reach the chosen service only; the fake records them alike.
                assert await kubelet.prepare(pod) == {"main": ["x.example.com/d=0"]}
                await kubelet.unprepare(pod)
                assert [(c.method, c.uids) for c in kubelet.calls] == [
                    ("NodePrepareResources", [uid]),
                    ("NodeUnprepareResources", [uid]),
                ]
                assert v1.calls == (2 if chosen == "v1.DRAPlugin" else 0)
        finally:
            await kubelet.stop()


async def test_a_hidden_socket_is_not_a_plugin(kubelet: FakeDraKubelet) -> None:
    registration = Registration(info())
    async with serving(kubelet.registry_dir / ".hidden.sock", registration):
        await asyncio.sleep(0.2)
    assert not registration.statuses and not kubelet.plugins


@pytest.mark.parametrize(
    ("answer", "error"),
    [
        pytest.param(
            lambda r: dra.NodePrepareResourcesResponse(claims={"other": dra.NodePrepareResourceResponse()}),
            "returned result for unknown claim UID other",
            id="unknown uid",
        ),
        pytest.param(lambda r: dra.NodePrepareResourcesResponse(), "left out 1 claims", id="claim left out"),
        pytest.param(
            lambda r: dra.NodePrepareResourcesResponse(
                claims={c.uid: dra.NodePrepareResourceResponse(error="no such chip") for c in r.claims}
            ),
            "NodePrepareResources failed for claim default/c: no such chip",
            id="a claim's own error",
        ),
    ],
)
async def test_a_broken_answer_fails_the_pod(
    kubelet: FakeDraKubelet,
    fake: FakeApiServer,
    answer: Callable[[dra.NodePrepareResourcesRequest], dra.NodePrepareResourcesResponse],
    error: str,
) -> None:
    async with serving(kubelet.registry_dir / "x-reg.sock", Registration(info()), Plugin(answer)):
        await until(lambda: DRIVER in kubelet.plugins, what="registration")
        pod, _ = pod_with_claim(fake, "p", "c")
        with pytest.raises(DraCallError, match=error):
            await kubelet.prepare(pod)
        assert not kubelet.claims["default/c"].prepared  # tried again on the pod's next sync


# ---- the claim info cache (manager.go, claiminfo.go) ------------------------------------------


async def test_a_prepared_claim_is_sent_again_only_after_a_kubelet_restart(
    kubelet: FakeDraKubelet, fake: FakeApiServer
) -> None:
    async with serving(kubelet.registry_dir / "x-reg.sock", Registration(info()), Plugin(one_device_each)):
        await until(lambda: DRIVER in kubelet.plugins, what="registration")
        pod, uid = pod_with_claim(fake, "p", "c")
        assert await kubelet.prepare(pod) == {"main": ["x.example.com/d=0"]}
        assert await kubelet.prepare(pod) == {"main": ["x.example.com/d=0"]}  # from the cache
        assert len(kubelet.calls) == 1
        # The checkpoint keeps the claim and its devices, not `prepared`: the claim is sent again,
        # and the answer's devices are added to the restored ones.
        await kubelet.restart()
        await until(lambda: DRIVER in kubelet.plugins, what="registration with the restarted kubelet")
        assert await kubelet.prepare(pod) == {"main": ["x.example.com/d=0", "x.example.com/d=0"]}
        assert [c.uids for c in kubelet.calls] == [[uid], [uid]]


async def test_unprepare_is_sent_from_the_cache_once_the_last_pod_goes(
    kubelet: FakeDraKubelet, fake: FakeApiServer
) -> None:
    async with serving(kubelet.registry_dir / "x-reg.sock", Registration(info()), Plugin(one_device_each)):
        await until(lambda: DRIVER in kubelet.plugins, what="registration")
        first, second = pod_using("p1", ["shared"]), pod_using("p2", ["shared"])
        uid = fake.put_object("resourceclaims", allocated_claim("shared", [ours()], first, second))["metadata"]["uid"]
        await kubelet.prepare(first)
        await kubelet.prepare(second)  # the claim is prepared already: only the pod's reference is added
        assert kubelet.claims["default/shared"].pod_uids == {first["metadata"]["uid"], second["metadata"]["uid"]}
        await kubelet.unprepare(pod_using("never", ["unknown"]))  # not in the cache: nothing to send
        await kubelet.unprepare(first)  # another pod still uses it
        assert [c.method for c in kubelet.calls] == ["NodePrepareResources"]
        fake.remove("resourceclaims", "shared", "default")  # Unprepare does not read the API server
        await kubelet.restart()
        await until(lambda: DRIVER in kubelet.plugins, what="registration with the restarted kubelet")
        await kubelet.unprepare(second)
        assert [(c.method, c.uids) for c in kubelet.calls][1:] == [("NodeUnprepareResources", [uid])]
        assert kubelet.claims == {}
        await kubelet.unprepare(second)  # idempotent: gone from the cache, nothing sent
        assert len(kubelet.calls) == 2


def _template_pod(status: bool) -> dict[str, Any]:
    pod = pod_using("p", [])
    pod["spec"]["resourceClaims"] = [{"name": "npu", "resourceClaimTemplateName": "tmpl"}]
    pod["spec"]["containers"][0]["resources"]["claims"] = [{"name": "npu"}]
    if status:
        pod["status"] = {"resourceClaimStatuses": [{"name": "npu", "resourceClaimName": "p-npu-x1"}]}
    return pod


def _owned(claim: dict[str, Any], pod: dict[str, Any]) -> dict[str, Any]:
    owner = {"apiVersion": "v1", "kind": "Pod", "name": pod["metadata"]["name"], "uid": pod["metadata"]["uid"],
             "controller": True}  # fmt: skip
    claim["metadata"]["ownerReferences"] = [owner]
    return claim


def _unreserved(claim: dict[str, Any], pod: dict[str, Any]) -> dict[str, Any]:
    claim["status"].pop("reservedFor")
    return claim


def _as_is(claim: dict[str, Any], pod: dict[str, Any]) -> dict[str, Any]:
    return claim


def _unallocated(claim: dict[str, Any], pod: dict[str, Any]) -> dict[str, Any]:
    claim["status"].pop("allocation")
    return claim


@pytest.mark.parametrize(
    ("pod", "claim_name", "shape", "error"),
    [
        pytest.param(pod_using("p", ["c"]), "c", _unreserved, r"pod p\(.*\) is not allowed to use resource claim c",
                     id="not reserved for the pod"),
        pytest.param(pod_using("p", ["c"]), "c", _unallocated, "claim default/c: not allocated", id="not allocated"),
        pytest.param(pod_using("p", ["c"]), None, _owned, "failed to fetch ResourceClaim c referenced by pod p: 404",
                     id="no such claim"),
        pytest.param(_template_pod(False), "p-npu-x1", _owned, "ResourceClaim not created yet",
                     id="template, claim not created yet"),
        pytest.param(_template_pod(True), "p-npu-x1", _as_is,
                     "was not created for pod default/p \\(pod is not owner\\)", id="template, not the pod's"),
    ],
)  # fmt: skip
async def test_the_manager_refuses_a_claim_before_any_call(
    kubelet: FakeDraKubelet,
    fake: FakeApiServer,
    pod: dict[str, Any],
    claim_name: str | None,
    shape: Callable[[dict[str, Any], dict[str, Any]], dict[str, Any]],
    error: str,
) -> None:
    async with serving(kubelet.registry_dir / "x-reg.sock", Registration(info()), Plugin(one_device_each)):
        await until(lambda: DRIVER in kubelet.plugins, what="registration")
        if claim_name is not None:
            # Reserved but not allocated is a claim the real apiserver refuses to hold; the kubelet
            # checks for it all the same, so that case is planted past the fake's validation.
            claim = shape(allocated_claim(claim_name, [ours()], pod), pod)
            fake.put_object("resourceclaims", claim, checked=shape is not _unallocated)
        with pytest.raises(DraCallError, match=error):
            await kubelet.prepare(pod)
        assert kubelet.calls == []


async def test_a_template_claim_the_pod_owns_is_prepared(kubelet: FakeDraKubelet, fake: FakeApiServer) -> None:
    async with serving(kubelet.registry_dir / "x-reg.sock", Registration(info()), Plugin(one_device_each)):
        await until(lambda: DRIVER in kubelet.plugins, what="registration")
        pod = _template_pod(True)
        fake.put_object("resourceclaims", _owned(allocated_claim("p-npu-x1", [ours()], pod), pod))
        assert await kubelet.prepare(pod) == {"main": ["x.example.com/d=0"]}


async def test_claims_are_batched_per_driver_of_their_allocation(kubelet: FakeDraKubelet, fake: FakeApiServer) -> None:
    async with serving(kubelet.registry_dir / "x-reg.sock", Registration(info()), Plugin(one_device_each)):
        await until(lambda: DRIVER in kubelet.plugins, what="registration")
        pod = pod_using("p", ["mine", "theirs"])
        mine = fake.put_object("resourceclaims", allocated_claim("mine", [ours()], pod))["metadata"]["uid"]
        theirs = fake.put_object("resourceclaims", allocated_claim("theirs", [ours(driver="gpu.example.com")], pod))[
            "metadata"
        ]["uid"]
        with pytest.raises(DraCallError, match=r"failed to get gRPC client for driver gpu\.example\.com"):
            await kubelet.prepare(pod)
        # Ours never sees `theirs`; the other driver's batch failed (it is not registered).
        assert [(c.driver, c.uids) for c in kubelet.calls] == [(DRIVER, [mine]), ("gpu.example.com", [theirs])]


# ---- the slice wipes and the timing -----------------------------------------------------------


async def test_the_start_wipe_waits_for_the_node_and_may_land_late(fake: FakeApiServer) -> None:
    fake.remove("nodes", NODE)  # the kubelet has not registered its Node yet: getNode fails, the wipe retries
    spec = {"driver": DRIVER, "nodeName": NODE, "pool": {"name": NODE, "generation": 1, "resourceSliceCount": 1}}
    fake.put_object("resourceslices", {"metadata": {"name": "s"}, "spec": spec})
    with short_tmp_dir("fdk-") as root:
        kubelet = FakeDraKubelet(root, api=fake.api_client(), node=NODE)
        await kubelet.start()
        try:
            await asyncio.sleep(0.3)
            assert kubelet.wipes == [] and fake.objects("resourceslices")
            fake.add_node(NODE)
            await until(lambda: kubelet.wipes, timeout=5, what="the wipe after the first 1 s backoff")
            assert fake.objects("resourceslices") == []
        finally:
            await kubelet.stop()


async def test_at_the_real_reconcile_period_registration_waits_for_the_loop(fake: FakeApiServer) -> None:
    with short_tmp_dir("fdk-") as root:
        kubelet = FakeDraKubelet(root, api=fake.api_client(), node=NODE, reconcile_period=REAL_RECONCILE_S)
        await kubelet.start()
        try:
            await asyncio.sleep(0.05)  # the loop's first wait has begun
            registration = Registration(info())
            async with serving(kubelet.registry_dir / "x-reg.sock", registration, Plugin(prepared_all)):
                started = time.monotonic()
                await asyncio.sleep(0.3)
                assert DRIVER not in kubelet.plugins  # the fast poll would have registered it by now
                await until(lambda: DRIVER in kubelet.plugins, timeout=3, what="registration at the next loop")
                assert time.monotonic() - started < REAL_RECONCILE_S + 1.0  # one loop, plus a loaded machine
        finally:
            await kubelet.stop()


# ---- the health stream (1.36: ResourceHealthStatus) ---------------------------------------------


async def test_the_health_stream_is_opened_at_registration_and_followed(fake: FakeApiServer) -> None:
    with short_tmp_dir("fdk-") as root:
        kubelet = FakeDraKubelet(root, api=fake.api_client(), node=NODE, health_retry=0.05)
        await kubelet.start()
        health = Health()
        try:
            async with serving(kubelet.registry_dir / "x-reg.sock", Registration(info()), Plugin(prepared_all), health):
                await until(lambda: health.opened == 1, what="the stream opened after registration")
                assert kubelet.device_health(DRIVER, NODE, "d0") == ("Unknown", "")  # never reported
                await health.messages.put(
                    health_of(("d0", health_pb.HEALTHY, "ok", 0), ("d1", health_pb.HEALTHY, "", 0))
                )
                await kubelet.wait_health(DRIVER, NODE, "d0", "Healthy")
                # A report that leaves d1 out keeps its entry (until its timeout); d0's replaces its own.
                await health.messages.put(health_of(("d0", health_pb.UNHEALTHY, "verdict SeparateNPU", 0)))
                await kubelet.wait_health(DRIVER, NODE, "d0", "Unhealthy", after=1)
                assert kubelet.device_health(DRIVER, NODE, "d0") == ("Unhealthy", "verdict SeparateNPU")
                assert kubelet.device_health(DRIVER, NODE, "d1") == ("Healthy", "")
                assert kubelet.health_cache[DRIVER][(NODE, "d0")].timeout_s == 30.0  # unset: the default
                # The stream ends: the driver's health is forgotten, and the stream is opened again.
                await health.messages.put(None)
                await until(lambda: health.opened == 2, what="the stream opened again")
                assert kubelet.health_errors == ["EOF"]
                assert kubelet.device_health(DRIVER, NODE, "d0") == ("Unknown", "")
                # An entry older than its own timeout is Unknown, message and all.
                await health.messages.put(health_of(("d0", health_pb.UNHEALTHY, "late", 1)))
                await kubelet.wait_health(DRIVER, NODE, "d0", "Unhealthy", after=2)
                entry = kubelet.health_cache[DRIVER][(NODE, "d0")]
                kubelet.health_cache[DRIVER][(NODE, "d0")] = dataclasses.replace(entry, at=entry.at - 1.5)
                assert kubelet.device_health(DRIVER, NODE, "d0") == ("Unknown", "")
        finally:
            await kubelet.stop()


async def test_a_driver_without_the_health_service_is_asked_again_every_retry(fake: FakeApiServer) -> None:
    with short_tmp_dir("fdk-") as root:
        kubelet = FakeDraKubelet(root, api=fake.api_client(), node=NODE, health_retry=0.05)
        await kubelet.start()
        try:
            async with serving(kubelet.registry_dir / "x-reg.sock", Registration(info()), Plugin(prepared_all)):
                await until(lambda: len(kubelet.health_errors) >= 2, what="two failed attempts")
                assert kubelet.health_errors[0].startswith("UNIMPLEMENTED")
            await until(lambda: DRIVER not in kubelet.plugins, what="deregistration")
            failed = len(kubelet.health_errors)
            await asyncio.sleep(0.2)
            assert len(kubelet.health_errors) == failed  # deregistration ended the retries
        finally:
            await kubelet.stop()
