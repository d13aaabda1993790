"""Loading faultCustomization.json and whole policy bundles (contract section 7)."""

from __future__ import annotations

import copy
import json
from importlib import resources
from typing import Any

import pytest
from ascend_common.faults import (
    DURATION_LEVELS,
    FREQUENCY_LEVELS,
    DurationRule,
    FaultCustomization,
    FaultLevel,
    FaultPolicyError,
    FrequencyRule,
    GraceTolerance,
    PolicyBundle,
    default_fault_code_table,
    default_fault_customization,
    default_switch_fault_table,
    load_fault_customization,
    validate_policy_bundle,
)

LINK_DOWN = "81078603"
FILE = "faultCustomization.json"


def _packaged(name: str) -> bytes:
    return resources.files("ascend_common.data").joinpath(name).read_bytes()


def _duration(**overrides: Any) -> dict[str, Any]:
    rule: dict[str, Any] = {"EventId": [LINK_DOWN], "FaultTimeout": 20, "RecoverTimeout": 60}
    rule["FaultHandling"] = "PreSeparateNPU"
    rule.update(overrides)
    return rule


def _frequency(**overrides: Any) -> dict[str, Any]:
    rule: dict[str, Any] = {"EventId": ["80E01801"], "TimeWindow": 86400, "Times": 2}
    rule["FaultHandling"] = "ManuallySeparateNPU"
    rule.update(overrides)
    return rule


# --- the packaged file --------------------------------------------------------------------------


def test_packaged_file_loads_with_the_reference_rules() -> None:
    custom = default_fault_customization()
    assert custom.durations == (
        DurationRule(
            event_ids=frozenset({LINK_DOWN}),
            fault_timeout_s=20,
            recover_timeout_s=60,
            handling=FaultLevel.PRE_SEPARATE_NPU,
        ),
    )
    assert len(custom.frequencies) == 3
    first, hbm_ecc, link_down = custom.frequencies
    assert len(first.event_ids) == 41
    assert (first.time_window_s, first.times, first.handling, first.release_time_window_s) == (
        86400,
        2,
        FaultLevel.MANUALLY_SEPARATE_NPU,
        0,
    )
    assert hbm_ecc == FrequencyRule(frozenset({"80E18005"}), 86400, 3, FaultLevel.MANUALLY_SEPARATE_NPU, 0)
    assert link_down == FrequencyRule(frozenset({LINK_DOWN}), 86400, 5, FaultLevel.MANUALLY_SEPARATE_NPU, 172800)
    assert custom.grace == GraceTolerance(30, 150, 15)
    assert custom.duplicate_codes == ()


def test_packaged_lookups_and_autofill_window() -> None:
    custom = default_fault_customization()
    assert custom.duration_rule(LINK_DOWN) is custom.durations[0]
    assert custom.duration_rule(0x81078603) is custom.durations[0]
    assert custom.duration_rule("80E01801") is None
    assert custom.frequency_rule("0x80e01801") is custom.frequencies[0]
    assert custom.frequency_rule("80E18005") is custom.frequencies[1]
    assert custom.frequency_rule(LINK_DOWN) is custom.frequencies[2]
    assert custom.frequency_rule("8C1FA006") is None
    # FaultAutofill reasons live as long as the longest ReleaseTimeWindow (fault_code.go setAutofillReasonReleaseTime).
    assert custom.longest_release_window_s() == 172800


def test_default_is_cached_and_all_input_forms_agree() -> None:
    assert default_fault_customization() is default_fault_customization()
    data = _packaged(FILE)
    from_bytes = load_fault_customization(data)
    assert from_bytes == default_fault_customization()
    assert load_fault_customization(data.decode()) == from_bytes
    assert load_fault_customization(json.loads(data)) == from_bytes
    assert load_fault_customization(bytearray(data)) == from_bytes


def test_lookup_of_a_malformed_code_is_a_value_error() -> None:
    with pytest.raises(ValueError, match="hex digits"):
        default_fault_customization().duration_rule("link-down")


