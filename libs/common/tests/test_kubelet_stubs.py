"""The kubelet API stubs (contract section 1): generated code matches the protos, and the protos
match the contract field by field, because the field numbers and method paths are the wire."""

from __future__ import annotations

import asyncio
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any, cast

import grpc
import pytest
from ascend_common.adapters.kubelet import constants, generate
from ascend_common.adapters.kubelet import deviceplugin_pb2 as dp
from ascend_common.adapters.kubelet import deviceplugin_pb2_grpc as dp_grpc
from ascend_common.adapters.kubelet import podresources_pb2 as pr
from ascend_common.adapters.kubelet import podresources_pb2_grpc as pr_grpc
from google.protobuf.descriptor import Descriptor, FieldDescriptor

F = FieldDescriptor
STR, BOOL, I32, I64, U64, MSG = F.TYPE_STRING, F.TYPE_BOOL, F.TYPE_INT32, F.TYPE_INT64, F.TYPE_UINT64, F.TYPE_MESSAGE
ONE, MANY, MAP = "one", "repeated", "map"

# message -> [(field, number, type, cardinality, message type of the field or None)], copied from
# contract section 1 (plus upstream's ContainerMemory in PodResources), every message, every field.
DEVICEPLUGIN: dict[str, list[tuple[str, int, int, str, str | None]]] = {
    "DevicePluginOptions": [
        ("pre_start_required", 1, BOOL, ONE, None),
        ("get_preferred_allocation_available", 2, BOOL, ONE, None),
    ],
    "RegisterRequest": [
        ("version", 1, STR, ONE, None),
        ("endpoint", 2, STR, ONE, None),
        ("resource_name", 3, STR, ONE, None),
        ("options", 4, MSG, ONE, "v1beta1.DevicePluginOptions"),
    ],
    "Empty": [],
    "ListAndWatchResponse": [("devices", 1, MSG, MANY, "v1beta1.Device")],
    "Device": [
        ("ID", 1, STR, ONE, None),
        ("health", 2, STR, ONE, None),
        ("topology", 3, MSG, ONE, "v1beta1.TopologyInfo"),
    ],
    "TopologyInfo": [("nodes", 1, MSG, MANY, "v1beta1.NUMANode")],
    "NUMANode": [("ID", 1, I64, ONE, None)],
    "PreStartContainerRequest": [("devices_ids", 1, STR, MANY, None)],
    "PreStartContainerResponse": [],
    "PreferredAllocationRequest": [
        ("container_requests", 1, MSG, MANY, "v1beta1.ContainerPreferredAllocationRequest"),
    ],
    "ContainerPreferredAllocationRequest": [
        ("available_deviceIDs", 1, STR, MANY, None),
        ("must_include_deviceIDs", 2, STR, MANY, None),
        ("allocation_size", 3, I32, ONE, None),
    ],
    "PreferredAllocationResponse": [
        ("container_responses", 1, MSG, MANY, "v1beta1.ContainerPreferredAllocationResponse"),
    ],
    "ContainerPreferredAllocationResponse": [("deviceIDs", 1, STR, MANY, None)],
    "AllocateRequest": [("container_requests", 1, MSG, MANY, "v1beta1.ContainerAllocateRequest")],
    "ContainerAllocateRequest": [("devices_ids", 1, STR, MANY, None)],
    "AllocateResponse": [("container_responses", 1, MSG, MANY, "v1beta1.ContainerAllocateResponse")],
    "ContainerAllocateResponse": [
        ("envs", 1, MSG, MAP, None),
        ("mounts", 2, MSG, MANY, "v1beta1.Mount"),
        ("devices", 3, MSG, MANY, "v1beta1.DeviceSpec"),
        ("annotations", 4, MSG, MAP, None),
        ("cdi_devices", 5, MSG, MANY, "v1beta1.CDIDevice"),
    ],
    "Mount": [
        ("container_path", 1, STR, ONE, None),
        ("host_path", 2, STR, ONE, None),
        ("read_only", 3, BOOL, ONE, None),
    ],
    "DeviceSpec": [
        ("container_path", 1, STR, ONE, None),
        ("host_path", 2, STR, ONE, None),
        ("permissions", 3, STR, ONE, None),
    ],
    "CDIDevice": [("name", 1, STR, ONE, None)],
}
PODRESOURCES: dict[str, list[tuple[str, int, int, str, str | None]]] = {
    "ListPodResourcesRequest": [],
    "ListPodResourcesResponse": [("pod_resources", 1, MSG, MANY, "v1.PodResources")],
    "PodResources": [
        ("name", 1, STR, ONE, None),
        ("namespace", 2, STR, ONE, None),
        ("containers", 3, MSG, MANY, "v1.ContainerResources"),
    ],
    "ContainerResources": [
        ("name", 1, STR, ONE, None),
        ("devices", 2, MSG, MANY, "v1.ContainerDevices"),
        ("cpu_ids", 3, I64, MANY, None),
        ("memory", 4, MSG, MANY, "v1.ContainerMemory"),
    ],
    "ContainerDevices": [
        ("resource_name", 1, STR, ONE, None),
        ("device_ids", 2, STR, MANY, None),
        ("topology", 3, MSG, ONE, "v1.TopologyInfo"),
    ],
    "ContainerMemory": [
        ("memory_type", 1, STR, ONE, None),
        ("size", 2, U64, ONE, None),
        ("topology", 3, MSG, ONE, "v1.TopologyInfo"),
    ],
    "TopologyInfo": [("nodes", 1, MSG, MANY, "v1.NUMANode")],
    "NUMANode": [("ID", 1, I64, ONE, None)],
    "AllocatableResourcesRequest": [],
    "AllocatableResourcesResponse": [
        ("devices", 1, MSG, MANY, "v1.ContainerDevices"),
        ("cpu_ids", 2, I64, MANY, None),
        ("memory", 3, MSG, MANY, "v1.ContainerMemory"),
    ],
}
CASES = [("v1beta1", dp, DEVICEPLUGIN), ("v1", pr, PODRESOURCES)]

