"""Pod annotations and the Go-compatible JSON encoder (contract sections 5 and 6).

No Go toolchain is available here, so the golden strings below were derived by hand from Go's
encoding/json (encode.go appendString / floatEncoder, tables.go htmlSafeSet, Go >= 1.22) and
from the reference's structs (pkg/common/proto.go Instance, Device); the property test checks
the encoder against Python's json module with Go's extra escapes applied.
"""

from __future__ import annotations

import json
import math
from typing import Any

import pytest
from ascend_common.chips import ResourceType
from ascend_device_plugin.core import (
    ConfigDevice,
    configuration_key,
    device_configuration,
    go_json,
    go_map,
    real_allocation_annotations,
)
from ascend_device_plugin.core.gojson import go_float
from hypothesis import given
from hypothesis import strategies as st

# --- go_json ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "golden"),
    [
        (None, "null"),
        (True, "true"),
        (False, "false"),
        (0, "0"),
        (-5, "-5"),
        (2**63, "9223372036854775808"),
        ("", '""'),
        ("\b\f\n\r\t", r'"\b\f\n\r\t"'),  # short forms, \b and \f since Go 1.22
        ("\x00\x01\x0b\x1f", r'"\u0000\u0001\u000b\u001f"'),
        ("<a href='x'>&</a>", '"' + r"\u003ca href='x'\u003e\u0026\u003c/a\u003e" + '"'),
        ("\u2028\u2029", r'"\u2028\u2029"'),
        ("\x7f", '"\x7f"'),  # DEL is in Go's htmlSafeSet
        ("é中😀", '"é中😀"'),  # non-ASCII stays UTF-8
        ('"\\', r'"\"\\"'),
        ("a/b", '"a/b"'),  # Go does not escape the solidus
        ("\ud800x", r'"\ufffdx"'),  # a lone surrogate is invalid UTF-8 to Go
        ([], "[]"),
        ({}, "{}"),
        ((1, "a", None), '[1,"a",null]'),
        ({"b": 1, "a": [True, False]}, '{"b":1,"a":[true,false]}'),  # a struct: field order kept
        ({"k<": "v>"}, r'{"k\u003c":"v\u003e"}'),  # keys are escaped too
    ],
)
def test_go_json_golden(value: Any, golden: str) -> None:
    assert go_json(value) == golden


@pytest.mark.parametrize(
    ("value", "golden"),
    [
        (1.0, "1"),
        (100.0, "100"),
        (0.5, "0.5"),
        (3.14, "3.14"),
        (-0.0, "-0"),
        (0.0, "0"),
        (1e-6, "0.000001"),
        (1e-5, "0.00001"),
        (1e-7, "1e-7"),
        (1.5e-10, "1.5e-10"),
        (1e20, "100000000000000000000"),
        (1e21, "1e+21"),
        (2.5e300, "2.5e+300"),
        (123456789.125, "123456789.125"),
        (0.1 + 0.2, "0.30000000000000004"),
    ],
)
def test_go_float_golden(value: float, golden: str) -> None:
    assert go_float(value) == golden
    assert go_json([value]) == f"[{golden}]"


@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf])
def test_go_json_rejects_what_go_rejects(value: float) -> None:
    with pytest.raises(ValueError, match="unsupported value"):
        go_json({"x": value})


@pytest.mark.parametrize("value", [{1: "x"}, {"a": {2: 3}}, object(), {1, 2}, b"bytes"])
def test_go_json_rejects_unsupported_types(value: Any) -> None:
    with pytest.raises(TypeError):
        go_json(value)


def test_go_map_sorts_keys_as_go_sorts_map_keys() -> None:
    mapping = {"b": 1, "Ascend910-2": 2, "Ascend910-10": 3, "a": 4, "é": 5, "Z": 6}
    assert list(go_map(mapping)) == ["Ascend910-10", "Ascend910-2", "Z", "a", "b", "é"]


_json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**63), 2**64) | st.text(st.characters(blacklist_categories=["Cs"])),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=5), children, max_size=4),
    max_leaves=12,
)


@given(_json_values)
def test_go_json_matches_python_json_plus_go_html_escaping(value: Any) -> None:
    python = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    for raw, escaped in (
        ("<", "\\u003c"),
        (">", "\\u003e"),
        ("&", "\\u0026"),
        ("\u2028", "\\u2028"),
        ("\u2029", "\\u2029"),
    ):
        python = python.replace(raw, escaped)
    encoded = go_json(value)
    assert encoded == python
    assert json.loads(encoded) == value


@given(st.floats(allow_nan=False, allow_infinity=False))
def test_go_float_round_trips(value: float) -> None:
    assert float(go_float(value)) == value
    assert "e-0" not in go_float(value)


# --- AscendReal / kltDev ---------------------------------------------------------------------