# --- what is accepted ---------------------------------------------------------------------------


def test_empty_document_is_no_rules_and_default_grace() -> None:
    custom = load_fault_customization(b"{}")
    assert custom == FaultCustomization()
    assert custom.grace == GraceTolerance(
        wait_process_read_cm_s=30, wait_device_reset_s=150, wait_fault_self_healing_s=15
    )
    assert custom.longest_release_window_s() == 0
    assert custom.duration_rule(LINK_DOWN) is None


def test_null_sections_and_values_mean_absent() -> None:
    custom = load_fault_customization(
        {
            "GraceTolerance": {"WaitDeviceResetTime": 60, "WaitProcessReadCMTime": None},
            "FaultDuration": [_duration(FaultTimeout=None, RecoverTimeout=None)],
            "FaultFrequency": None,
        }
    )
    assert custom.grace == GraceTolerance(
        wait_process_read_cm_s=30, wait_device_reset_s=60, wait_fault_self_healing_s=15
    )
    assert custom.durations[0].fault_timeout_s == 0  # Go's zero value, which the reference accepts
    assert custom.durations[0].recover_timeout_s == 0
    assert custom.frequencies == ()


@pytest.mark.parametrize(
    ("grace", "expected"),
    [
        ({"WaitProcessReadCMTime": 5, "WaitDeviceResetTime": 60, "WaitFaultSelfHealingTime": 1}, (5, 60, 1)),
        ({"WaitProcessReadCMTime": 90, "WaitDeviceResetTime": 180, "WaitFaultSelfHealingTime": 30}, (90, 180, 30)),
        ({"WaitFaultSelfHealingTime": 7}, (30, 150, 7)),
    ],
)
def test_grace_tolerance_bounds_are_inclusive(grace: dict[str, int], expected: tuple[int, int, int]) -> None:
    assert load_fault_customization({"GraceTolerance": grace}).grace == GraceTolerance(*expected)


def test_codes_are_normalised() -> None:
    custom = load_fault_customization({"FaultDuration": [_duration(EventId=["0x81078603", "080e01801", " 8c1fa006 "])]})
    assert custom.durations[0].event_ids == frozenset({LINK_DOWN, "80E01801", "8C1FA006"})
    assert custom.duration_rule("80E01801") is custom.durations[0]


@pytest.mark.parametrize(
    ("value", "stored"),
    [(None, 0), (0, 0), (60, 60), (172800, 172800), ((1 << 32) - 1, (1 << 32) - 1), (1 << 32, 0)],
)
def test_release_time_window_zero_absent_or_reference_max_means_never(value: int | None, stored: int) -> None:
    rule = _frequency() if value is None else _frequency(ReleaseTimeWindow=value)
    custom = load_fault_customization({"FaultFrequency": [rule]})
    assert custom.frequencies[0].release_time_window_s == stored


def test_boundaries_of_every_range_are_accepted() -> None:
    custom = load_fault_customization(
        {
            "FaultDuration": [
                _duration(EventId=["1"], FaultTimeout=0, RecoverTimeout=0),
                _duration(EventId=["2"], FaultTimeout=600, RecoverTimeout=86400),
            ],
            "FaultFrequency": [
                _frequency(EventId=["1"], TimeWindow=60, Times=1),
                _frequency(
                    EventId=["2"], TimeWindow=864000, Times=100, FaultHandling="SeparateNPU", ReleaseTimeWindow=60
                ),
            ],
        }
    )
    assert [(r.fault_timeout_s, r.recover_timeout_s) for r in custom.durations] == [(0, 0), (600, 86400)]
    assert [(r.time_window_s, r.times) for r in custom.frequencies] == [(60, 1), (864000, 100)]
    assert custom.longest_release_window_s() == 60


