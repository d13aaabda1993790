"""Fuzzing the device-plugin's gRPC server: a real plugin process (sim exporter, fake kubelet).

Allocate and GetPreferredAllocation get well-formed requests with random device ids (unknown,
duplicated, empty, unicode, long, huge counts, must-include ids that are not available, sizes 0,
negative or huge) and request bodies that are not protobuf at all. Every answer must be OK (and
then right) or a clear status, never UNKNOWN / INTERNAL and never past the deadline; afterwards the
plugin still runs, its ListAndWatch view is unchanged, and a valid Allocate still works.
"""

from __future__ import annotations

import asyncio
import re
import threading
from collections.abc import Coroutine, Iterator
from dataclasses import dataclass
from typing import Any, TypeVar

import grpc
import pytest
from ascend_common.adapters.kubelet import deviceplugin_pb2 as pb
from ascend_common.adapters.kubelet import deviceplugin_pb2_grpc as pb_grpc
from hypothesis import event as note
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.fuzz.strategies import any_text
from tests.plugin.conftest import Node, close_node, make_node
from tests.support.fake_kubelet import short_tmp_dir
from tests.support.plugin import wait_ready

T = TypeVar("T")
R = "huawei.com/Ascend910"
ALL = [f"Ascend910-{i}" for i in range(8)]
ALLOCATE = "/v1beta1.DevicePlugin/Allocate"
PREFERRED = "/v1beta1.DevicePlugin/GetPreferredAllocation"
DEADLINE_S = 5.0
# What a refused request may get: the caller's fault, or too big to read. UNKNOWN or INTERNAL would
# mean the plugin crashed on the input; DEADLINE_EXCEEDED that it hung; UNAVAILABLE that it died.
CLEAR = frozenset({grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.RESOURCE_EXHAUSTED})
MAX_CONTAINERS = 64
MAX_DEVICE_ID_LEN = 50
FUZZ = settings(max_examples=150, deadline=None, database=None)


@dataclass
class PluginUnderTest:
    node: Node
    channel: grpc.Channel
    stub: pb_grpc.DevicePluginStub
    baseline: dict[str, str]  # ListAndWatch before any fuzzing: id -> health

    def raw(self, method: str, body: bytes) -> tuple[grpc.StatusCode, bytes | str]:
        """Send `body` as the request, byte for byte; (status, response bytes or error details)."""
        call: grpc.UnaryUnaryMultiCallable[bytes, bytes] = self.channel.unary_unary(method)  # the body goes as given
        try:
            return grpc.StatusCode.OK, call(body, timeout=DEADLINE_S)
        except grpc.RpcError as err:
            return err.code(), err.details() or ""

    def view(self) -> dict[str, str]:
        stream = self.stub.ListAndWatch(pb.Empty(), timeout=DEADLINE_S)
        try:
            first = next(stream)
        finally:
            stream.cancel()
        return {d.ID: d.health for d in first.devices}

    def assert_unharmed(self) -> None:
        assert self.node.plugin.proc.poll() is None, self.node.plugin.log_path.read_text()[-3000:]
        assert self.view() == self.baseline
        response = self.stub.Allocate(
            pb.AllocateRequest(container_requests=[pb.ContainerAllocateRequest(devices_ids=["Ascend910-1"])]),
            timeout=DEADLINE_S,
        )
        assert dict(response.container_responses[0].envs)["ASCEND_VISIBLE_DEVICES"] == "1"


@pytest.fixture(scope="module")
def plugin() -> Iterator[PluginUnderTest]:
    # The fake kubelet lives on an event loop of its own thread, so that the hypothesis tests can
    # be plain blocking functions while it keeps serving the plugin's registration and stream.
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, name="fuzz-kubelet", daemon=True)
    thread.start()

    def run(coro: Coroutine[Any, Any, T], timeout: float = 30.0) -> T:
        return asyncio.run_coroutine_threadsafe(coro, loop).result(timeout)

    with short_tmp_dir("fz-") as workdir:
        node = run(make_node(workdir))
        try:
            run(wait_ready(node.plugin))
            run(node.kubelet.wait_for(R, lambda m: set(m.devices) == set(ALL)))
            channel = grpc.insecure_channel(f"unix://{workdir / 'dp' / 'Ascend910.sock'}")
            try:
                under_test = PluginUnderTest(node, channel, pb_grpc.DevicePluginStub(channel), {})
                under_test.baseline = under_test.view()
                assert set(under_test.baseline) == set(ALL)
                yield under_test
            finally:
                channel.close()
        finally:
            run(close_node(node))
            loop.call_soon_threadsafe(loop.stop)
            thread.join(5)
            loop.close()


