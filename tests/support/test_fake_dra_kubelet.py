"""The fake DRA kubelet holds to the 1.32 plugin watcher and DRA manager where our driver could tell."""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
from ascend_common.adapters.kubelet import dra_pb2 as dra
from ascend_common.adapters.kubelet import dra_pb2_grpc as dra_grpc
from ascend_common.adapters.kubelet import pluginregistration_pb2 as reg
from ascend_common.adapters.kubelet import pluginregistration_pb2_grpc as reg_grpc
from grpc import aio

from tests.support.fake_dra_kubelet import DraCallError, FakeDraKubelet
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
        return dra.NodeUnprepareResourcesResponse()


def prepared_all(request: dra.NodePrepareResourcesRequest) -> dra.NodePrepareResourcesResponse:
    return dra.NodePrepareResourcesResponse(claims={c.uid: dra.NodePrepareResourceResponse() for c in request.claims})


@contextlib.asynccontextmanager
async def serving(path: Path, *servicers: Any) -> AsyncIterator[None]:
    server = aio.server()
    for servicer in servicers:
        if isinstance(servicer, Registration):
            reg_grpc.add_RegistrationServicer_to_server(servicer, server)
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


@pytest.fixture
async def kubelet() -> AsyncIterator[FakeDraKubelet]:
    with short_tmp_dir("fdk-") as root:
        k = FakeDraKubelet(root)
        await k.start()
        try:
            yield k
        finally:
            await k.stop()


def info(**kw: Any) -> reg.PluginInfo:
    base: dict[str, Any] = {"type": "DRAPlugin", "name": "x.example.com", "supported_versions": ["v1beta1.DRAPlugin"]}
    return reg.PluginInfo(**{**base, **kw})


async def test_registers_a_dra_plugin_on_its_registration_socket_alone(kubelet: FakeDraKubelet) -> None:
    registration = Registration(info())  # no endpoint: the registration socket serves the DRA service too
    socket = kubelet.registry_dir / "x-reg.sock"
    async with serving(socket, registration, Plugin(prepared_all)):
        await until(lambda: "x.example.com" in kubelet.plugins, what="registration")
        assert kubelet.plugins["x.example.com"].endpoint == str(socket)
        await until(lambda: registration.statuses, what="the status")
        assert registration.statuses[0].plugin_registered
        claim = dra.Claim(namespace="n", name="c", uid="u")
        assert (await kubelet.prepare("x.example.com", [claim])).devices == {"u": []}
    await until(lambda: "x.example.com" not in kubelet.plugins, what="deregistration when the socket goes")
    assert kubelet.deregistered == ["x.example.com"]  # the kubelet wipes its slices then


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


async def test_without_v1beta1_the_kubelet_falls_back_to_v1alpha4(kubelet: FakeDraKubelet) -> None:
    async with serving(kubelet.registry_dir / "old-reg.sock", Registration(info(supported_versions=["v9.Other"]))):
        await until(lambda: "x.example.com" in kubelet.plugins, what="registration")
        assert kubelet.plugins["x.example.com"].service == "v1alpha4.Node"
        with pytest.raises(DraCallError, match="unsupported chosen service"):
            await kubelet.prepare("x.example.com", [dra.Claim(uid="u")])


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
    ],
)
async def test_a_broken_answer_fails_the_whole_call(
    kubelet: FakeDraKubelet,
    answer: Callable[[dra.NodePrepareResourcesRequest], dra.NodePrepareResourcesResponse],
    error: str,
) -> None:
    async with serving(kubelet.registry_dir / "x-reg.sock", Registration(info()), Plugin(answer)):
        await until(lambda: "x.example.com" in kubelet.plugins, what="registration")
        with pytest.raises(DraCallError, match=error):
            await kubelet.prepare("x.example.com", [dra.Claim(namespace="n", name="c", uid="u")])