DEVICE_PLUGIN_METHODS = {
    # method -> (request, response, server streaming)
    "GetDevicePluginOptions": ("Empty", "DevicePluginOptions", False),
    "ListAndWatch": ("Empty", "ListAndWatchResponse", True),
    "GetPreferredAllocation": ("PreferredAllocationRequest", "PreferredAllocationResponse", False),
    "Allocate": ("AllocateRequest", "AllocateResponse", False),
    "PreStartContainer": ("PreStartContainerRequest", "PreStartContainerResponse", False),
}


def _cardinality(field: FieldDescriptor) -> str:
    if field.message_type is not None and field.message_type.GetOptions().map_entry:
        return MAP
    # `is_repeated` is the modern accessor; `label` is deprecated (and gone from the typed stubs).
    label = "label"
    repeated = field.is_repeated if hasattr(field, "is_repeated") else getattr(field, label) == F.LABEL_REPEATED
    return MANY if repeated else ONE


@pytest.mark.parametrize(("package", "module", "table"), CASES, ids=[c[0] for c in CASES])
def test_every_message_of_the_contract_and_no_other(package: str, module: Any, table: dict[str, Any]) -> None:
    file = module.DESCRIPTOR
    assert file.package == package
    assert set(file.message_types_by_name) == set(table)


@pytest.mark.parametrize(
    ("module", "message", "fields"),
    [(module, message, fields) for _, module, table in CASES for message, fields in table.items()],
    ids=[f"{package}.{message}" for package, _, table in CASES for message in table],
)
def test_fields_match_the_contract(
    module: Any, message: str, fields: list[tuple[str, int, int, str, str | None]]
) -> None:
    descriptor: Descriptor = module.DESCRIPTOR.message_types_by_name[message]
    got = {f.name: f for f in descriptor.fields}
    assert set(got) == {name for name, *_ in fields}, f"{message}: fields differ from the contract"
    for name, number, type_, cardinality, message_type in fields:
        field = got[name]
        assert field.number == number, f"{message}.{name} number"
        assert field.type == type_, f"{message}.{name} type"
        assert _cardinality(field) == cardinality, f"{message}.{name} cardinality"
        if cardinality == MAP:
            assert field.message_type is not None
            key, value = field.message_type.fields_by_name["key"], field.message_type.fields_by_name["value"]
            assert (key.type, value.type) == (STR, STR), f"{message}.{name} is map<string,string>"
        elif message_type is not None:
            assert field.message_type is not None, f"{message}.{name} is a message"
            assert field.message_type.full_name == message_type, f"{message}.{name} message type"