@pytest.mark.parametrize("level", sorted(DURATION_LEVELS))
def test_every_duration_level_is_accepted(level: FaultLevel) -> None:
    custom = load_fault_customization({"FaultDuration": [_duration(FaultHandling=level.value)]})
    assert custom.durations[0].handling is level


@pytest.mark.parametrize("level", sorted(FREQUENCY_LEVELS))
def test_every_frequency_level_is_accepted_with_a_release_window(level: FaultLevel) -> None:
    custom = load_fault_customization(
        {"FaultFrequency": [_frequency(FaultHandling=level.value, ReleaseTimeWindow=3600)]}
    )
    assert custom.frequencies[0].handling is level


def test_level_sets_follow_the_reference() -> None:
    # fault_code.go FaultTypeSet / FaultDurationTypeSet
    assert FaultLevel.NORMAL_NPU not in FREQUENCY_LEVELS
    assert FaultLevel.MANUALLY_SEPARATE_NPU in FREQUENCY_LEVELS
    assert FREQUENCY_LEVELS - {FaultLevel.MANUALLY_SEPARATE_NPU} == DURATION_LEVELS
    assert len(FREQUENCY_LEVELS) == 9


def test_code_in_two_duration_rules_goes_to_the_first() -> None:
    custom = load_fault_customization(
        {
            "FaultDuration": [
                _duration(EventId=["80E01801", LINK_DOWN], FaultTimeout=20),
                _duration(EventId=["0x81078603", "8C1FA006"], FaultTimeout=300),
            ]
        }
    )
    assert custom.duration_rule(LINK_DOWN) is custom.durations[0]
    assert custom.duration_rule("8C1FA006") is custom.durations[1]
    assert custom.durations[1].event_ids == frozenset({"8C1FA006"})  # the losing listing is dropped
    assert custom.duplicate_codes == (("FaultDuration[1].EventId[0]", LINK_DOWN),)


def test_code_in_two_frequency_rules_goes_to_the_first_and_kinds_do_not_clash() -> None:
    custom = load_fault_customization(
        {
            "FaultDuration": [_duration()],
            "FaultFrequency": [
                _frequency(EventId=[LINK_DOWN, LINK_DOWN], Times=5),
                _frequency(EventId=[LINK_DOWN], Times=2),
            ],
        }
    )
    assert custom.frequency_rule(LINK_DOWN) is custom.frequencies[0]
    assert custom.duration_rule(LINK_DOWN) is custom.durations[0]  # the same code in both kinds is fine
    assert custom.frequencies[1].event_ids == frozenset()
    assert custom.duplicate_codes == (
        ("FaultFrequency[0].EventId[1]", LINK_DOWN),
        ("FaultFrequency[1].EventId[0]", LINK_DOWN),
    )


def test_rules_built_in_code_also_resolve_first_wins() -> None:
    first = DurationRule(frozenset({LINK_DOWN}), 20, 60, FaultLevel.PRE_SEPARATE_NPU)
    second = DurationRule(frozenset({LINK_DOWN}), 5, 5, FaultLevel.SEPARATE_NPU)
    custom = FaultCustomization(durations=(first, second))
    assert custom.duration_rule(LINK_DOWN) is first
    assert custom == FaultCustomization(durations=(first, second))  # the index plays no part in equality


# --- what is refused, with the exact message ------------------------------------------------------

