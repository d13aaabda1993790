"""Loading faultCode.json and SwitchFaultCode.json (contract sections 6 and 7)."""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path
from typing import Any

import pytest
from ascend_common.faults import (
    MAIN_LIST_KEYS,
    NETWORK_LIST_KEYS,
    FaultCodeTable,
    FaultLevel,
    FaultPolicyError,
    SwitchFaultLevel,
    default_fault_code_table,
    default_switch_fault_table,
    load_fault_code_table,
    load_switch_fault_table,
    normalize_code,
    normalize_switch_code,
)

SHARED_DATA = Path("/work/shared/data/ascend")
DATA_FILES = ["faultCode.json", "faultCustomization.json", "SwitchFaultCode.json"]


def _packaged_json(name: str) -> Any:
    return json.loads(resources.files("ascend_common.data").joinpath(name).read_bytes())


# --- the packaged data -------------------------------------------------------------------------


@pytest.mark.parametrize("name", DATA_FILES)
def test_packaged_data_equals_the_shared_reference_copy(name: str) -> None:
    if not SHARED_DATA.is_dir():
        pytest.skip(f"{SHARED_DATA} is not available here")
    packaged = resources.files("ascend_common.data").joinpath(name).read_bytes()
    assert packaged == (SHARED_DATA / name).read_bytes()


def test_default_table_holds_every_packaged_code() -> None:
    raw = _packaged_json("faultCode.json")
    distinct = {normalize_code(code) for key in MAIN_LIST_KEYS for code in raw.get(key, [])}
    table = default_fault_code_table()
    assert set(table.levels) == distinct
    assert len(distinct) > 700  # the reference table has about 800 codes; guards against an empty load


def test_default_tables_are_cached() -> None:
    assert default_fault_code_table() is default_fault_code_table()
    assert default_switch_fault_table() is default_switch_fault_table()


def test_loading_bytes_text_and_mapping_agree() -> None:
    data = resources.files("ascend_common.data").joinpath("faultCode.json").read_bytes()
    from_bytes = load_fault_code_table(data)
    assert load_fault_code_table(data.decode()) == from_bytes
    assert load_fault_code_table(json.loads(data)) == from_bytes
    assert from_bytes == default_fault_code_table()


# Quirks of the reference table, found with a script over faultCode.json:
#   B4060011 is listed twice in RestartBusinessCodes;
#   A2301001 is listed in RestartBusinessCodes and in SeparateNPUCodes.
def test_reference_quirks_are_present_in_the_packaged_file() -> None:
    raw = _packaged_json("faultCode.json")
    assert raw["RestartBusinessCodes"].count("B4060011") == 2
    assert "A2301001" in raw["RestartBusinessCodes"]
    assert "A2301001" in raw["SeparateNPUCodes"]


def test_duplicate_code_is_accepted_and_recorded() -> None:
    table = default_fault_code_table()
    assert table.levels["B4060011"] is FaultLevel.RESTART_BUSINESS
    assert ("RestartBusinessCodes", "B4060011") in table.duplicate_codes
    assert "B4060011" not in table.multi_level_codes


def test_code_under_two_levels_takes_the_more_serious() -> None:
    table = default_fault_code_table()
    assert table.levels["A2301001"] is FaultLevel.SEPARATE_NPU
    assert set(table.multi_level_codes["A2301001"]) == {FaultLevel.RESTART_BUSINESS, FaultLevel.SEPARATE_NPU}


@pytest.mark.parametrize(
    ("first", "second", "winner"),
    [
        ("RestartBusinessCodes", "SeparateNPUCodes", FaultLevel.SEPARATE_NPU),
        ("SeparateNPUCodes", "RestartBusinessCodes", FaultLevel.SEPARATE_NPU),
        ("NotHandleFaultCodes", "SubHealthFaultCodes", FaultLevel.SUB_HEALTH_FAULT),
        ("PreSeparateNPUCodes", "RestartNPUCodes", FaultLevel.PRE_SEPARATE_NPU),
    ],
)
def test_more_serious_wins_whatever_the_key_order(first: str, second: str, winner: FaultLevel) -> None:
    table = load_fault_code_table(f'{{"{first}": ["80E01801"], "{second}": ["0x80e01801"]}}')
    assert table.levels == {"80E01801": winner}


# --- code normalisation ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("80E01801", "80E01801"),
        ("80e01801", "80E01801"),
        (" 0x80e01801\n", "80E01801"),
        ("0X8C1FA006", "8C1FA006"),
        ("200001002", "200001002"),  # 9 digits, above 32 bits
        ("110000002", "110000002"),
        ("020001002", "20001002"),  # the reference parses codes as numbers: leading zeros do not count
        ("0", "0"),
        ("000", "0"),
        (0x80E01801, "80E01801"),
        (0x200001002, "200001002"),
        (0, "0"),
    ],
)
def test_normalize_code(raw: str | int, expected: str) -> None:
    assert normalize_code(raw) == expected