device_ids = (
    st.sampled_from(ALL)
    | st.sampled_from(["Ascend910-8", "Ascend910-03", "Ascend910-3\n", "Ascend910-\u0663", "Ascend310P-0", ""])
    | st.sampled_from(["Ascend910-2c-100-0", "npu-core-1", "Ascend910-1-1", "a" * 51, "9" * 5000, "\ud7ff" * 20])
    # A protobuf string cannot hold a lone surrogate; invalid UTF-8 on the wire is the garbage test's part.
    | any_text.map(lambda text: text.encode("utf-8", "replace").decode())
)


def allocate_ok(containers: list[list[str]]) -> bool:
    """What validate_request and the Allocator accept: 1..64 containers of 1..128 distinct known ids."""
    if not 1 <= len(containers) <= MAX_CONTAINERS:
        return False
    return all(len(set(ids)) == len(ids) >= 1 and set(ids) <= set(ALL) for ids in containers)


def phy(device_id: str) -> int:
    return int(device_id.rsplit("-", 1)[1])


containers = (
    st.lists(st.lists(device_ids, max_size=10), max_size=5)
    | st.lists(st.lists(st.sampled_from(ALL), min_size=1, max_size=8, unique=True), min_size=1, max_size=4)
    | st.sampled_from([65, 200]).map(lambda n: [["Ascend910-2"]] * n)  # more containers than any pod has
    | st.sampled_from([129, 2000]).map(lambda n: [[ALL[0]] * n])  # more ids than a container may ask for
)


def check_allocate(plugin: PluginUnderTest, request: list[list[str]]) -> None:
    message = pb.AllocateRequest(container_requests=[pb.ContainerAllocateRequest(devices_ids=ids) for ids in request])
    status, answer = plugin.raw(ALLOCATE, message.SerializeToString())
    note(status.name)
    assert status is grpc.StatusCode.OK or status in CLEAR, (status, answer)
    assert (status is grpc.StatusCode.OK) == allocate_ok(request), (request, status, answer)
    if status is grpc.StatusCode.OK:
        assert isinstance(answer, bytes)
        response = pb.AllocateResponse.FromString(answer)
        visible = [resp.envs["ASCEND_VISIBLE_DEVICES"] for resp in response.container_responses]
        # The kubelet's order, as the reference's GetDeviceListID keeps it.
        assert visible == [",".join(str(phy(i)) for i in ids) for ids in request]
    else:
        assert answer, "a refusal says why"


preferred_requests = st.lists(
    st.tuples(
        st.lists(device_ids, max_size=12),
        st.lists(device_ids, max_size=4) | st.lists(st.sampled_from(ALL), max_size=3),
        st.integers(-(2**31), 2**31 - 1) | st.integers(-1, 10),
    ),
    max_size=3,
)


def check_preferred(plugin: PluginUnderTest, requests: list[tuple[list[str], list[str], int]]) -> None:
    message = pb.PreferredAllocationRequest(
        container_requests=[
            pb.ContainerPreferredAllocationRequest(
                available_deviceIDs=available, must_include_deviceIDs=must, allocation_size=size
            )
            for available, must, size in requests
        ]
    )
    status, answer = plugin.raw(PREFERRED, message.SerializeToString())
    note(status.name)
    assert status is grpc.StatusCode.OK or status in CLEAR, (status, answer)
    valid = all(
        0 < size <= len(set(available)) and set(must) <= set(available) and len(set(must)) <= size
        for available, must, size in requests
    )
    if status is not grpc.StatusCode.OK:
        # An id no plugin ever advertises (over 50 characters) may be refused even in a request that is
        # otherwise fine: the kubelet only offers ids we listed.
        overlong = any(len(i) > MAX_DEVICE_ID_LEN for available, _, _ in requests for i in available)
        assert not valid or overlong, (requests, status, answer)
        assert answer, "a refusal says why"
        return
    assert valid, (requests, answer)
    assert isinstance(answer, bytes)
    response = pb.PreferredAllocationResponse.FromString(answer)
    assert len(response.container_responses) == len(requests)
    for (available, must, size), chosen in zip(requests, response.container_responses, strict=True):
        ids = list(chosen.deviceIDs)
        assert len(ids) == len(set(ids)) == size
        assert set(must) <= set(ids) <= set(available)