_BAD_CASES: list[tuple[str, Any, str, str | None]] = [
    # (case id, document, message after "faultCustomization.json: ", key)
    (
        "not-json",
        b"{",
        "not valid JSON: Expecting property name enclosed in double quotes: line 1 column 2 (char 1)",
        None,
    ),
    ("not-utf8", b"\xff{}", "not valid JSON: ", None),
    ("array-document", b"[]", "expected a JSON object, got array", None),
    ("unknown-top-key", {"FaultDurations": []}, "FaultDurations: unknown key", "FaultDurations"),
    (
        "case-typo-top",
        {"faultDuration": []},
        "faultDuration: unknown key (did you mean 'FaultDuration'?)",
        "faultDuration",
    ),
    ("duration-not-array", {"FaultDuration": {}}, "FaultDuration: must be an array, got object", "FaultDuration"),
    (
        "rule-not-object",
        {"FaultDuration": [_duration(), "x"]},
        "FaultDuration[1]: must be an object, got string",
        "FaultDuration[1]",
    ),
    (
        "unknown-rule-key",
        {"FaultDuration": [_duration(FaultTimeOut=20)]},
        "FaultDuration[0].FaultTimeOut: unknown key (did you mean 'FaultTimeout'?)",
        "FaultDuration[0].FaultTimeOut",
    ),
    (
        "event-id-missing",
        {"FaultDuration": [{"FaultHandling": "SeparateNPU"}]},
        "FaultDuration[0].EventId: missing (a non-empty array of hex codes)",
        "FaultDuration[0].EventId",
    ),
    (
        "event-id-empty",
        {"FaultFrequency": [_frequency(EventId=[])]},
        "FaultFrequency[0].EventId: empty (list at least one hex code)",
        "FaultFrequency[0].EventId",
    ),
    (
        "event-id-string",
        {"FaultDuration": [_duration(EventId=LINK_DOWN)]},
        "FaultDuration[0].EventId: must be an array of strings, got string",
        "FaultDuration[0].EventId",
    ),
    (
        "event-id-not-hex",
        {"FaultDuration": [_duration(EventId=[LINK_DOWN, "80E01801", "XYZ"])]},
        "FaultDuration[0].EventId[2]: 'XYZ' is not a hex code",
        "FaultDuration[0].EventId[2]",
    ),
    (
        "event-id-too-long",
        {"FaultDuration": [_duration(EventId=["1234567890"])]},
        "FaultDuration[0].EventId[0]: '1234567890' is not a hex code",
        "FaultDuration[0].EventId[0]",
    ),
    (
        "event-id-number",
        {"FaultFrequency": [_frequency(EventId=[2162169857])]},
        "FaultFrequency[0].EventId[0]: must be a string, got 2162169857",
        "FaultFrequency[0].EventId[0]",
    ),
    (
        "fault-timeout-high",
        {"FaultDuration": [_duration(FaultTimeout=601)]},
        "FaultDuration[0].FaultTimeout: 601 is outside 0..600",
        "FaultDuration[0].FaultTimeout",
    ),
    (
        "fault-timeout-negative",
        {"FaultDuration": [_duration(FaultTimeout=-1)]},
        "FaultDuration[0].FaultTimeout: -1 is outside 0..600",
        "FaultDuration[0].FaultTimeout",
    ),
    (
        "fault-timeout-float",
        {"FaultDuration": [_duration(FaultTimeout=20.5)]},
        "FaultDuration[0].FaultTimeout: must be an integer, got 20.5",
        "FaultDuration[0].FaultTimeout",
    ),
    (
        "fault-timeout-integral-float",
        {"FaultDuration": [_duration(FaultTimeout=20.0)]},
        "FaultDuration[0].FaultTimeout: must be an integer, got 20.0",
        "FaultDuration[0].FaultTimeout",
    ),
    (
        "fault-timeout-string",
        {"FaultDuration": [_duration(FaultTimeout="20")]},
        'FaultDuration[0].FaultTimeout: must be an integer, got "20"',
        "FaultDuration[0].FaultTimeout",
    ),
    (
        "fault-timeout-bool",
        {"FaultDuration": [_duration(FaultTimeout=True)]},
        "FaultDuration[0].FaultTimeout: must be an integer, got true",
        "FaultDuration[0].FaultTimeout",
    ),
    (
        "recover-timeout-high",
        {"FaultDuration": [_duration(RecoverTimeout=86401)]},
        "FaultDuration[0].RecoverTimeout: 86401 is outside 0..86400",
        "FaultDuration[0].RecoverTimeout",
    ),
    (
        "duration-handling-missing",
        {"FaultDuration": [{"EventId": [LINK_DOWN]}]},
        "FaultDuration[0].FaultHandling: missing (one of SeparateNPU, PreSeparateNPU, RestartNPU, FreeRestartNPU, "
        "RestartBusiness, RestartRequest, SubHealthFault, NotHandleFault)",
        "FaultDuration[0].FaultHandling",
    ),
    (
        "duration-handling-manual",
        {"FaultDuration": [_duration(FaultHandling="ManuallySeparateNPU")]},
        "FaultDuration[0].FaultHandling: 'ManuallySeparateNPU' is not one of SeparateNPU, PreSeparateNPU, RestartNPU, "
        "FreeRestartNPU, RestartBusiness, RestartRequest, SubHealthFault, NotHandleFault",
        "FaultDuration[0].FaultHandling",
    ),
    (
        "frequency-handling-unknown",
        {"FaultFrequency": [_frequency(FaultHandling="Isolate")]},
        "FaultFrequency[0].FaultHandling: 'Isolate' is not one of ManuallySeparateNPU, SeparateNPU, PreSeparateNPU, "
        "RestartNPU, FreeRestartNPU, RestartBusiness, RestartRequest, SubHealthFault, NotHandleFault",
        "FaultFrequency[0].FaultHandling",
    ),
    (
        "frequency-handling-normal",
        {"FaultFrequency": [_frequency(FaultHandling="NormalNPU", ReleaseTimeWindow=60)]},
        "FaultFrequency[0].FaultHandling: 'NormalNPU' is not one of ManuallySeparateNPU, SeparateNPU, PreSeparateNPU, "
        "RestartNPU, FreeRestartNPU, RestartBusiness, RestartRequest, SubHealthFault, NotHandleFault",
        "FaultFrequency[0].FaultHandling",
    ),
    (
        "handling-case",
        {"FaultFrequency": [_frequency(FaultHandling="manuallySeparateNPU")]},
        "FaultFrequency[0].FaultHandling: 'manuallySeparateNPU' is not one of ManuallySeparateNPU, SeparateNPU, "
        "PreSeparateNPU, RestartNPU, FreeRestartNPU, RestartBusiness, RestartRequest, SubHealthFault, NotHandleFault",
        "FaultFrequency[0].FaultHandling",
    ),
    (
        "handling-not-string",
        {"FaultDuration": [_duration(FaultHandling=3)]},
        "FaultDuration[0].FaultHandling: must be a string, got 3",
        "FaultDuration[0].FaultHandling",
    ),
    (
        "time-window-low",
        {"FaultFrequency": [_frequency(), _frequency(EventId=["1"], TimeWindow=30)]},
        "FaultFrequency[1].TimeWindow: 30 is outside 60..864000",
        "FaultFrequency[1].TimeWindow",
    ),
    (
        "time-window-high",
        {"FaultFrequency": [_frequency(TimeWindow=864001)]},
        "FaultFrequency[0].TimeWindow: 864001 is outside 60..864000",
        "FaultFrequency[0].TimeWindow",
    ),
    (
        "time-window-missing",
        {"FaultFrequency": [{"EventId": ["1"], "Times": 2, "FaultHandling": "ManuallySeparateNPU"}]},
        "FaultFrequency[0].TimeWindow: missing (an integer in 60..864000)",
        "FaultFrequency[0].TimeWindow",
    ),
    (
        "times-zero",
        {"FaultFrequency": [_frequency(Times=0)]},
        "FaultFrequency[0].Times: 0 is outside 1..100",
        "FaultFrequency[0].Times",
    ),
    (
        "times-high",
        {"FaultFrequency": [_frequency(Times=101)]},
        "FaultFrequency[0].Times: 101 is outside 1..100",
        "FaultFrequency[0].Times",
    ),
    (
        "times-missing",
        {"FaultFrequency": [{"EventId": ["1"], "TimeWindow": 60, "FaultHandling": "SeparateNPU"}]},
        "FaultFrequency[0].Times: missing (an integer in 1..100)",
        "FaultFrequency[0].Times",
    ),
    (
        "release-low",
        {"FaultFrequency": [_frequency(ReleaseTimeWindow=59)]},
        "FaultFrequency[0].ReleaseTimeWindow: 59 is outside 60..4294967296 (or 0 for never)",
        "FaultFrequency[0].ReleaseTimeWindow",
    ),
    (
        "release-negative",
        {"FaultFrequency": [_frequency(ReleaseTimeWindow=-60)]},
        "FaultFrequency[0].ReleaseTimeWindow: -60 is outside 60..4294967296 (or 0 for never)",
        "FaultFrequency[0].ReleaseTimeWindow",
    ),
    (
        "release-high",
        {"FaultFrequency": [_frequency(ReleaseTimeWindow=(1 << 32) + 1)]},
        "FaultFrequency[0].ReleaseTimeWindow: 4294967297 is outside 60..4294967296 (or 0 for never)",
        "FaultFrequency[0].ReleaseTimeWindow",
    ),
    (
        "release-string",
        {"FaultFrequency": [_frequency(ReleaseTimeWindow="2d")]},
        'FaultFrequency[0].ReleaseTimeWindow: must be an integer, got "2d"',
        "FaultFrequency[0].ReleaseTimeWindow",
    ),
    (
        "release-required",
        {"FaultFrequency": [_frequency(FaultHandling="SeparateNPU")]},
        "FaultFrequency[0].ReleaseTimeWindow: required when FaultHandling is SeparateNPU "
        "(only ManuallySeparateNPU may be never released)",
        "FaultFrequency[0].ReleaseTimeWindow",
    ),
    (
        "release-zero-non-manual",
        {"FaultFrequency": [_frequency(FaultHandling="RestartNPU", ReleaseTimeWindow=0)]},
        "FaultFrequency[0].ReleaseTimeWindow: required when FaultHandling is RestartNPU "
        "(only ManuallySeparateNPU may be never released)",
        "FaultFrequency[0].ReleaseTimeWindow",
    ),
    ("grace-not-object", {"GraceTolerance": [30]}, "GraceTolerance: must be an object, got array", "GraceTolerance"),
    (
        "grace-unknown-key",
        {"GraceTolerance": {"WaitResetTime": 60}},
        "GraceTolerance.WaitResetTime: unknown key",
        "GraceTolerance.WaitResetTime",
    ),
    (
        "grace-reset-low",
        {"GraceTolerance": {"WaitDeviceResetTime": 59}},
        "GraceTolerance.WaitDeviceResetTime: 59 is outside 60..180",
        "GraceTolerance.WaitDeviceResetTime",
    ),
    (
        "grace-reset-high",
        {"GraceTolerance": {"WaitDeviceResetTime": 181}},
        "GraceTolerance.WaitDeviceResetTime: 181 is outside 60..180",
        "GraceTolerance.WaitDeviceResetTime",
    ),
    (
        "grace-read-cm-zero",
        {"GraceTolerance": {"WaitProcessReadCMTime": 0}},
        "GraceTolerance.WaitProcessReadCMTime: 0 is outside 5..90",
        "GraceTolerance.WaitProcessReadCMTime",
    ),
    (
        "grace-read-cm-high",
        {"GraceTolerance": {"WaitProcessReadCMTime": 91}},
        "GraceTolerance.WaitProcessReadCMTime: 91 is outside 5..90",
        "GraceTolerance.WaitProcessReadCMTime",
    ),
    (
        "grace-healing-high",
        {"GraceTolerance": {"WaitFaultSelfHealingTime": 31}},
        "GraceTolerance.WaitFaultSelfHealingTime: 31 is outside 1..30",
        "GraceTolerance.WaitFaultSelfHealingTime",
    ),
    (
        "grace-healing-float",
        {"GraceTolerance": {"WaitFaultSelfHealingTime": 1.5}},
        "GraceTolerance.WaitFaultSelfHealingTime: must be an integer, got 1.5",
        "GraceTolerance.WaitFaultSelfHealingTime",
    ),
]


