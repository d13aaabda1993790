"""Fuzzing the fault policy files (faultCode.json, faultCustomization.json, SwitchFaultCode.json).

They come from the `mindx-dl-fault-config` ConfigMap, `--policy-dir` or `PUT /v1/policy`, i.e. from an
administrator's editor. Starting from the packaged reference files, each example deletes keys, puts
wrong types, out-of-range numbers, unknown or malformed codes, duplicates, or damages the bytes. A
file is either accepted, and then the policy is usable (every rule in range, every listed code at
least as serious as its list, the engine runs on it), or refused with a FaultPolicyError whose
message names the file and the path of the bad value; never any other exception.
"""

from __future__ import annotations

import json
import math
import re
from importlib import resources
from typing import Any, cast

import pytest
from ascend_common.faults import (
    DURATION_LEVELS,
    FAULT_TIMEOUT_RANGE,
    FREQUENCY_LEVELS,
    MAIN_LIST_KEYS,
    NETWORK_LIST_KEYS,
    RECOVER_TIMEOUT_RANGE,
    RELEASE_TIME_WINDOW_RANGE,
    SWITCH_LIST_KEYS,
    TIME_WINDOW_RANGE,
    TIMES_RANGE,
    WAIT_DEVICE_RESET_RANGE,
    WAIT_FAULT_SELF_HEALING_RANGE,
    WAIT_PROCESS_READ_CM_RANGE,
    FaultCodeTable,
    FaultCustomization,
    FaultLevel,
    FaultPolicyError,
    SwitchFaultTable,
    default_fault_code_table,
    default_fault_customization,
    default_switch_fault_table,
    load_fault_code_table,
    load_fault_customization,
    load_switch_fault_table,
    normalize_code,
    normalize_switch_code,
)
from fault_manager.policy.engine import FaultEngine, Policy
from fault_manager.policy.keeper import FILES, POLL_RANGE, build, poll_interval
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from tests.fuzz.strategies import any_text, damaged_bytes, json_values, mutated_json, mutated_text, outcome

FUZZ = settings(max_examples=150, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])


def packaged(name: str) -> dict[str, Any]:
    return cast(dict[str, Any], json.loads(resources.files("ascend_common.data").joinpath(name).read_bytes()))


FAULT_CODE = packaged("faultCode.json")
CUSTOMIZATION = packaged("faultCustomization.json")
SWITCH = packaged("SwitchFaultCode.json")
# Small valid documents too: mutations of a 1,000-code table rarely touch the interesting parts.
SMALL_FAULT_CODE = {"RestartNPUCodes": ["8C1FA006"], "SeparateNPUCodes": ["80E01801"], "NotHandleFaultNetworkCodes": []}
SMALL_SWITCH = {"SeparateFaultCodes": ["[0x00f1fef5,155913,cpu,na]"], "NotHandleFaultCodes": None}

REAL_CODES = sorted({code for key in MAIN_LIST_KEYS for code in FAULT_CODE.get(key) or []})[:40]
BAD_CODES = [
    "", "0x", "0xZZ", "GG", "80e01801", " 80E01801 ", "0x80E01801", "1234567890", "-1", "FFFFFFFFF", "000000000",
    "80E01801\n", "80E0180\u0661", "8C1F\u00a0A006", "[0x00f1fef5,155913,cpu,na]", "[0x1,2,3]", "[a,b,c,d]\n", "[,,,]",
]  # fmt: skip
NUMBERS = [
    -1, 0, 1, 4, 5, 15, 29, 30, 59, 60, 90, 91, 100, 101, 150, 180, 181, 600, 601, 86400, 86401, 864000, 864001,
    2**32, 2**32 + 1, 2**63, 10**30, 1.5, 60.0, 1e308, math.inf, -math.inf, math.nan, True, False,
]  # fmt: skip
LEVEL_NAMES = [level.value for level in FaultLevel] + ["", "separatenpu", "Separate", "RestartRequestCodes"]
POLICY_VALUES = (
    json_values
    | st.sampled_from(REAL_CODES + BAD_CODES)
    | st.sampled_from(NUMBERS)
    | st.sampled_from(LEVEL_NAMES)
    | st.lists(st.sampled_from(REAL_CODES + BAD_CODES), max_size=3)
    | mutated_text([*REAL_CODES[:5], "[0x00f1fef5,155913,cpu,na]"])
)
POLICY_KEYS = (
    st.sampled_from([*MAIN_LIST_KEYS, *NETWORK_LIST_KEYS, *SWITCH_LIST_KEYS, "EventId", "FaultTimeout", "Times"])
    | st.sampled_from(["faulttimeout", "TimeWindow ", "ReleaseTimeWindow", "GraceTolerance", "WaitDeviceResetTime"])
    | st.text(max_size=12)
)


