"""The DRA and plugin-registration stubs speak the kubelet's wire format.

The tables are the upstream protos (k8s.io/kubelet/pkg/apis/dra/v1beta1/api.proto and
pluginregistration/v1/api.proto, as vendored with Kubernetes 1.32; dra/v1/api.proto and
dra-health/v1alpha1/api.proto as vendored with 1.36.2): every message, every field number and
type, and the full method paths the kubelet calls, so a transcription slip fails here.
"""

from __future__ import annotations

from typing import Any

import pytest
from ascend_common.adapters.kubelet import constants as k
from ascend_common.adapters.kubelet import (
    dra_health_pb2,
    dra_health_pb2_grpc,
    dra_pb2,
    dra_pb2_grpc,
    dra_v1_pb2,
    dra_v1_pb2_grpc,
    pluginregistration_pb2,
    pluginregistration_pb2_grpc,
)
from google.protobuf.descriptor import FieldDescriptor

STRING, BOOL, MESSAGE = FieldDescriptor.TYPE_STRING, FieldDescriptor.TYPE_BOOL, FieldDescriptor.TYPE_MESSAGE
INT64, ENUM = FieldDescriptor.TYPE_INT64, FieldDescriptor.TYPE_ENUM

DRA_MESSAGES: dict[str, dict[str, tuple[int, int, bool]]] = {
    "NodePrepareResourcesRequest": {"claims": (1, MESSAGE, True)},
    "NodePrepareResourcesResponse": {"claims": (1, MESSAGE, True)},  # map<string, ...>: a repeated entry
    "NodePrepareResourceResponse": {"devices": (1, MESSAGE, True), "error": (2, STRING, False)},
    "Device": {
        "request_names": (1, STRING, True),
        "pool_name": (2, STRING, False),
        "device_name": (3, STRING, False),
        "cdi_device_ids": (4, STRING, True),
    },
    "NodeUnprepareResourcesRequest": {"claims": (1, MESSAGE, True)},
    "NodeUnprepareResourcesResponse": {"claims": (1, MESSAGE, True)},
    "NodeUnprepareResourceResponse": {"error": (1, STRING, False)},
    "Claim": {"namespace": (1, STRING, False), "uid": (2, STRING, False), "name": (3, STRING, False)},
}
# v1: v1beta1's messages, and the Device's share_id (optional string 5).
DRA_V1_MESSAGES = {**DRA_MESSAGES, "Device": {**DRA_MESSAGES["Device"], "share_id": (5, STRING, False)}}
HEALTH_MESSAGES: dict[str, dict[str, tuple[int, int, bool]]] = {
    "NodeWatchResourcesRequest": {},
    "DeviceIdentifier": {"pool_name": (1, STRING, False), "device_name": (2, STRING, False)},
    "DeviceHealth": {
        "device": (1, MESSAGE, False),
        "health": (2, ENUM, False),
        "last_updated_time": (3, INT64, False),
        "health_check_timeout_seconds": (4, INT64, False),
        "message": (5, STRING, False),
    },
    "NodeWatchResourcesResponse": {"devices": (1, MESSAGE, True)},
}
REGISTRATION_MESSAGES: dict[str, dict[str, tuple[int, int, bool]]] = {
    "PluginInfo": {
        "type": (1, STRING, False),
        "name": (2, STRING, False),
        "endpoint": (3, STRING, False),
        "supported_versions": (4, STRING, True),
    },
    "RegistrationStatus": {"plugin_registered": (1, BOOL, False), "error": (2, STRING, False)},
    "RegistrationStatusResponse": {},
    "InfoRequest": {},
}


@pytest.mark.parametrize(
    ("module", "package", "table"),
    [
        (dra_pb2, "k8s.io.kubelet.pkg.apis.dra.v1beta1", DRA_MESSAGES),
        (dra_v1_pb2, "k8s.io.kubelet.pkg.apis.dra.v1", DRA_V1_MESSAGES),
        (dra_health_pb2, "v1alpha1", HEALTH_MESSAGES),
        (pluginregistration_pb2, "pluginregistration", REGISTRATION_MESSAGES),
    ],
)
def test_messages_and_fields_match_the_upstream_proto(
    module: Any, package: str, table: dict[str, dict[str, tuple[int, int, bool]]]
) -> None:
    file = module.DESCRIPTOR
    assert file.package == package
    assert set(file.message_types_by_name) == set(table)
    for name, fields in table.items():
        message = file.message_types_by_name[name]
        got = {f.name: (f.number, f.type, f.is_repeated) for f in message.fields}
        assert got == fields, name