@pytest.mark.parametrize(
    ("doc", "message", "key"), [case[1:] for case in _BAD_CASES], ids=[case[0] for case in _BAD_CASES]
)
def test_bad_file_is_refused_with_its_path(doc: Any, message: str, key: str | None) -> None:
    with pytest.raises(FaultPolicyError) as caught:
        load_fault_customization(doc)
    text = str(caught.value)
    if message.endswith(": "):  # the decoder's own wording follows; only the prefix is ours
        assert text.startswith(f"{FILE}: {message}")
    else:
        assert text == f"{FILE}: {message}"
    assert caught.value.key == key


@pytest.mark.parametrize(
    ("doc", "index"),
    [
        ({"FaultFrequency": [_frequency(), _frequency(EventId=["1"], TimeWindow=30)]}, 1),
        ({"FaultDuration": [_duration(EventId=["XYZ"])]}, 0),
        ({"GraceTolerance": {"WaitDeviceResetTime": 1}}, None),
        ({"Bogus": 1}, None),
    ],
)
def test_error_index_is_the_rule_position(doc: Any, index: int | None) -> None:
    with pytest.raises(FaultPolicyError) as caught:
        load_fault_customization(doc)
    assert caught.value.index == index


def test_a_bad_rule_after_good_ones_still_refuses_the_whole_file() -> None:
    doc = json.loads(_packaged(FILE))
    broken = copy.deepcopy(doc)
    broken["FaultFrequency"][2]["Times"] = 0
    with pytest.raises(FaultPolicyError, match=r"FaultFrequency\[2\]\.Times: 0 is outside 1\.\.100"):
        load_fault_customization(broken)
    assert load_fault_customization(doc) == default_fault_customization()  # the input was not the problem