def document(doc: Any) -> st.SearchStrategy[bytes]:
    """The bytes of a mutated `doc`, or its bytes damaged."""
    text = mutated_json(doc, POLICY_VALUES, POLICY_KEYS).map(lambda d: json.dumps(d).encode())
    return text | damaged_bytes(doc)


def assert_names_file(error: Exception | None, file: str) -> None:
    assert isinstance(error, FaultPolicyError)
    event(f"refused: {str(error).split(':')[1].strip()[:30]}")
    message = str(error)
    assert message.startswith(f"{file}: "), message
    key = error.key
    if key is not None:
        assert key in message or repr(key)[1:-1] in message, (key, message)


def engine_runs(policy: Policy, codes: list[str]) -> None:
    """The engine adopts the policy and evaluates a fault of each code over a day without an error."""
    event("accepted")
    engine = FaultEngine(policy)
    engine.chip("Ascend910-0", 0, 0)
    for t, code in enumerate(codes[:20]):
        engine.apply("Ascend910-0", code, "occur", None, float(t))
        engine.apply("Ascend910-0", code, "recover", 2, float(t) + 30.0)
        engine.apply("Ascend910-0", code, "once", 1, float(t) + 40.0)
    for now in (0.0, 25.0, 100.0, 86_400.0 * 3):
        verdict = engine.evaluate("Ascend910-0", now).verdict
        assert isinstance(verdict.fault_level, FaultLevel)


def check_table(table: FaultCodeTable, doc: Any) -> None:
    for keys, levels in ((MAIN_LIST_KEYS, table.levels), (NETWORK_LIST_KEYS, table.network_levels)):
        for key, level in keys.items():
            for code in doc.get(key) or []:
                # A code listed twice or under two levels keeps the more serious level, never a lesser one.
                assert levels[normalize_code(code)].rank >= level.rank, (key, code)
    for code, level in [*table.levels.items(), *table.network_levels.items()]:
        assert normalize_code(code) == code and isinstance(level, FaultLevel)
    engine_runs(Policy(table, default_fault_customization(), default_switch_fault_table()), list(table.levels))


@FUZZ
@given(data=document(FAULT_CODE) | document(SMALL_FAULT_CODE))
def test_fault_code_table_is_usable_or_refused_naming_the_key(data: bytes) -> None:
    result = outcome(load_fault_code_table, data, errors=(FaultPolicyError,))
    if result.error is not None:
        assert_names_file(result.error, "faultCode.json")
        return
    check_table(cast(FaultCodeTable, result.value), json.loads(data))


def check_switch(table: SwitchFaultTable, doc: Any) -> None:
    for key, level in SWITCH_LIST_KEYS.items():
        for code in doc.get(key) or []:
            assert int(table.levels[normalize_switch_code(code)]) >= int(level), (key, code)
    assert all(normalize_switch_code(code) == code for code in table.levels)


@FUZZ
@given(data=document(SWITCH) | document(SMALL_SWITCH))
def test_switch_table_is_usable_or_refused_naming_the_key(data: bytes) -> None:
    result = outcome(load_switch_fault_table, data, errors=(FaultPolicyError,))
    if result.error is not None:
        assert_names_file(result.error, "SwitchFaultCode.json")
        return
    check_switch(cast(SwitchFaultTable, result.value), json.loads(data))


def within(value: int, bounds: tuple[int, int]) -> bool:
    return bounds[0] <= value <= bounds[1]