@pytest.mark.parametrize(
    "raw",
    ["", "   ", "0x", "80E0180G", "80E0 1801", "-80E01801", "1234567890", "0x1234567890", 16**9, -1, True, None, 1.5],
)
def test_normalize_code_rejects(raw: Any) -> None:
    with pytest.raises(ValueError):  # noqa: PT011 - the message varies with the input
        normalize_code(raw)


# --- broken tables -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("doc", "key", "index"),
    [
        ({"SeparateNPUCode": ["80E01801"]}, "SeparateNPUCode", None),  # unknown (misspelt) key
        ({"NotHandleFaultCodes": [], "Extra": []}, "Extra", None),
        ({"SeparateNPUCodes": "80E01801"}, "SeparateNPUCodes", None),  # not a list
        ({"RestartNPUCodes": {"80E01801": 1}}, "RestartNPUCodes", None),
        ({"SubHealthFaultNetworkCodes": 7}, "SubHealthFaultNetworkCodes", None),
        ({"RestartRequestCodes": ["80E01801", 2162169857]}, "RestartRequestCodes", 1),  # non-string entry
        ({"FreeRestartNPUCodes": [None]}, "FreeRestartNPUCodes", 0),
        ({"PreSeparateNPUCodes": ["8118043C", "8118043X"]}, "PreSeparateNPUCodes", 1),  # non-hex
        ({"SeparateNPUNetworkCodes": ["1234567890"]}, "SeparateNPUNetworkCodes", 0),  # 10 digits
        ({"NotHandleFaultCodes": ["80E21007", "", "80E38003"]}, "NotHandleFaultCodes", 1),
    ],
)
def test_broken_table_is_rejected_naming_the_key(doc: dict[str, Any], key: str, index: int | None) -> None:
    with pytest.raises(FaultPolicyError) as caught:
        load_fault_code_table(doc)
    assert caught.value.key == key
    assert caught.value.index == index
    assert key in str(caught.value)
    if index is not None:
        assert f"[{index}]" in str(caught.value)
    assert isinstance(caught.value, ValueError)


@pytest.mark.parametrize("doc", [b"{not json", "", "[]", '"SeparateNPUCodes"', b"\xff\xfe", "null"])
def test_unparsable_document_is_rejected_without_a_key(doc: bytes | str) -> None:
    with pytest.raises(FaultPolicyError) as caught:
        load_fault_code_table(doc)
    assert caught.value.key is None


def test_broken_table_in_real_data_names_the_key() -> None:
    doc = _packaged_json("faultCode.json")
    doc["RestartNPUCodes"] = [*doc["RestartNPUCodes"], "NOTACODE"]
    with pytest.raises(FaultPolicyError) as caught:
        load_fault_code_table(doc)
    assert caught.value.key == "RestartNPUCodes"
    assert caught.value.index == len(doc["RestartNPUCodes"]) - 1


# --- what the reference accepts ----------------------------------------------------------------


def test_missing_keys_are_empty_lists() -> None:
    # The reference unmarshals into a Go struct: an absent key leaves an empty slice.
    assert load_fault_code_table({}) == FaultCodeTable()
    table = load_fault_code_table({"SeparateNPUCodes": ["80E3A201"]})
    assert table.levels == {"80E3A201": FaultLevel.SEPARATE_NPU}
    assert table.network_levels == {}


def test_null_list_is_an_empty_list() -> None:
    assert load_fault_code_table('{"SeparateNPUCodes": null}').levels == {}


def test_every_contract_key_is_accepted() -> None:
    doc = {key: [f"{i:08X}"] for i, key in enumerate([*MAIN_LIST_KEYS, *NETWORK_LIST_KEYS], start=1)}
    table = load_fault_code_table(doc)
    assert table.levels == {f"{i:08X}".lstrip("0"): level for i, level in enumerate(MAIN_LIST_KEYS.values(), start=1)}
    offset = len(MAIN_LIST_KEYS)
    assert table.network_levels == {
        f"{i + offset:08X}".lstrip("0"): level for i, level in enumerate(NETWORK_LIST_KEYS.values(), start=1)
    }


def test_table_is_immutable() -> None:
    table = default_fault_code_table()
    with pytest.raises(TypeError):
        table.levels["80E01801"] = FaultLevel.NORMAL_NPU  # type: ignore[index]
    with pytest.raises(AttributeError):
        table.levels = {}  # type: ignore[misc]


# --- switch fault table ------------------------------------------------------------------------