def test_topology_is_defined_in_each_package() -> None:
    # Upstream podresources defines its own TopologyInfo; sharing v1beta1's would change its full name.
    assert dp.TopologyInfo.DESCRIPTOR.full_name == "v1beta1.TopologyInfo"
    assert pr.TopologyInfo.DESCRIPTOR.full_name == "v1.TopologyInfo"
    assert pr.DESCRIPTOR.dependencies == []


def test_services_and_methods_in_the_descriptors() -> None:
    registration = dp.DESCRIPTOR.services_by_name["Registration"]
    assert registration.full_name == "v1beta1.Registration"
    register = registration.methods_by_name["Register"]
    assert (register.input_type.name, register.output_type.name) == ("RegisterRequest", "Empty")

    plugin = dp.DESCRIPTOR.services_by_name["DevicePlugin"]
    assert plugin.full_name == "v1beta1.DevicePlugin"
    assert set(plugin.methods_by_name) == set(DEVICE_PLUGIN_METHODS)
    for name, (request, response, streaming) in DEVICE_PLUGIN_METHODS.items():
        method = plugin.methods_by_name[name]
        assert (method.input_type.name, method.output_type.name) == (request, response), name
        assert method.server_streaming is streaming, name
        assert method.client_streaming is False, name

    lister = pr.DESCRIPTOR.services_by_name["PodResourcesLister"]
    assert lister.full_name == "v1.PodResourcesLister"
    assert set(lister.methods_by_name) == {"List", "GetAllocatableResources"}
    assert lister.methods_by_name["List"].output_type.name == "ListPodResourcesResponse"
    assert lister.methods_by_name["GetAllocatableResources"].output_type.name == "AllocatableResourcesResponse"


class _RecordingChannel:
    """Stands in for a grpc.Channel: records the path and kind of every callable a stub asks for."""

    def __init__(self) -> None:
        self.paths: dict[str, str] = {}

    def _make(self, kind: str) -> Callable[..., object]:
        def make(path: str, *args: object, **kwargs: object) -> object:
            self.paths[path] = kind
            return object()

        return make

    def __getattr__(self, kind: str) -> Callable[..., object]:
        if kind not in {"unary_unary", "unary_stream", "stream_unary", "stream_stream"}:
            raise AttributeError(kind)
        return self._make(kind)


class _RecordingServer:
    """Stands in for a grpc.Server: records the service name and method handlers it is given."""

    def __init__(self) -> None:
        self.methods: dict[str, dict[str, grpc.RpcMethodHandler[Any, Any]]] = {}

    def add_generic_rpc_handlers(self, handlers: object) -> None:
        pass

    def add_registered_method_handlers(
        self, service: str, handlers: dict[str, grpc.RpcMethodHandler[Any, Any]]
    ) -> None:
        self.methods[service] = handlers


def test_client_stubs_use_the_wire_method_paths() -> None:
    channel = _RecordingChannel()
    as_channel = cast(grpc.Channel, channel)
    dp_grpc.RegistrationStub(as_channel)
    dp_grpc.DevicePluginStub(as_channel)
    pr_grpc.PodResourcesListerStub(as_channel)
    assert channel.paths == {
        "/v1beta1.Registration/Register": "unary_unary",
        "/v1beta1.DevicePlugin/GetDevicePluginOptions": "unary_unary",
        "/v1beta1.DevicePlugin/ListAndWatch": "unary_stream",
        "/v1beta1.DevicePlugin/GetPreferredAllocation": "unary_unary",
        "/v1beta1.DevicePlugin/Allocate": "unary_unary",
        "/v1beta1.DevicePlugin/PreStartContainer": "unary_unary",
        "/v1.PodResourcesLister/List": "unary_unary",
        "/v1.PodResourcesLister/GetAllocatableResources": "unary_unary",
    }
    assert constants.REGISTER_METHOD in channel.paths
    assert set(constants.DEVICE_PLUGIN_METHODS) == {p for p in channel.paths if p.startswith("/v1beta1.DevicePlugin/")}
    assert {constants.PODRESOURCES_LIST_METHOD, constants.PODRESOURCES_GET_ALLOCATABLE_METHOD} <= set(channel.paths)


