"""The Go-compatible JSON encoder (contract section 6).

The hand-derived golden strings follow Go's encoding/json (encode.go appendString / floatEncoder,
tables.go htmlSafeSet, Go >= 1.22); the property test checks the encoder against Python's json
module with Go's extra escapes applied. Vectors produced by a real Go toolchain are checked in
services/fault-manager/tests/test_deviceinfo_golden.py (with the ConfigMap renderers they feed).
"""

from __future__ import annotations

import json
import math
from typing import Any

import pytest
from ascend_common.gojson import go_float, go_json, go_map
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
