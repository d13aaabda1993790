"""The ctypes declarations of the DCMI structs match what a C compiler makes of the same shapes.

tests/cdouble/layout.c includes tests/cdouble/dcmi_double.h (the header the C double is built
from) and prints every struct's sizeof and every field's offsetof; each line must agree with
ctypes.sizeof / Structure.field.offset, and every declared struct and field must be printed.
"""

from __future__ import annotations

import ctypes
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from dcmi_exporter.backends.dcmi import structs
from dcmi_exporter.backends.dcmi.generations import V2_SYMBOLS
from dcmi_exporter.backends.dcmi.library import SIGNATURES

# The fixtures live beside the C double; the repo root is on sys.path (pytest `pythonpath`).
import tests.cdouble.fixtures as _fx
from tests.cdouble import build

cdouble_build_dir = _fx.cdouble_build_dir
dcmi_layout_binary = _fx.dcmi_layout_binary

CType = type[ctypes.Structure] | type[ctypes.Union]


def layout_mismatches(facts: dict[str, int], types: dict[str, CType]) -> list[str]:
    """Every disagreement between the C layout facts and the ctypes declarations."""
    problems: list[str] = []
    for name, value in sorted(facts.items()):
        struct, _, field = name.partition(".")
        cls = types.get(struct)
        if cls is None:
            problems.append(f"{struct}: printed by layout.c but not declared in structs.C_TYPES")
            continue
        if not field:
            if ctypes.sizeof(cls) != value:
                problems.append(f"sizeof {struct}: C {value}, ctypes {ctypes.sizeof(cls)}")
            continue
        descriptor = getattr(cls, field, None)
        if descriptor is None:
            problems.append(f"{name}: no such ctypes field")
        elif descriptor.offset != value:
            problems.append(f"offsetof {name}: C {value}, ctypes {descriptor.offset}")
    for struct, cls in types.items():
        if struct not in facts:
            problems.append(f"{struct}: declared but layout.c does not print its size")
        for field_spec in cls._fields_:
            if f"{struct}.{field_spec[0]}" not in facts:
                problems.append(f"{struct}.{field_spec[0]}: declared but layout.c does not print its offset")
    return problems


@pytest.fixture
def facts(dcmi_layout_binary: Path) -> dict[str, int]:
    result: dict[str, int] = build.read_layout(dcmi_layout_binary)
    return result


def test_layout_printer_covers_the_bound_structs(facts: dict[str, int]) -> None:
    printed = {name.partition(".")[0] for name in facts}
    assert printed == set(structs.C_TYPES)


def test_every_size_and_offset_matches_the_c_compiler(facts: dict[str, int]) -> None:
    assert layout_mismatches(facts, structs.C_TYPES) == []


@pytest.mark.parametrize("struct", sorted(structs.C_TYPES))
def test_struct_layout(facts: dict[str, int], struct: str) -> None:
    cls = structs.C_TYPES[struct]
    assert ctypes.sizeof(cls) == facts[struct]
    for field_spec in cls._fields_:
        assert getattr(cls, field_spec[0]).offset == facts[f"{struct}.{field_spec[0]}"], field_spec[0]


def test_padding_exists_where_the_abi_puts_it(facts: dict[str, int]) -> None:
    # Natural alignment, not packing: u64 fields after a u32 start on an 8-byte boundary.
    assert facts["dcmi_hbm_info.memory_usage"] == 16
    assert facts["dcmi_dms_fault_event.alarm_raised_time"] % 8 == 0
    assert facts["dcmi_event.event_t"] == 8  # the union holds a u64, so it is 8-aligned after `int type`


def test_urma_eid_info_is_24_bytes_as_the_reference_header_makes_it(facts: dict[str, int]) -> None:
    """dcmi_urma_eid_info_t: a 16-byte union aligned 8 (its unsigned long views) + uint eid_index, padded
    to 24. The library writes an array of 32 of them: a 20-byte stride would misread every EID after the first."""
    assert facts["dcmi_urma_eid"] == 16
    assert facts["dcmi_urma_eid_info"] == 24 == ctypes.sizeof(structs.DcmiUrmaEidInfo)
    assert facts["dcmi_urma_eid_info.eid_index"] == 16 == structs.DcmiUrmaEidInfo.eid_index.offset
    assert ctypes.alignment(structs.DcmiUrmaEid) == 8
    assert ctypes.sizeof(structs.DcmiUrmaEidInfo * structs.URMA_EID_MAX_COUNT) == 24 * 32


def test_a_wrong_declaration_is_caught(facts: dict[str, int]) -> None:
    class PackedHbm(ctypes.Structure):  # a plausible mistake: packed instead of natural alignment
        _pack_ = 4
        _fields_ = structs.DcmiHbmInfo._fields_

    class ShortFilter(ctypes.Structure):  # another: a reserved array of the wrong length
        _fields_ = [*structs.DcmiEventFilter._fields_[:-1], ("resv", ctypes.c_ubyte * 16)]

    wrong = dict(structs.C_TYPES, dcmi_hbm_info=PackedHbm, dcmi_event_filter=ShortFilter)
    problems = layout_mismatches(facts, wrong)
    assert any(p.startswith("sizeof dcmi_hbm_info") for p in problems)
    assert any(p.startswith("offsetof dcmi_hbm_info.memory_usage") for p in problems)
    assert any(p.startswith("sizeof dcmi_event_filter") for p in problems)


def passed_structs(argtypes: Sequence[Any]) -> set[CType]:
    """The structs a declaration passes, by value or through a pointer."""
    found: set[CType] = set()
    for arg in argtypes:
        target = getattr(arg, "_type_", arg)  # a POINTER(...) type names its target in _type_
        if isinstance(target, type) and issubclass(target, ctypes.Structure | ctypes.Union):
            found.add(target)
    return found


@pytest.mark.parametrize("function", sorted(SIGNATURES))
def test_every_struct_a_call_passes_is_layout_checked(function: str) -> None:
    """v1 and v2 calls alike: each struct they hand the library is one test_struct_layout compares."""
    assert passed_structs(SIGNATURES[function]) <= set(structs.C_TYPES.values())


def test_every_v2_counterpart_is_declared() -> None:
    """The v2 symbol of every v1 call the backend makes has a declaration (and so its structs are checked)."""
    assert set(V2_SYMBOLS) <= set(SIGNATURES)
    assert {v2 for v2 in V2_SYMBOLS.values() if v2 is not None} <= set(SIGNATURES)


def test_v2_calls_pass_the_v1_structs() -> None:
    """The v2 header (dcmi_interface_api_v2.h) takes the v1 structs: chip info v2, board, HBM, processes."""
    for v1, v2 in V2_SYMBOLS.items():
        if v2 is not None:
            assert passed_structs(SIGNATURES[v2]) == passed_structs(SIGNATURES[v1]), (v1, v2)