# Real codes from the packaged SwitchFaultCode.json, one or more per listed level.
SWITCH_CODES = [
    ("NotHandleFaultCodes", "[0x00f1fef5,155913,cpu,na]", SwitchFaultLevel.NOT_HANDLE),
    ("NotHandleFaultCodes", "[0x08520003,na,L2,na]", SwitchFaultLevel.NOT_HANDLE),
    ("SubHealthFaultCodes", "[0x00f103b6,155908,na,na]", SwitchFaultLevel.SUB_HEALTH),
    ("SubHealthFaultCodes", "[0x00f10509,132332,npu,na]", SwitchFaultLevel.SUB_HEALTH),
    ("RestartRequestFaultCodes", "[0x00f1fef5,155914,npu,na]", SwitchFaultLevel.RESTART_REQUEST),
    ("SeparateFaultCodes", "[0x00f103b0,155907,na,na]", SwitchFaultLevel.SEPARATE),
    ("SeparateFaultCodes", "[0x08520003,na,npu,na]", SwitchFaultLevel.SEPARATE),
]


@pytest.mark.parametrize(("key", "code", "level"), SWITCH_CODES)
def test_packaged_switch_codes(key: str, code: str, level: SwitchFaultLevel) -> None:
    assert code in _packaged_json("SwitchFaultCode.json")[key]  # the expectation is read off the file
    assert default_switch_fault_table().levels[code] is level


def test_switch_table_holds_every_packaged_code() -> None:
    raw = _packaged_json("SwitchFaultCode.json")
    assert set(default_switch_fault_table().levels) == {code for codes in raw.values() for code in codes}


@pytest.mark.parametrize(
    ("key", "level"),
    [
        ("NotHandleFaultCodes", SwitchFaultLevel.NOT_HANDLE),
        ("SubHealthFaultCodes", SwitchFaultLevel.SUB_HEALTH),
        ("RestartRequestFaultCodes", SwitchFaultLevel.RESTART_REQUEST),
        ("ResetFaultCodes", SwitchFaultLevel.SEPARATE),  # the reference folds Reset into Separate
        ("PreSeparateFaultCodes", SwitchFaultLevel.PRE_SEPARATE),
        ("SeparateFaultCodes", SwitchFaultLevel.SEPARATE),
    ],
)
def test_switch_keys(key: str, level: SwitchFaultLevel) -> None:
    table = load_switch_fault_table({key: ["[0x00f1ff09,155914,cpu,na]"]})
    assert table.levels == {"[0x00f1ff09,155914,cpu,na]": level}


def test_switch_code_in_two_lists_takes_the_more_serious() -> None:
    code = "[0x00f1ff09,155914,cpu,na]"
    table = load_switch_fault_table({"SeparateFaultCodes": [code], "SubHealthFaultCodes": [code, code]})
    assert table.levels == {code: SwitchFaultLevel.SEPARATE}
    assert ("SubHealthFaultCodes", code) in table.duplicate_codes
    assert set(table.multi_level_codes[code]) == {SwitchFaultLevel.SEPARATE, SwitchFaultLevel.SUB_HEALTH}


@pytest.mark.parametrize(
    ("doc", "key", "index"),
    [
        ({"ResetFaultCode": []}, "ResetFaultCode", None),
        ({"SeparateNPUCodes": []}, "SeparateNPUCodes", None),  # a faultCode.json key is not a switch key
        ({"SeparateFaultCodes": "[0x00f103b0,155907,na,na]"}, "SeparateFaultCodes", None),
        ({"SubHealthFaultCodes": ["[0x00f103b6,155908,na,na]", 5]}, "SubHealthFaultCodes", 1),
        ({"NotHandleFaultCodes": ["0x00f1fef5,155913,cpu,na"]}, "NotHandleFaultCodes", 0),
        ({"NotHandleFaultCodes": ["[0x00f1fef5,155913,cpu]"]}, "NotHandleFaultCodes", 0),
        ({"NotHandleFaultCodes": ["[0x00f1fef5,,cpu,na]"]}, "NotHandleFaultCodes", 0),
    ],
)
def test_broken_switch_table_is_rejected_naming_the_key(doc: dict[str, Any], key: str, index: int | None) -> None:
    with pytest.raises(FaultPolicyError) as caught:
        load_switch_fault_table(doc)
    assert caught.value.key == key
    assert caught.value.index == index


def test_switch_code_normalisation_only_trims() -> None:
    assert normalize_switch_code("  [0x00f1fef5,155913,cpu,na] ") == "[0x00f1fef5,155913,cpu,na]"
    # The reference matches switch codes exactly; case is kept.
    assert normalize_switch_code("[0x00F1FEF5,155913,cpu,na]") == "[0x00F1FEF5,155913,cpu,na]"