def check_customization(custom: FaultCustomization) -> None:
    for rule in custom.durations:
        assert within(rule.fault_timeout_s, FAULT_TIMEOUT_RANGE) and within(
            rule.recover_timeout_s, RECOVER_TIMEOUT_RANGE
        )
        assert rule.handling in DURATION_LEVELS
    for freq in custom.frequencies:
        assert within(freq.time_window_s, TIME_WINDOW_RANGE) and within(freq.times, TIMES_RANGE)
        assert freq.handling in FREQUENCY_LEVELS
        if freq.release_time_window_s == 0:
            assert freq.handling is FaultLevel.MANUALLY_SEPARATE_NPU  # nothing else would ever release it
        else:
            assert within(freq.release_time_window_s, RELEASE_TIME_WINDOW_RANGE)
    grace = custom.grace
    assert within(grace.wait_process_read_cm_s, WAIT_PROCESS_READ_CM_RANGE)
    assert within(grace.wait_device_reset_s, WAIT_DEVICE_RESET_RANGE)
    assert within(grace.wait_fault_self_healing_s, WAIT_FAULT_SELF_HEALING_RANGE)
    codes = sorted(
        {code for rule in custom.durations for code in rule.event_ids}
        | {code for rule in custom.frequencies for code in rule.event_ids}
    )
    engine_runs(Policy(default_fault_code_table(), custom, default_switch_fault_table()), codes)


@FUZZ
@given(data=document(CUSTOMIZATION))
def test_fault_customization_is_usable_or_refused_naming_the_path(data: bytes) -> None:
    result = outcome(load_fault_customization, data, errors=(FaultPolicyError,))
    if result.error is not None:
        assert_names_file(result.error, "faultCustomization.json")
        return
    check_customization(cast(FaultCustomization, result.value))


def as_text(data: bytes) -> str:
    # ConfigMap data and the API's JSON body are text: any bytes, read as whatever they decode to.
    return data.decode("utf-8", "replace")


policy_files = st.fixed_dictionaries(
    {},
    optional={
        "faultCode.json": document(SMALL_FAULT_CODE).map(as_text) | st.just(json.dumps(FAULT_CODE)),
        "faultCustomization.json": document(CUSTOMIZATION).map(as_text),
        "SwitchFaultCode.json": document(SMALL_SWITCH).map(as_text),
        "PollInterval": any_text | st.sampled_from(["29", "30", "3600", "3601", "-5", "1" * 5000, "60.5", " 60"]),
        "faultcode.json": st.just("{}"),
    },
)


@FUZZ
@given(files=policy_files)
def test_a_policy_configmap_is_adopted_whole_or_refused_naming_the_file(files: dict[str, str]) -> None:
    result = outcome(build, files, errors=(FaultPolicyError,))
    interval = poll_interval(files, 60.0)
    assert interval == 60.0 or within(int(interval), POLL_RANGE)
    if result.error is not None:
        message = str(result.error)
        assert message.startswith(tuple(f"{name}: " for name in FILES)) or message.startswith("unknown policy file")
        return
    assert "faultcode.json" not in files
    policy = cast(Policy, result.value)
    engine_runs(policy, ["8C1FA006", "80E01801", "81078603", "40F84E00", "1"])


# --- regressions: what the fuzzing found ---------------------------------------------------------------

LOADERS = [
    (load_fault_code_table, "faultCode.json"),
    (load_fault_customization, "faultCustomization.json"),
    (load_switch_fault_table, "SwitchFaultCode.json"),
]
UNPARSABLE = [
    pytest.param(b"[" * 100_000 + b"]" * 100_000, id="nested-past-the-parser-stack"),  # was RecursionError
    pytest.param(b'{"x": ' + b"7" * 5_000 + b"}", id="integer-over-4300-digits"),  # was a bare ValueError
    pytest.param(("{" + '"a":' * 1) + "1" * 4301 + "}", id="long-integer-as-text"),
]


@pytest.mark.parametrize(("load", "file"), LOADERS)
@pytest.mark.parametrize("data", UNPARSABLE)
def test_regression_unparsable_policy_is_a_policy_error(load: Any, file: str, data: bytes | str) -> None:
    with pytest.raises(FaultPolicyError, match=f"^{re.escape(file)}: not valid JSON"):
        load(data)


def test_regression_a_policy_configmap_nested_too_deep_is_refused_naming_the_file() -> None:
    with pytest.raises(FaultPolicyError, match=r"^faultCustomization\.json: not valid JSON"):
        build({"faultCustomization.json": "[" * 50_000})


def test_regression_a_deeply_nested_value_handed_in_parsed_is_shown_not_crashed_on() -> None:
    value: list[Any] = []
    for _ in range(5_000):
        value = [value]
    doc = {"FaultDuration": [{"EventId": ["1"], "FaultHandling": value}]}
    with pytest.raises(FaultPolicyError, match=r"FaultDuration\[0\]\.FaultHandling: must be a string"):
        load_fault_customization(doc)