def valid_bodies() -> list[bytes]:
    allocate = pb.AllocateRequest(container_requests=[pb.ContainerAllocateRequest(devices_ids=ALL[:2])])
    preferred = pb.PreferredAllocationRequest(
        container_requests=[
            pb.ContainerPreferredAllocationRequest(
                available_deviceIDs=ALL, must_include_deviceIDs=ALL[:1], allocation_size=2
            )
        ]
    )
    return [allocate.SerializeToString(), preferred.SerializeToString()]


@st.composite
def damaged(draw: st.DrawFn) -> bytes:
    body = bytearray(draw(st.sampled_from(valid_bodies())))
    for _ in range(draw(st.integers(1, 4))):
        pos = draw(st.integers(0, len(body)))
        how = draw(st.sampled_from(("flip", "insert", "delete", "truncate")))
        if how == "flip" and pos < len(body):
            body[pos] ^= draw(st.integers(1, 255))
        elif how == "insert":
            body[pos:pos] = draw(st.binary(min_size=1, max_size=8))
        elif how == "delete":
            del body[pos : pos + 1]
        else:
            del body[pos:]
    return bytes(body)


def test_allocate_answers_ok_or_a_clear_error(plugin: PluginUnderTest) -> None:
    @FUZZ
    @given(request=containers)
    def fuzz(request: list[list[str]]) -> None:
        check_allocate(plugin, request)

    fuzz()
    plugin.assert_unharmed()


def test_preferred_allocation_answers_ok_or_a_clear_error(plugin: PluginUnderTest) -> None:
    @FUZZ
    @given(requests=preferred_requests)
    def fuzz(requests: list[tuple[list[str], list[str], int]]) -> None:
        check_preferred(plugin, requests)

    fuzz()
    plugin.assert_unharmed()


def test_garbage_request_bodies_get_a_clear_error(plugin: PluginUnderTest) -> None:
    @FUZZ
    @given(body=st.binary(max_size=512) | damaged(), method=st.sampled_from([ALLOCATE, PREFERRED]))
    def fuzz(body: bytes, method: str) -> None:
        status, answer = plugin.raw(method, body)
        note(status.name)
        assert status is grpc.StatusCode.OK or status in CLEAR, (body, status, answer)

    fuzz()
    plugin.assert_unharmed()


@pytest.mark.parametrize(
    ("method", "body", "status", "details"),
    [
        (ALLOCATE, b"\xff", grpc.StatusCode.INVALID_ARGUMENT, "malformed request"),  # was UNKNOWN
        (PREFERRED, b"\x0a\x02\x0a\xff", grpc.StatusCode.INVALID_ARGUMENT, "malformed request"),  # was UNKNOWN
        (ALLOCATE, b"\x0a\x03\x0a\x01\x80", grpc.StatusCode.INVALID_ARGUMENT, "malformed request"),  # bad UTF-8
        ("/v1beta1.DevicePlugin/GetDevicePluginOptions", b"\x0a", grpc.StatusCode.INVALID_ARGUMENT, "malformed"),
        ("/v1beta1.DevicePlugin/PreStartContainer", b"\xff\xff", grpc.StatusCode.INVALID_ARGUMENT, "malformed"),
        (ALLOCATE, b"\x0a" + b"\xff" * 5 * 2**20, grpc.StatusCode.RESOURCE_EXHAUSTED, ""),  # over 4 MiB
    ],
)
def test_regression_undecodable_requests_are_invalid_argument(
    plugin: PluginUnderTest, method: str, body: bytes, status: grpc.StatusCode, details: str
) -> None:
    got, answer = plugin.raw(method, body)
    assert got is status, answer
    assert isinstance(answer, str) and re.search(details, answer)


def test_regression_an_undecodable_list_and_watch_is_invalid_argument(plugin: PluginUnderTest) -> None:
    list_and_watch: grpc.UnaryStreamMultiCallable[bytes, bytes]
    list_and_watch = plugin.channel.unary_stream("/v1beta1.DevicePlugin/ListAndWatch")
    stream = list_and_watch(b"\xff", timeout=DEADLINE_S)
    with pytest.raises(grpc.RpcError) as err:
        next(stream)
    assert err.value.code() is grpc.StatusCode.INVALID_ARGUMENT


def test_the_kubelet_saw_no_change_from_the_fuzzing(plugin: PluginUnderTest) -> None:
    plugin.assert_unharmed()
    assert plugin.node.kubelet.devices(R) == plugin.baseline
