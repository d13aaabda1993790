"""How codes are written: the reference's FormatFaultCodeHex tests, ported with their inputs and expected values
(component/ascend-device-plugin/pkg/common/fault_code_test.go). The Go tests fill its global format map;
ours is a mapping built by register_spellings / the table loaders, passed explicitly."""

from __future__ import annotations

import pytest
from ascend_common.faults import format_code_hex, load_fault_code_table, load_fault_customization
from ascend_common.faults.table import register_spellings

# --- TestRegisterFaultCodeFormat -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("leaf", "texts", "expected"),
    [
        ("register 9-digit code with leading zero", ["020001002"], {"20001002": "020001002"}),
        ("register 8-digit code without leading zero", ["81078603"], {"81078603": "81078603"}),
        ("register invalid hex string should not panic", ["invalid"], {}),
        ("duplicate registration should keep first format", ["020001002", "20001002"], {"20001002": "020001002"}),
    ],
    ids=lambda v: v if isinstance(v, str) else None,
)
def test_register_fault_code_format(leaf: str, texts: list[str], expected: dict[str, str]) -> None:
    """TestRegisterFaultCodeFormat: 4 cases. Keys are our canonical codes (no leading zeros)."""
    spellings: dict[str, str] = {}
    for text in texts:
        register_spellings(spellings, [text])
    assert spellings == expected


# --- TestRegisterFaultCodeFormats ------------------------------------------------------------------


def test_register_fault_code_formats_batch() -> None:
    """TestRegisterFaultCodeFormats, "batch register multiple codes"."""
    spellings: dict[str, str] = {}
    register_spellings(spellings, ["020001002", "020000002", "81078603"])
    assert spellings == {"20001002": "020001002", "20000002": "020000002", "81078603": "81078603"}
    assert len(spellings) == 3


def test_register_fault_code_formats_empty() -> None:
    """TestRegisterFaultCodeFormats, "batch register empty slice"."""
    spellings: dict[str, str] = {}
    register_spellings(spellings, [])
    assert spellings == {}


def test_a_0x_prefix_or_spaces_are_not_registered() -> None:
    """Go's ParseInt(s, 16) refuses them, so the reference falls back to %x for such a code."""
    spellings: dict[str, str] = {}
    register_spellings(spellings, ["0x020001002", " 020001002"])
    assert spellings == {}


# --- TestFormatFaultCodeHex ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("leaf", "spellings", "code", "expected"),
    [
        ("code with leading zero in format map", {"20001002": "020001002"}, 0x020001002, "020001002"),
        ("code without leading zero in format map", {"81078603": "81078603"}, 0x81078603, "81078603"),
        ("code not in format map should fall back to simple hex", {}, 0x81078603, "81078603"),
        ("code with leading zero not in format map should drop leading zero", {}, 0x020001002, "20001002"),
    ],
    ids=lambda v: v if isinstance(v, str) and " " in v else None,
)
def test_format_fault_code_hex(leaf: str, spellings: dict[str, str], code: int, expected: str) -> None:
    """TestFormatFaultCodeHex: 4 cases."""
    assert format_code_hex(code, spellings) == expected


def test_format_is_lower_case_and_the_first_mapping_wins() -> None:
    assert format_code_hex("80C98008", {}) == "80c98008"
    assert format_code_hex("20001002", {"20001002": "020001002"}, {"20001002": "20001002"}) == "020001002"


# --- TestLoadFaultCodeRegistersFormat --------------------------------------------------------------


def test_load_fault_code_registers_format() -> None:
    """TestLoadFaultCodeRegistersFormat: "codes from faultCode.json should be in format map after loading"."""
    table = load_fault_code_table(
        {
            "NotHandleFaultCodes": ["81078603", "020001002"],
            "RestartRequestCodes": ["80C98008"],
            "RestartBusinessCodes": ["80E01801"],
            "RestartNPUCodes": ["8C03A000"],
            "FreeRestartNPUCodes": ["8C0E4E00"],
            "SeparateNPUCodes": ["80E3A201"],
            "PreSeparateNPUCodes": ["110001024"],
            "SubHealthFaultCodes": ["020000002", "110000002"],
        }
    )
    s = table.spellings
    # 9-digit codes with leading zero keep it; 9-digit codes without one and 8-digit codes keep their form.
    assert s["20001002"] == "020001002"
    assert s["20000002"] == "020000002"
    assert s["110001024"] == "110001024"
    assert s["110000002"] == "110000002"
    assert s["81078603"] == "81078603"
    assert s["80C98008"] == "80c98008"


def test_customization_spellings_come_after_the_table_and_frequency_before_duration() -> None:
    custom = load_fault_customization(
        {
            "FaultDuration": [
                {"EventId": ["81078603"], "FaultTimeout": 20, "RecoverTimeout": 60, "FaultHandling": "PreSeparateNPU"}
            ],
            "FaultFrequency": [
                {"EventId": ["081078603"], "TimeWindow": 86400, "Times": 5, "FaultHandling": "ManuallySeparateNPU"}
            ],
        }
    )
    assert custom.spellings == {"81078603": "081078603"}
    table = load_fault_code_table({"NotHandleFaultCodes": ["81078603"]})
    assert format_code_hex("81078603", table.spellings, custom.spellings) == "81078603"
    assert format_code_hex("81078603", {}, custom.spellings) == "081078603"