def test_real_allocation_annotations_sorted_as_go_sorts_strings() -> None:
    annotations = real_allocation_annotations(
        ["Ascend910-2", "Ascend910-10", "Ascend910-1"], ["Ascend910-10", "Ascend910-2", "Ascend910-1"]
    )
    assert annotations == {
        "huawei.com/AscendReal": "Ascend910-1,Ascend910-10,Ascend910-2",
        "huawei.com/kltDev": "Ascend910-1,Ascend910-10,Ascend910-2",
    }


def test_volcano_real_devices_differ_from_kubelet_ids() -> None:
    annotations = real_allocation_annotations(["Ascend910-5", "Ascend910-4"], ["Ascend910-0", "Ascend910-1"])
    assert annotations["huawei.com/AscendReal"] == "Ascend910-4,Ascend910-5"
    assert annotations["huawei.com/kltDev"] == "Ascend910-0,Ascend910-1"


def test_preset_vnpu_writes_only_klt_dev() -> None:
    assert real_allocation_annotations(["Ascend910-2c-100-0"], ["Ascend910-2c-100-0"], preset_vnpu=True) == {
        "huawei.com/kltDev": "Ascend910-2c-100-0"
    }


def test_dynamic_vnpu_real_device_gets_its_vfg_suffix() -> None:
    klt = [f"npu-core-{n}" for n in (3, 1, 2, 0)]
    annotations = real_allocation_annotations(["Ascend910-4c-100-0"], klt, vfg_ids={"Ascend910-4c-100-0": 3})
    assert annotations == {
        "huawei.com/AscendReal": "Ascend910-4c-100-0_3",
        "huawei.com/kltDev": "npu-core-0,npu-core-1,npu-core-2,npu-core-3",
    }


# --- ascend-910-configuration ----------------------------------------------------------------


def test_device_configuration_golden_physical() -> None:
    value = device_configuration(
        "train-0",
        "7b1c-uid",
        "10.0.0.5",
        [ConfigDevice(1, "192.168.100.2"), ConfigDevice(0, "192.168.100.1")],
        vnpu=False,
        server_ip="10.0.0.5",
    )
    assert value == (
        '{"pod_name":"train-0","server_id":"7b1c-uid","host_ip":"10.0.0.5","super_pod_id":-1,'
        '"devices":[{"device_id":"0","device_ip":"192.168.100.1"},{"device_id":"1","device_ip":"192.168.100.2"}],'
        '"rack_id":-1,"server_index":"","server_ip":"10.0.0.5"}'
    )


def test_device_configuration_golden_super_pod() -> None:
    value = device_configuration(
        "job-w-1",
        "u",
        "10.0.0.6",
        [(10, None, 104), (2, "10.2.0.2", 96)],
        vnpu=False,
        super_pod_id=3,
        rack_id=1,
        server_index="7",
        server_ip="10.0.0.6",
    )
    assert value == (
        '{"pod_name":"job-w-1","server_id":"u","host_ip":"10.0.0.6","super_pod_id":3,'
        '"devices":[{"device_id":"2","device_ip":"10.2.0.2","super_device_id":"96"},'
        '{"device_id":"10","device_ip":"-1","super_device_id":"104"}],'
        '"rack_id":1,"server_index":"7","server_ip":"10.0.0.6"}'
    )


def test_device_configuration_golden_vnpu() -> None:
    value = device_configuration("infer", "u", "h", [ConfigDevice(0, "192.168.1.1", 7)], vnpu=True)
    assert value == (
        '{"pod_name":"infer","server_id":"u","host_ip":"h","super_pod_id":-1,'
        '"devices":[{"device_id":"0","device_ip":"127.0.0.1"}],"rack_id":-1,"server_index":"","server_ip":""}'
    )


def test_device_configuration_without_devices_is_a_nil_slice() -> None:
    assert '"devices":null' in device_configuration("p", "u", "h", [], vnpu=False)


def test_device_configuration_escapes_like_go() -> None:
    value = device_configuration("a<b>&c", "u", "h", [ConfigDevice(0, "")], vnpu=False)
    assert value.startswith(r'{"pod_name":"a\u003cb\u003e\u0026c",')
    assert '"device_ip":""' in value  # an empty IP (inference cards) is written as given
    assert json.loads(value)["pod_name"] == "a<b>&c"


@pytest.mark.parametrize(
    ("rtype", "duo", "key"),
    [
        (ResourceType.ASCEND910, False, "ascend.kubectl.kubernetes.io/ascend-910-configuration"),
        (ResourceType.ASCEND310P, True, "ascend.kubectl.kubernetes.io/ascend-910-configuration"),
        (ResourceType.ASCEND310P, False, None),
        (ResourceType.ASCEND310, False, None),
        (ResourceType.NPU, False, "ascend.kubectl.kubernetes.io/ascend-npu-configuration"),
    ],
)
def test_configuration_key(rtype: ResourceType, duo: bool, key: str | None) -> None:
    assert configuration_key(rtype, atlas_300i_duo=duo) == key