@pytest.mark.parametrize("module", [dra_pb2, dra_v1_pb2], ids=["v1beta1", "v1"])
def test_the_prepare_maps_are_keyed_by_claim_uid_strings(module: Any) -> None:
    for name in ("NodePrepareResourcesResponse", "NodeUnprepareResourcesResponse"):
        entry = module.DESCRIPTOR.message_types_by_name[name].fields_by_name["claims"].message_type
        assert entry is not None, name
        assert entry.GetOptions().map_entry, name
        assert entry.fields_by_name["key"].type == STRING


@pytest.mark.parametrize(
    ("module", "service", "methods"),
    [
        (
            dra_pb2,
            k.DRA_V1BETA1_SERVICE,
            {k.NODE_PREPARE_RESOURCES_METHOD, k.NODE_UNPREPARE_RESOURCES_METHOD},
        ),
        (
            dra_v1_pb2,
            k.DRA_V1_SERVICE,
            {k.NODE_PREPARE_RESOURCES_V1_METHOD, k.NODE_UNPREPARE_RESOURCES_V1_METHOD},
        ),
        (dra_health_pb2, k.DRA_HEALTH_SERVICE, {k.NODE_WATCH_RESOURCES_METHOD}),
        (
            pluginregistration_pb2,
            k.PLUGIN_REGISTRATION_SERVICE,
            {k.GET_INFO_METHOD, k.NOTIFY_REGISTRATION_STATUS_METHOD},
        ),
    ],
)
def test_method_paths_are_the_kubelets(module: Any, service: str, methods: set[str]) -> None:
    (svc,) = module.DESCRIPTOR.services_by_name.values()
    assert svc.full_name == service
    assert {f"/{svc.full_name}/{m.name}" for m in svc.methods} == methods


def test_the_announced_service_name_is_the_proto_package_tail_and_service() -> None:
    # The kubelet matches "v1beta1.DRAPlugin" literally against PluginInfo.supported_versions.
    (svc,) = dra_pb2.DESCRIPTOR.services_by_name.values()
    assert f"{svc.full_name.split('.')[-2]}.{svc.name}" == k.DRA_V1BETA1_SERVICE_NAME
    (v1,) = dra_v1_pb2.DESCRIPTOR.services_by_name.values()
    assert f"{v1.full_name.split('.')[-2]}.{v1.name}" == k.DRA_V1_SERVICE_NAME == "v1.DRAPlugin"


def test_the_health_stream_is_server_streaming_with_the_upstream_enum() -> None:
    (svc,) = dra_health_pb2.DESCRIPTOR.services_by_name.values()
    method = svc.methods_by_name["NodeWatchResources"]
    assert method.server_streaming and not method.client_streaming
    statuses = dra_health_pb2.DESCRIPTOR.enum_types_by_name["HealthStatus"]
    assert {v.name: v.number for v in statuses.values} == {"UNKNOWN": 0, "HEALTHY": 1, "UNHEALTHY": 2}
    field = dra_health_pb2.DESCRIPTOR.message_types_by_name["DeviceHealth"].fields_by_name["health"]
    assert field.enum_type is statuses


def test_v1_and_v1beta1_are_one_wire_format() -> None:
    # One servicer answers both: a v1beta1 answer's bytes are a v1 answer, and back.
    answer = dra_pb2.NodePrepareResourcesResponse(
        claims={
            "u": dra_pb2.NodePrepareResourceResponse(
                devices=[dra_pb2.Device(request_names=["r"], pool_name="p", device_name="d", cdi_device_ids=["x=1"])]
            ),
            "v": dra_pb2.NodePrepareResourceResponse(error="no"),
        }
    )
    as_v1 = dra_v1_pb2.NodePrepareResourcesResponse.FromString(answer.SerializeToString())
    assert as_v1.claims["u"].devices[0].device_name == "d" and not as_v1.claims["u"].devices[0].HasField("share_id")
    assert as_v1.claims["v"].error == "no"
    assert dra_pb2.NodePrepareResourcesResponse.FromString(as_v1.SerializeToString()) == answer


def test_servicer_registration_helpers_exist() -> None:
    assert callable(dra_pb2_grpc.add_DRAPluginServicer_to_server)
    assert callable(dra_v1_pb2_grpc.add_DRAPluginServicer_to_server)
    assert callable(dra_health_pb2_grpc.add_DRAResourceHealthServicer_to_server)
    assert callable(pluginregistration_pb2_grpc.add_RegistrationServicer_to_server)