# --- policy bundles -----------------------------------------------------------------------------


def test_bundle_loads_every_given_file() -> None:
    bundle = validate_policy_bundle(_packaged("faultCode.json"), _packaged(FILE), _packaged("SwitchFaultCode.json"))
    assert bundle == PolicyBundle(
        fault_code=default_fault_code_table(),
        customization=default_fault_customization(),
        switch=default_switch_fault_table(),
    )


def test_bundle_leaves_missing_files_out() -> None:
    assert validate_policy_bundle(None, None, None) == PolicyBundle()
    bundle = validate_policy_bundle(None, _packaged(FILE).decode(), None)
    assert bundle.customization == default_fault_customization()
    assert bundle.fault_code is None
    assert bundle.switch is None


def test_bundle_raises_the_error_of_the_file_that_is_broken() -> None:
    good_code, good_custom = _packaged("faultCode.json"), _packaged(FILE)
    with pytest.raises(FaultPolicyError) as caught:
        validate_policy_bundle(good_code, b'{"FaultDuration": [{"EventId": ["XYZ"]}]}', None)
    assert str(caught.value) == "faultCustomization.json: FaultDuration[0].EventId[0]: 'XYZ' is not a hex code"
    with pytest.raises(FaultPolicyError) as caught:
        validate_policy_bundle(None, good_custom, b'{"SeparateFaultCodes": ["nope"]}')
    assert str(caught.value).startswith("SwitchFaultCode.json: SeparateFaultCodes[0]")
    assert caught.value.key == "SeparateFaultCodes"


def test_bundle_raises_the_first_error_in_file_order() -> None:
    with pytest.raises(FaultPolicyError) as caught:
        validate_policy_bundle(b'{"Bogus": []}', b"[]", b"{")
    assert str(caught.value) == "faultCode.json: unknown key 'Bogus'"
    with pytest.raises(FaultPolicyError) as caught:
        validate_policy_bundle(None, b"[]", b"{")
    assert str(caught.value) == "faultCustomization.json: expected a JSON object, got array"
