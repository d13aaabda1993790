"""The ctypes declarations of the DCMI structs match what a C compiler makes of the same shapes.

tests/cdouble/layout.c includes tests/cdouble/dcmi_double.h (the header the C double is built
from) and prints every struct's sizeof and every field's offsetof; each line must agree with
ctypes.sizeof / Structure.field.offset, and every declared struct and field must be printed.
"""

from __future__ import annotations

import ctypes
from pathlib import Path

import pytest
from dcmi_exporter.backends.dcmi import structs

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