def test_servicers_register_under_the_wire_service_names() -> None:
    server = _RecordingServer()
    as_server = cast(grpc.Server, server)
    # The generated base servicers are abstract only in their stubs; at run time they answer UNIMPLEMENTED.
    servicers: list[Any] = [
        dp_grpc.RegistrationServicer,
        dp_grpc.DevicePluginServicer,
        pr_grpc.PodResourcesListerServicer,
    ]
    dp_grpc.add_RegistrationServicer_to_server(servicers[0](), as_server)
    dp_grpc.add_DevicePluginServicer_to_server(servicers[1](), as_server)
    pr_grpc.add_PodResourcesListerServicer_to_server(servicers[2](), as_server)
    assert set(server.methods) == {"v1beta1.Registration", "v1beta1.DevicePlugin", "v1.PodResourcesLister"}
    assert set(server.methods["v1beta1.Registration"]) == {"Register"}
    assert set(server.methods["v1.PodResourcesLister"]) == {"List", "GetAllocatableResources"}
    plugin = server.methods["v1beta1.DevicePlugin"]
    assert set(plugin) == set(DEVICE_PLUGIN_METHODS)
    for name, (_, _, streaming) in DEVICE_PLUGIN_METHODS.items():
        assert plugin[name].response_streaming is streaming, name
        assert plugin[name].request_streaming is False, name


async def test_a_raw_call_on_the_wire_path_reaches_the_generated_servicer() -> None:
    """The path a Go kubelet dials, built by hand, lands in our servicer (no stub on the client side)."""

    class Plugin(dp_grpc.DevicePluginServicer):
        async def GetDevicePluginOptions(self, request: dp.Empty, context: Any) -> dp.DevicePluginOptions:
            return dp.DevicePluginOptions(pre_start_required=True, get_preferred_allocation_available=True)

    # A short directory: unix socket paths are limited to about 107 bytes and tmp_path can be long.
    with tempfile.TemporaryDirectory(prefix="kstub-") as tmp:
        address = f"unix://{tmp}/p.sock"
        server = grpc.aio.server()
        dp_grpc.add_DevicePluginServicer_to_server(cast(Any, Plugin)(), server)
        server.add_insecure_port(address)
        await server.start()
        try:
            async with grpc.aio.insecure_channel(address) as channel:
                call: grpc.aio.UnaryUnaryMultiCallable[None, dp.DevicePluginOptions] = channel.unary_unary(
                    "/v1beta1.DevicePlugin/GetDevicePluginOptions",
                    request_serializer=lambda _: b"",
                    response_deserializer=dp.DevicePluginOptions.FromString,
                )
                async with asyncio.timeout(5):
                    options = await call(None)
            assert options.pre_start_required and options.get_preferred_allocation_available
        finally:
            await server.stop(None)


def test_committed_modules_are_what_the_protos_generate(tmp_path: Path) -> None:
    written = generate.generate(tmp_path)
    assert sorted(p.name for p in written) == generate.generated_names()
    committed = generate.PACKAGE_DIR
    stale = [p.name for p in written if p.read_bytes() != (committed / p.name).read_bytes()]
    assert not stale, f"{stale} differ from their .proto: run `python -m ascend_common.adapters.kubelet.generate`"
    # No leftover module of a removed or renamed proto.
    on_disk = sorted(p.name for p in committed.iterdir() if "_pb2" in p.name)
    assert on_disk == generate.generated_names()


def test_generated_modules_import_as_package_modules() -> None:
    # Protoc names the module after the proto's path under -I; a bare `import deviceplugin_pb2` line
    # would only work with the package directory itself on sys.path.
    for name in ("deviceplugin_pb2_grpc.py", "podresources_pb2_grpc.py"):
        text = (generate.PACKAGE_DIR / name).read_text()
        stem = name.removesuffix("_grpc.py")
        assert f"from ascend_common.adapters.kubelet import {stem} as" in text, name
    assert dp.DESCRIPTOR.name == "ascend_common/adapters/kubelet/deviceplugin.proto"
