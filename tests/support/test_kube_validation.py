"""The apiserver's rules the fake applies (tests/support/kube_validation.py), rule by rule.

Test functions are named after upstream's (pkg/apis/resource/validation/*_test.go,
pkg/apis/core/validation/validation_test.go), cases after upstream's cases where there is one;
the cases for our own objects (`ascend910-...`) say so. Each bad case names the error it expects,
so a rule that stops firing fails here.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest

from tests.support.kube_validation import (
    ANNOTATIONS_MAX_BYTES,
    C_IDENTIFIER_MSG,
    CONFIGMAP_MAX_BYTES,
    LABEL_MSG,
    LABEL_VALUE_MSG,
    NAME_PART_MSG,
    SUBDOMAIN_MSG,
    validate_configmap,
    validate_device_class,
    validate_object_meta,
    validate_resource_claim,
    validate_resource_slice,
)

JsonObj = dict[str, Any]
Mutate = Callable[[JsonObj], object]


def attributes() -> JsonObj:
    return {"int": {"int": 42}, "string": {"string": "hello world"}, "version": {"version": "1.2.3"},
            "bool": {"bool": True}}  # fmt: skip


def a_slice(devices: int = 1, version: str = "v1") -> JsonObj:
    def device(i: int) -> JsonObj:
        inner = {"attributes": attributes(), "capacity": {"memory": {"value": "1Gi"}}}
        return {"name": f"device-{i}", **inner} if version == "v1" else {"name": f"device-{i}", "basic": inner}

    return {
        "apiVersion": f"resource.k8s.io/{version}",
        "kind": "ResourceSlice",
        "metadata": {"name": "foo"},
        "spec": {"driver": "test.example.com", "nodeName": "foo", "pool": {"name": "foo", "resourceSliceCount": 1},
                 "devices": [device(i) for i in range(devices)]},
    }  # fmt: skip


def dev(obj: JsonObj, i: int = 0) -> JsonObj:
    device: JsonObj = obj["spec"]["devices"][i]
    return device


def with_taints(obj: JsonObj) -> JsonObj:
    for d in obj["spec"]["devices"]:
        d["taints"] = [{"key": "example.com/taint", "effect": "NoExecute"}]
    return obj


LABEL, SUBDOMAIN, C_ID = LABEL_MSG, SUBDOMAIN_MSG, C_IDENTIFIER_MSG
NAME_PART, LABEL_VALUE = NAME_PART_MSG, LABEL_VALUE_MSG
OUR_TAINT = {"key": "npu.huawei.com/unhealthy", "value": "SeparateNPU", "effect": "NoSchedule"}
BAD = "!@#$%^"


@pytest.mark.parametrize(
    ("obj", "errors"),
    [
        pytest.param(a_slice(128), [], id="good"),
        pytest.param(a_slice(128, "v1beta1"), [], id="good (v1beta1, devices under basic)"),
        pytest.param(a_slice(129), ["spec.devices: Too many: 129: must have at most 128 items"], id="too-large"),
        pytest.param(with_taints(a_slice(64)), [], id="good-taints"),
        pytest.param(with_taints(a_slice(65)), ["spec.devices: Too many: 65: must have at most 64 items"],
                     id="too-large-taints"),
    ],
)  # fmt: skip
def test_validate_resource_slice_sizes(obj: JsonObj, errors: list[str]) -> None:
    assert validate_resource_slice(obj) == errors


def _set(path: str, value: object) -> Mutate:
    def mutate(obj: JsonObj) -> None:
        *head, last = path.split(".")
        _walk(obj, head)[last] = value

    return mutate


def _drop(path: str) -> Mutate:
    def mutate(obj: JsonObj) -> None:
        *head, last = path.split(".")
        del _walk(obj, head)[last]

    return mutate


def _walk(obj: JsonObj, keys: list[str]) -> Any:
    target: Any = obj
    for key in keys:
        target = target[int(key)] if isinstance(target, list) else target[key]
    return target


SLICE_CASES = [
    ("ascend910-device-name (ours: the reference's name)", 1, _set("spec.devices.0.name", "Ascend910-0"),
     [f'spec.devices[0].name: Invalid value: "Ascend910-0": {LABEL}']),
    ("ascend910-device-name, v1beta1 (ours)", 1, _set("spec.devices.0.name", "Ascend910-0"),
     [f'spec.devices[0].name: Invalid value: "Ascend910-0": {LABEL}']),
    ("bad-devices", 3, _set("spec.devices.1.name", BAD), [f'spec.devices[1].name: Invalid value: "{BAD}": {LABEL}']),
    ("device name longer than a label (ours)", 1, _set("spec.devices.0.name", "a" * 64),
     [f"spec.devices[0].name: Invalid value: \"{'a' * 64}\": {LABEL}"]),
    ("duplicate device names (ours)", 2, _set("spec.devices.1.name", "device-0"),
     ['spec.devices[1]: Duplicate value: "device-0"']),
    ("bad-drivername", 1, _set("spec.driver", BAD), [f'spec.driver: Invalid value: "{BAD}": {SUBDOMAIN}']),
    ("missing driver (ours)", 1, _drop("spec.driver"), ["spec.driver: Required value"]),
    ("missing-pool-name", 1, _set("spec.pool.name", ""), ["spec.pool.name: Required value"]),
    ("bad-pool", 1, _set("spec.pool", {"name": BAD, "resourceSliceCount": 0, "generation": -1}),
     [f'spec.pool.name: Invalid value: "{BAD}": {SUBDOMAIN}',
      "spec.pool.resourceSliceCount: Invalid value: 0: must be greater than zero",
      "spec.pool.generation: Invalid value: -1: must be greater than or equal to zero"]),
    ("empty-node-selection", 1, _drop("spec.nodeName"),
     ["spec: Required value: exactly one of `nodeName`, `nodeSelector`, `allNodes`, `perDeviceNodeSelection` "
      "is required"]),
    ("bad-node-selection-all-nodes", 1, _set("spec.allNodes", True),
     ['spec: Invalid value: "{`nodeName`, `allNodes`}": exactly one of `nodeName`, `nodeSelector`, `allNodes`, '
      "`perDeviceNodeSelection` is required, but multiple fields are set"]),
    ("bad node name (ours)", 1, _set("spec.nodeName", "Node_A"),
     [f'spec.nodeName: Invalid value: "Node_A": {SUBDOMAIN}']),
    ("bad-attribute: no value", 1, _set("spec.devices.0.attributes", {"foo": {}}),
     ['spec.devices[0].attributes[foo]: Invalid value: "": exactly one value must be specified']),
    ("bad-attribute: two values", 1, _set("spec.devices.0.attributes", {"foo": {"string": "x", "version": "1.2.3"}}),
     ["spec.devices[0].attributes[foo]: Invalid value: {'string': 'x', 'version': '1.2.3'}: "
      "exactly one value must be specified"]),
    ("bad-attribute: version", 1, _set("spec.devices.0.attributes", {"foo": {"version": "x" * 65}}),
     [f"spec.devices[0].attributes[foo].version: Invalid value: \"{'x' * 65}\": "
      "must be a string compatible with semver.org spec 2.0.0",
      "spec.devices[0].attributes[foo].version: Too long: may not be more than 64 bytes"]),
    ("bad-attribute: string", 1, _set("spec.devices.0.attributes", {"foo": {"string": "x" * 65}}),
     ["spec.devices[0].attributes[foo].string: Too long: may not be more than 64 bytes"]),
    ("bad-list-attribute: empty", 1, _set("spec.devices.0.attributes", {"foo": {"strings": []}}),
     ["spec.devices[0].attributes[foo].strings: Invalid value: []: must not be empty if specified"]),
    ("good-attribute-names", 1,
     _set("spec.devices.0.attributes", {"x" * 32: {"string": "y"}, "x" * 63 + "/" + "y" * 32: {"string": "z"}}), []),
    ("bad-attribute-c-identifier", 1, _set("spec.devices.0.attributes", {"." * 33: {"string": "y"}}),
     ["spec.devices[0].attributes: Too long: may not be more than 32 bytes",
      f"spec.devices[0].attributes: Invalid value: \"{'.' * 33}\": {C_ID}"]),
    ("bad-attribute-domain", 1, _set("spec.devices.0.attributes", {"a" * 64 + "/y": {"string": "z"}}),
     ["spec.devices[0].attributes: Too long: may not be more than 63 bytes"]),
    ("bad-attribute-empty-domain-and-c-identifier", 1, _set("spec.devices.0.attributes", {"/": {"string": "z"}}),
     ['spec.devices[0].attributes: Invalid value: "": the domain must not be empty',
      'spec.devices[0].attributes: Invalid value: "": the name must not be empty']),
    ("bad-capacity-name (ours)", 1, _set("spec.devices.0.capacity", {"hbm-mi": {"value": "1Gi"}}),
     [f'spec.devices[0].capacity: Invalid value: "hbm-mi": {C_ID}']),
    ("bad capacity quantity (ours)", 1, _set("spec.devices.0.capacity", {"hbm": {"value": "64 GiB"}}),
     ['spec.devices[0].capacity[hbm].value: Invalid value: "64 GiB": quantities must match the regular expression']),
    ("combined-attributes-and-capacity-length", 1,
     _set("spec.devices.0.attributes", {f"a{i}": {"int": i} for i in range(32)}),
     ["spec.devices[0]: Invalid value: 33: the total number of attributes and capacities must not exceed 32"]),
    ("too-many-attribute-values (ours)", 1, _set("spec.devices.0.attributes", {"a": {"ints": list(range(49))}}),
     ["spec.devices[0]: Invalid value: 49: the total number of attribute values must not exceed 48"]),
    # validateDeviceTaint (1.33+); ours: key npu.huawei.com/unhealthy, a fault level as value
    ("good taint (ours)", 1, _set("spec.devices.0.taints", [OUR_TAINT]), []),
    ("good taint, v1beta1 (ours)", 1, _set("spec.devices.0.taints", [OUR_TAINT]), []),
    ("good taint: card_drop, NoExecute, timeAdded, no value", 1, _set("spec.devices.0.taints", [
        {**OUR_TAINT, "value": "card_drop", "effect": "NoExecute", "timeAdded": "2026-01-02T03:04:05Z"},
        {"key": "plain", "effect": "None"}]), []),
    ("bad taint key: missing", 1, _set("spec.devices.0.taints", [{"effect": "NoSchedule"}]),
     ["spec.devices[0].taints[0].key: Required value"]),
    ("bad taint key: name part", 1, _set("spec.devices.0.taints", [{"key": "npu.huawei.com/-x", "effect": "None"}]),
     [f'spec.devices[0].taints[0].key: Invalid value: "npu.huawei.com/-x": {NAME_PART}']),
    ("bad taint key: prefix", 1, _set("spec.devices.0.taints", [{"key": "NPU/x", "effect": "None"}]),
     [f'spec.devices[0].taints[0].key: Invalid value: "NPU/x": prefix part {SUBDOMAIN}']),
    ("bad taint key: two slashes", 1, _set("spec.devices.0.taints", [{"key": "a/b/c", "effect": "None"}]),
     ["spec.devices[0].taints[0].key: Invalid value: \"a/b/c\": a qualified name must consist of a name with an "
      "optional prefix and one '/'"]),
    ("bad taint key: name too long", 1, _set("spec.devices.0.taints", [{"key": "x" * 64, "effect": "None"}]),
     [f"spec.devices[0].taints[0].key: Invalid value: \"{'x' * 64}\": name part must be no more than 63 characters"]),
    ("bad taint value", 1, _set("spec.devices.0.taints", [{**OUR_TAINT, "value": "card drop"}]),
     [f'spec.devices[0].taints[0].value: Invalid value: "card drop": {LABEL_VALUE}']),
    ("bad taint value: too long", 1, _set("spec.devices.0.taints", [{**OUR_TAINT, "value": "v" * 64}]),
     [f"spec.devices[0].taints[0].value: Invalid value: \"{'v' * 64}\": must be no more than 63 characters"]),
    ("bad taint effect: missing", 1, _set("spec.devices.0.taints", [{"key": "k"}]),
     ["spec.devices[0].taints[0].effect: Required value"]),
    ("bad taint effect: PreferNoSchedule", 1,
     _set("spec.devices.0.taints", [{"key": "k", "effect": "PreferNoSchedule"}]),
     ['spec.devices[0].taints[0].effect: Unsupported value: "PreferNoSchedule": supported values: "NoExecute", '
      '"NoSchedule", "None"']),
    ("bad taint timeAdded", 1, _set("spec.devices.0.taints", [{**OUR_TAINT, "timeAdded": "yesterday"}]),
     ['spec.devices[0].taints[0].timeAdded: Invalid value: "yesterday": must be an RFC 3339 time']),
    ("too many taints", 1, _set("spec.devices.0.taints", [{"key": f"k{i}", "effect": "None"} for i in range(17)]),
     ["spec.devices[0].taints: Too many: 17: must have at most 16 items"]),
]  # fmt: skip


@pytest.mark.parametrize(("case", "devices", "mutate", "errors"), SLICE_CASES, ids=[c[0] for c in SLICE_CASES])
def test_validate_resource_slice(case: str, devices: int, mutate: Mutate, errors: list[str]) -> None:
    obj = a_slice(devices, "v1beta1" if "v1beta1" in case else "v1")
    if "v1beta1" in case:  # the same paths, the device's fields under `basic`
        for d in obj["spec"]["devices"]:
            d.update(d.pop("basic"))
        mutate(obj)
        for d in obj["spec"]["devices"]:
            d["basic"] = {k: d.pop(k) for k in list(d) if k != "name"}
    else:
        mutate(obj)
    assert validate_resource_slice(obj) == errors


def test_validate_resource_slice_v1beta1_device_needs_basic() -> None:
    obj = a_slice(1, "v1beta1")
    del dev(obj)["basic"]
    assert validate_resource_slice(obj) == ["spec.devices[0].basic: Required value"]


@pytest.mark.parametrize(
    ("mutate", "errors"),
    [
        pytest.param(_set("spec.pool.generation", 2), [], id="valid-update"),
        pytest.param(_set("spec.nodeName", "bar"), ['spec.nodeName: Invalid value: "bar": field is immutable'],
                     id="invalid-update-nodename"),
        pytest.param(_set("spec.driver", "other.example.com"),
                     ['spec.driver: Invalid value: "other.example.com": field is immutable'],
                     id="invalid-update-drivername"),
        pytest.param(_set("spec.pool.name", "bar"), ['spec.pool.name: Invalid value: "bar": field is immutable'],
                     id="invalid-update-pool"),
    ],
)  # fmt: skip
def test_validate_resource_slice_update(mutate: Mutate, errors: list[str]) -> None:
    old = a_slice(1)
    new = copy.deepcopy(old)
    mutate(new)
    assert validate_resource_slice(new, old) == errors


# ---- ResourceClaim --------------------------------------------------------------------------------


def a_claim(version: str = "v1beta1", device: str = "ascend910-0") -> JsonObj:
    request: JsonObj = {"name": "npu", "deviceClassName": "npu.huawei.com"}
    return {
        "apiVersion": f"resource.k8s.io/{version}",
        "kind": "ResourceClaim",
        "metadata": {"name": "c", "namespace": "default"},
        "spec": {"devices": {"requests": [request if version == "v1beta1" else {"name": "npu", "exactly": request}]}},
        "status": {
            "allocation": {"devices": {"results": [
                {"request": "npu", "driver": "npu.huawei.com", "pool": "node-a", "device": device}]}},
            "reservedFor": [{"resource": "pods", "name": "p", "uid": "1234"}],
        },
    }  # fmt: skip


CLAIM_CASES = [
    ("good", _set("metadata.name", "c"), []),
    ("allocation naming the reference's device name (ours)",
     _set("status.allocation.devices.results.0.device", "Ascend910-0"),
     [f'status.allocation.devices.results[0].device: Invalid value: "Ascend910-0": {LABEL}']),
    ("invalid-request-name", _set("spec.devices.requests.0.name", BAD),
     [f'spec.devices.requests[0].name: Invalid value: "{BAD}": {LABEL}',
      'status.allocation.devices.results[0].request: Invalid value: "npu": must be the name of a request in the '
      "claim or the name of a request and a subrequest separated by '/'"]),
    ("missing-classname", _drop("spec.devices.requests.0.deviceClassName"),
     ["spec.devices.requests[0].deviceClassName: Required value"]),
    ("invalid-count", _set("spec.devices.requests.0.count", 0),
     ["spec.devices.requests[0].count: Invalid value: 0: must be greater than zero"]),
    ("too-many-requests", _set("spec.devices.requests", [{"name": f"r{i}", "deviceClassName": "c"} for i in range(33)]),
     ["spec.devices.requests: Too many: 33: must have at most 32 items",
      'status.allocation.devices.results[0].request: Invalid value: "npu": must be the name of a request in the '
      "claim or the name of a request and a subrequest separated by '/'"]),
    ("invalid-constraint-match-attribute",
     _set("spec.devices.constraints", [{"requests": ["npu"], "matchAttribute": "hccsRing"}]),
     ['spec.devices.constraints[0].matchAttribute: Invalid value: "hccsRing": a fully qualified name must be a '
      "domain and a name separated by a slash"]),
    ("valid-constraint (ours: the docs' ring constraint)",
     _set("spec.devices.constraints", [{"requests": ["npu"], "matchAttribute": "npu.huawei.com/hccsRing"}]), []),
    ("invalid-allocation-driver", _set("status.allocation.devices.results.0.driver", BAD),
     [f'status.allocation.devices.results[0].driver: Invalid value: "{BAD}": {SUBDOMAIN}']),
    ("invalid-allocation-pool", _set("status.allocation.devices.results.0.pool", ""),
     ["status.allocation.devices.results[0].pool: Required value"]),
    ("too-many-allocation-results", _set("status.allocation.devices.results",
     [{"request": "npu", "driver": "d", "pool": "p", "device": f"d{i}"} for i in range(33)]),
     ["status.allocation.devices.results: Too many: 33: must have at most 32 items"]),
    ("invalid-reserved-for-not-allocated", _drop("status.allocation"),
     ["status.reservedFor: Forbidden: may not be specified when `allocated` is not set"]),
    ("invalid-reserved-for-duplicate", _set("status.reservedFor", [{"resource": "pods", "name": "p", "uid": "1"}] * 2),
     ['status.reservedFor[1]: Duplicate value: "1"']),
    ("invalid-reserved-for-no-uid", _set("status.reservedFor", [{"resource": "pods", "name": "p"}]),
     ["status.reservedFor[0].uid: Required value"]),
]  # fmt: skip


@pytest.mark.parametrize(("case", "mutate", "errors"), CLAIM_CASES, ids=[c[0] for c in CLAIM_CASES])
def test_validate_claim(case: str, mutate: Mutate, errors: list[str]) -> None:
    obj = a_claim()
    mutate(obj)
    assert validate_resource_claim(obj) == errors


def test_validate_claim_v1_request_needs_exactly_or_first_available() -> None:
    obj = a_claim("v1")
    assert validate_resource_claim(obj) == []
    del obj["spec"]["devices"]["requests"][0]["exactly"]
    assert validate_resource_claim(obj) == [
        "spec.devices.requests[0]: Required value: exactly one of `exactly` or `firstAvailable` is required"
    ]


@pytest.mark.parametrize(
    ("mutate", "errors"),
    [
        pytest.param(_set("status.reservedFor", []), [], id="valid-reserved-for-removal"),
        pytest.param(_set("status.allocation.devices.results.0.device", "ascend910-1"),
                     ['status.allocation: Invalid value: "<value omitted>": field is immutable'],
                     id="invalid-allocation-modification"),
        pytest.param(_set("spec.devices.requests.0.deviceClassName", "other"),
                     ['spec: Invalid value: "<value omitted>": field is immutable'], id="invalid-update-spec"),
    ],
)  # fmt: skip
def test_validate_claim_status_update(mutate: Mutate, errors: list[str]) -> None:
    old = a_claim()
    new = copy.deepcopy(old)
    mutate(new)
    assert validate_resource_claim(new, old) == errors


# ---- DeviceClass ----------------------------------------------------------------------------------


def a_class() -> JsonObj:
    selector = {"cel": {"expression": 'device.driver == "npu.huawei.com"'}}
    return {"apiVersion": "resource.k8s.io/v1beta1", "kind": "DeviceClass", "metadata": {"name": "npu.huawei.com"},
            "spec": {"selectors": [selector]}}  # fmt: skip


@pytest.mark.parametrize(
    ("mutate", "errors"),
    [
        pytest.param(_set("metadata.name", "npu.huawei.com"), [], id="good"),
        pytest.param(_set("spec.selectors", [{"cel": {"expression": "true"}}] * 33),
                     ["spec.selectors: Too many: 33: must have at most 32 items"], id="too-many-selectors"),
        pytest.param(_set("spec.selectors", [{}]), ["spec.selectors[0].cel: Required value"], id="missing-cel"),
        pytest.param(_set("spec.selectors", [{"cel": {"expression": "x" * (10 * 1024 + 1)}}]),
                     ["spec.selectors[0].cel.expression: Too long: may not be more than 10240 bytes"],
                     id="CEL-length"),
        pytest.param(_set("spec.config", [{"opaque": {"driver": BAD, "parameters": {}}}]),
                     [f'spec.config[0].opaque.driver: Invalid value: "{BAD}": {SUBDOMAIN}'],
                     id="invalid-config-driver"),
        pytest.param(_set("spec.config", [{"opaque": {"driver": "d.example.com", "parameters": "x"}}]),
                     ['spec.config[0].opaque.parameters: Invalid value: "<value omitted>": '
                      "must be a valid JSON object"],
                     id="invalid-config-parameters"),
    ],
)  # fmt: skip
def test_validate_class(mutate: Mutate, errors: list[str]) -> None:
    obj = a_class()
    mutate(obj)
    assert validate_device_class(obj) == errors


# ---- ConfigMap ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("data", "binary", "errors"),
    [
        pytest.param({"k": "x" * (CONFIGMAP_MAX_BYTES - 1)}, {}, [], id="just under 1 MiB"),
        pytest.param({"k": "x" * (CONFIGMAP_MAX_BYTES // 2)}, {"b": "eHh4" * (CONFIGMAP_MAX_BYTES // 6 + 1)},
                     [": Too long: may not be more than 1048576 bytes"], id="data and binaryData together over 1 MiB"),
        pytest.param({"k": "é" * (CONFIGMAP_MAX_BYTES // 2 + 1)}, {},
                     [": Too long: may not be more than 1048576 bytes"],
                     id="counted in bytes, not characters"),
        pytest.param({"a b": "x"}, {}, ['data[a b]: Invalid value: "a b": a valid config key must consist of '
                                        "alphanumeric characters, '-', '_' or '.'"], id="invalid key"),
        pytest.param({"..": "x"}, {}, ['data[..]: Invalid value: "..": a valid config key must consist of '
                                       "alphanumeric characters, '-', '_' or '.'"], id="dot-dot key"),
        pytest.param({"k": "x"}, {"k": "eA=="}, ['binaryData[k]: Invalid value: "k": duplicate of key present in data'],
                     id="key in data and binaryData"),
    ],
)  # fmt: skip
def test_validate_config_map(data: dict[str, str], binary: dict[str, str], errors: list[str]) -> None:
    assert validate_configmap({"metadata": {"name": "cm"}, "data": data, "binaryData": binary}) == errors


# ---- ObjectMeta: labels and annotations, every kind ------------------------------------------------


@pytest.mark.parametrize(
    ("labels", "annotations", "errors"),
    [
        pytest.param({"huawei.com/Ascend910": "Ascend910", "accelerator-type": "card-910b-2"},
                     {"huawei.com/AscendReal": "Ascend910-0,Ascend910-1",
                      "ascend.kubectl.kubernetes.io/ascend-npu-configuration": '{"pod_name": "p"}'},
                     [], id="ours: the plugin's and fault-manager's labels and annotations"),
        pytest.param({"a/b/c": "x"}, {},
                     ['metadata.labels: Invalid value: "a/b/c": a qualified name must consist of a name with an '
                      "optional prefix and one '/'"], id="label key with two slashes"),
        pytest.param({"k": "x" * 64}, {}, ['metadata.labels: Invalid value: "' + "x" * 64 + '": must be no more '
                                           "than 63 characters"], id="label value too long"),
        pytest.param({"k": "a,b"}, {}, ['metadata.labels: Invalid value: "a,b": ' + LABEL_VALUE_MSG],
                     id="label value with a comma"),
        pytest.param({}, {"Huawei.COM/Upper": "x"}, [], id="annotation key checked lower-cased"),
        pytest.param({}, {"bad key": "x"}, ['metadata.annotations: Invalid value: "bad key": ' + NAME_PART_MSG],
                     id="annotation key with a space"),
        pytest.param({}, {"k": "x" * (ANNOTATIONS_MAX_BYTES - 1)}, [], id="annotations at the limit"),
        pytest.param({}, {"k": "x" * ANNOTATIONS_MAX_BYTES},
                     ["metadata.annotations: Too long: may not be more than 262144 bytes"],
                     id="annotations over 256 KiB, keys counted"),
        pytest.param({}, {"k": "é" * (ANNOTATIONS_MAX_BYTES // 2)},
                     ["metadata.annotations: Too long: may not be more than 262144 bytes"],
                     id="annotations counted in bytes"),
    ],
)  # fmt: skip
def test_validate_object_meta(labels: dict[str, str], annotations: dict[str, str], errors: list[str]) -> None:
    obj = {"metadata": {"name": "p", "labels": labels, "annotations": annotations}}
    assert validate_object_meta(obj) == errors
