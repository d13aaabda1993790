"""The reference's upgrade-reason and device-fault-list tests, ported: each test is named after the Go test
whose cases it carries (component/ascend-device-plugin/pkg/common/upgradefault_test.go and
pkg/device/ascendcommon_test.go TestAscendToolsGetDeviceFaults), with that test's inputs and expected values.

The Go tests drive a global in-memory cache keyed by logic or physical id; ours are pure functions over
chip names (`fault_manager.deviceinfo.faultlist`, `fault_manager.deviceinfo.configmap`) and the engine,
which re-derives the reasons from the chip's history under the current policy. Where a Go input has no
counterpart (a level string such as "critical" that our policy loader refuses as a FaultHandling), the case
says what it uses.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from ascend_common.faults import (
    FaultCustomization,
    FaultLevel,
    default_fault_code_table,
    default_switch_fault_table,
    is_network_code,
    load_fault_code_table,
    load_fault_customization,
)
from fault_manager.deviceinfo.configmap import (
    UpgradeReason,
    fault_list_json,
    parse_upgrade_reasons,
    upgrade_reasons_json,
)
from fault_manager.deviceinfo.faultlist import Reason, fault_entries, fix_manually_separate_reasons, upgrade_reasons
from fault_manager.policy.engine import AUTOFILL_CODE, FaultEngine, Policy
from fault_manager.store import Store

L = FaultLevel
T = 1_700_000_000_000  # testFaultTime
CM_JSON = (
    '{"npu-2001":[{"upgrade_time":1700000000000,"fault_code":"E1001","fault_level":"critical",'
    '"upgrade_type":"FaultDuration"}]}'
)  # testCMJSON
LINK_DOWN = "81078603"
CHIP = "Ascend910-0"


def entries_of(engine: FaultEngine, now: float, reasons: list[Reason] | None = None) -> list[dict[str, Any]]:
    ev = engine.evaluate(CHIP, now)
    if reasons is None:
        reasons = [Reason(e.code, e.level, e.upgrade_type, e.at_ms) for e in ev.escalations]
    policy = engine.policy
    found = fault_entries(
        ev.verdict, ev.codes, reasons, is_network=is_network_code, table_level=policy.table_level, spell=policy.spell
    )
    return list(json.loads(fault_list_json(found)))


def new_engine(table: Any = None, custom: FaultCustomization | None = None) -> FaultEngine:
    policy = Policy(
        table if table is not None else default_fault_code_table(),
        custom if custom is not None else FaultCustomization(),
        default_switch_fault_table(),
    )
    engine = FaultEngine(policy)
    engine.chip(CHIP, 0, 0)
    return engine


# --- TestAscendToolsGetDeviceFaults ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("table", "network_level", "chip_level"),
    [
        # The Go test's own state: no faultCode.json loaded, empty caches. An unlisted network code is
        # PreSeparateNPU; unlisted chip codes of unknown severity are SeparateNPU.
        ("no table loaded", "PreSeparateNPU", "SeparateNPU"),
        # The same device under the shipped faultCode.json: both chip codes are RestartRequestCodes, and
        # LoadFaultCode maps the link down (listed in NotHandleFaultCodes) to NotHandleFaultNetworkCodes.
        ("packaged table", "NotHandleFault", "RestartRequest"),
    ],
)
def test_ascend_tools_get_device_faults(table: str, network_level: str, chip_level: str) -> None:
    """TestAscendToolsGetDeviceFaults: "A device has both network fault and card fault, getDeviceFaults
    should return two DeviceFault" (the network entry first)."""
    engine = new_engine(load_fault_code_table({}) if table == "no table loaded" else default_fault_code_table())
    # FaultCodes 0x80C98008, 0x80CB8008; NetworkFaultCodes LinkDown; FaultTimeMap 100000, 110000, 120000 ms.
    engine.apply(CHIP, "80C98008", "occur", None, 100.0)
    engine.apply(CHIP, "80CB8008", "occur", None, 110.0)
    engine.apply(CHIP, LINK_DOWN, "occur", None, 120.0)
    assert entries_of(engine, 121.0) == [
        {
            "fault_type": "CardNetworkUnhealthy",
            "npu_name": CHIP,
            "large_model_fault_level": network_level,
            "fault_level": network_level,
            "fault_handling": network_level,
            "fault_code": "81078603",
            "fault_time_and_level_map": {"81078603": {"fault_time": 120000, "fault_level": network_level}},
        },
        {
            "fault_type": "CardUnhealthy",
            "npu_name": CHIP,
            "large_model_fault_level": chip_level,
            "fault_level": chip_level,
            "fault_handling": chip_level,
            "fault_code": "80C98008,80CB8008",
            "fault_time_and_level_map": {
                "80C98008": {"fault_time": 100000, "fault_level": chip_level},
                "80CB8008": {"fault_time": 110000, "fault_level": chip_level},
            },
        },
    ]


def test_device_faults_raise_every_code_of_a_mode_to_its_escalations_and_list_reason_codes() -> None:
    """getFaultTimeAndLevelMap: GetFaultType([code]) adds every escalation of the mode, and each reason's
    code is listed after the current codes, at its upgrade time and level (overriding)."""
    engine = new_engine()
    engine.apply(CHIP, "80C98008", "occur", None, 100.0)  # RestartRequest
    reasons = [
        Reason("80E01801", L.MANUALLY_SEPARATE_NPU, "FaultFrequency", 90_000),  # not present any more
        Reason(AUTOFILL_CODE, L.MANUALLY_SEPARATE_NPU, "FaultAutofill", 95_000),  # not hex: never listed
    ]
    [card] = entries_of(engine, 101.0, reasons)
    assert (card["fault_type"], card["fault_level"], card["fault_code"]) == (
        "CardUnhealthy",
        "ManuallySeparateNPU",
        "80C98008,80E01801",
    )
    assert card["fault_time_and_level_map"] == {
        "80C98008": {"fault_time": 100000, "fault_level": "ManuallySeparateNPU"},
        "80E01801": {"fault_time": 90000, "fault_level": "ManuallySeparateNPU"},
    }


def test_device_faults_of_an_unhealthy_chip_without_codes_and_leading_zeros() -> None:
    """A chip Unhealthy for another reason (isolated by an operator) has a CardUnhealthy entry with no
    codes; a configured code keeps its leading zero, upper-cased (FormatFaultCodeHex)."""
    engine = new_engine()
    engine.isolate(CHIP)
    [card] = entries_of(engine, 1.0)
    assert (card["fault_code"], card["fault_level"], card["fault_time_and_level_map"]) == ("", "NormalNPU", {})
    engine.apply(CHIP, "20001002", "occur", None, 2.0)  # "020001002" in the packaged SeparateNPUCodes
    [card] = entries_of(engine, 3.0)
    assert card["fault_code"] == "020001002" and list(card["fault_time_and_level_map"]) == ["020001002"]


# --- TestCmToString --------------------------------------------------------------------------------


def test_cm_to_string() -> None:
    """TestCmToString: 2 cases."""
    reasons = {"npu-2001": [UpgradeReason(T, "E1001", "critical", "FaultDuration")]}
    assert upgrade_reasons_json(reasons) == CM_JSON  # "should return correct JSON string when map has data"
    assert upgrade_reasons_json({}) == "{}"  # "should handle empty map correctly"


def test_upgrade_reason_codes_are_lower_case_as_the_policy_spells_them() -> None:
    spell = new_engine().policy.spell
    written = upgrade_reasons(
        [
            Reason("20001002", L.SEPARATE_NPU, "FaultDuration", 1),
            Reason("80C98008", L.MANUALLY_SEPARATE_NPU, "FaultFrequency", 2),
            Reason(AUTOFILL_CODE, L.MANUALLY_SEPARATE_NPU, "FaultAutofill", 3),
        ],
        spell,
    )
    assert [r.fault_code for r in written] == ["020001002", "80c98008", "AutofillFaultCode"]


# --- TestStringToReasonCm --------------------------------------------------------------------------


def test_string_to_reason_cm_valid() -> None:
    """TestStringToReasonCm, "should parse successfully when JSON is valid"."""
    result = parse_upgrade_reasons(CM_JSON)
    assert len(result) == 1 and result["npu-2001"] == [UpgradeReason(T, "E1001", "critical", "FaultDuration")]


@pytest.mark.parametrize(
    ("leaf", "text", "message"),
    [
        ("should return error when JSON is invalid", '{"npu-2001":[{invalid json}]}', "not JSON"),
        ("should return error when device name format is invalid", '{"npu":[]}', "get phyid from npu failed"),
    ],
)
def test_string_to_reason_cm_errors(leaf: str, text: str, message: str) -> None:
    """TestStringToReasonCm: the two error cases."""
    with pytest.raises(ValueError, match=message):
        parse_upgrade_reasons(text)


def test_string_to_reason_cm_keeps_the_later_of_a_repeated_reason() -> None:
    """ReasonListToSet: the same (code, level, type) twice keeps the larger upgrade_time."""
    text = json.dumps(
        {"npu-1": [{"upgrade_time": t, "fault_code": "a", "fault_level": "b", "upgrade_type": "FaultDuration"}
                   for t in (5, 9, 7)]}
    )  # fmt: skip
    assert [r.upgrade_time_ms for r in parse_upgrade_reasons(text)["npu-1"]] == [9]


# --- TestFixManuallySeparateReason -----------------------------------------------------------------


AUTOFILL_KEY = ("", L.MANUALLY_SEPARATE_NPU, "FaultAutofill")  # the Go test's KM: FaultCode ""


def test_fix_manually_separate_reason_adds_a_missing_reason() -> None:
    """TestFixManuallySeparateReason, "should add missing manually separate reason when NPU in list but not in map"."""
    fixed, autofilled = fix_manually_separate_reasons({}, ["npu-2001", "npu-2002"], T)
    assert len(fixed) == 2 and autofilled == ["npu-2001", "npu-2002"]
    for chip in ("npu-2001", "npu-2002"):
        assert fixed[chip] == [Reason("AutofillFaultCode", L.MANUALLY_SEPARATE_NPU, "FaultAutofill", T)]


def test_fix_manually_separate_reason_removes_a_redundant_reason() -> None:
    """TestFixManuallySeparateReason,
    "should remove redundant manually separate reason when NPU not in list but in map"."""
    fixed, autofilled = fix_manually_separate_reasons({"npu-2001": [Reason(*AUTOFILL_KEY, T)]}, [], T)
    assert fixed == {} and autofilled == []


def test_fix_manually_separate_reason_keeps_an_existing_reason() -> None:
    """TestFixManuallySeparateReason, "should keep existing manually separate reason when NPU in list and map"."""
    original = T - 1000
    fixed, autofilled = fix_manually_separate_reasons({"npu-2001": [Reason(*AUTOFILL_KEY, original)]}, ["npu-2001"], T)
    assert len(fixed["npu-2001"]) == 1 and all(r.at_ms == original for r in fixed["npu-2001"])
    assert autofilled == []


# --- TestCheckAndUpdateExistingUpgradeFaults* ------------------------------------------------------
# The Go tests insert a reason for 81078603 (PreSeparateNPU), then load a changed customization. Ours
# re-derives reasons from the chip's history, so each case makes the reason by the rule itself, then
# changes the policy. "Subhealth" (an unchecked string there) is SubHealthFault here.

DURATION = {"EventId": [LINK_DOWN], "FaultTimeout": 20, "RecoverTimeout": 60, "FaultHandling": "PreSeparateNPU"}
FREQUENCY = {
    "EventId": [LINK_DOWN],
    "TimeWindow": 60,
    "Times": 3,
    "FaultHandling": "PreSeparateNPU",
    "ReleaseTimeWindow": 3600,
}


def reasons_after_reload(kind: str, new_rules: dict[str, Any]) -> list[tuple[str, str, str, int]]:
    custom = load_fault_customization({kind: [DURATION if kind == "FaultDuration" else FREQUENCY]})
    engine = new_engine(custom=custom)
    engine.apply(CHIP, LINK_DOWN, "occur", 1, 0.0)
    if kind == "FaultFrequency":  # occurs at 0, 2 and 4 s: the third escalates, at its time
        for at in (1.0, 2.0, 3.0, 4.0):
            engine.apply(CHIP, LINK_DOWN, "recover" if at % 2 else "occur", 1, at)
    before = engine.evaluate(CHIP, 30.0).escalations
    assert [(e.code, e.level, e.upgrade_type) for e in before] == [(LINK_DOWN, L.PRE_SEPARATE_NPU, kind)]
    engine.set_policy(
        Policy(default_fault_code_table(), load_fault_customization(new_rules), default_switch_fault_table())
    )
    return [(e.code, e.level.value, e.upgrade_type, e.at_ms) for e in engine.evaluate(CHIP, 31.0).escalations]


def test_check_and_update_existing_upgrade_faults_update_fault_level() -> None:
    """TestCheckAndUpdateExistingUpgradeFaultsUpdateFaultLevel: the reason takes the new level, same time."""
    rules = {"FaultDuration": [{**DURATION, "FaultHandling": "SubHealthFault"}]}
    assert reasons_after_reload("FaultDuration", rules) == [(LINK_DOWN, "SubHealthFault", "FaultDuration", 20_000)]


def test_check_and_update_existing_upgrade_faults_remove_fault_strategy() -> None:
    """TestCheckAndUpdateExistingUpgradeFaultsRemoveFaultStrategy: no rule for the code, no reason."""
    assert reasons_after_reload("FaultDuration", {}) == []


def test_check_and_update_existing_upgrade_faults_fault_level_unchanged() -> None:
    """TestCheckAndUpdateExistingUpgradeFaultsFaultLevelUnchanged."""
    rules = {"FaultDuration": [DURATION]}
    assert reasons_after_reload("FaultDuration", rules) == [(LINK_DOWN, "PreSeparateNPU", "FaultDuration", 20_000)]


def test_check_and_update_existing_upgrade_faults_autofill_upgrade_type() -> None:
    """TestCheckAndUpdateExistingUpgradeFaultsAutofillUpgradeType: an autofill reason survives any reload."""
    engine = new_engine(custom=load_fault_customization({"FaultDuration": [DURATION]}))
    engine.isolate(CHIP)
    engine.autofill(CHIP, 0.0)
    engine.set_policy(Policy(default_fault_code_table(), FaultCustomization(), default_switch_fault_table()))
    found = [(e.code, e.level, e.upgrade_type) for e in engine.evaluate(CHIP, 1.0).escalations]
    assert found == [("AutofillFaultCode", L.MANUALLY_SEPARATE_NPU, "FaultAutofill")]


def test_check_and_update_existing_upgrade_faults_frequency_upgrade_type_update_fault_level() -> None:
    """TestCheckAndUpdateExistingUpgradeFaultsFrequencyUpgradeType_UpdateFaultLevel."""
    rules = {"FaultFrequency": [{**FREQUENCY, "FaultHandling": "SubHealthFault"}]}
    assert reasons_after_reload("FaultFrequency", rules) == [(LINK_DOWN, "SubHealthFault", "FaultFrequency", 4_000)]


def test_check_and_update_existing_upgrade_faults_frequency_upgrade_type_remove_fault_strategy() -> None:
    """TestCheckAndUpdateExistingUpgradeFaults_FrequencyUpgradeType_RemoveFaultStrategy."""
    assert reasons_after_reload("FaultFrequency", {}) == []


def test_check_and_update_existing_upgrade_faults_frequency_upgrade_type_fault_level_unchanged() -> None:
    """TestCheckAndUpdateExistingUpgradeFaultsFrequencyUpgradeTypeFaultLevelUnchanged."""
    rules = {"FaultFrequency": [FREQUENCY]}
    assert reasons_after_reload("FaultFrequency", rules) == [(LINK_DOWN, "PreSeparateNPU", "FaultFrequency", 4_000)]


# --- TestInsertUpgradeFaultCache, TestRemoveManuallySeparateReasonCache, TestRemoveTimeoutReasonCache ----
# The reference's cache is ours in SQLite (`escalations`): insert is add_escalation, the removals are
# release_escalations with a level or a code (the service's operator release and rule release).


@pytest.fixture
def store(tmp_path: Any) -> Any:
    with Store(tmp_path / "fm.db") as s:
        yield s


def active(store: Any, chip: str = "npu-1001") -> list[tuple[str, str, str, int]]:
    return [(r.code, r.level, r.upgrade_type, r.upgrade_time_ms) for r in store.isolations.escalations(True, chip)]


def test_insert_upgrade_fault_cache_new_reason(store: Any) -> None:
    """TestInsertUpgradeFaultCache, "should insert new reason when reason not exist"."""
    store.isolations.add("npu-1001", "E1001", "critical", "FaultDuration", T)
    assert active(store) == [("E1001", "critical", "FaultDuration", T)]


def test_insert_upgrade_fault_cache_newer_time(store: Any) -> None:
    """TestInsertUpgradeFaultCache, "should update reason when newer fault time": deliberately different
    (docs/compatibility.md): an active reason keeps the time it was made, the time the chip was escalated."""
    store.isolations.add("npu-1001", "E1001", "critical", "FaultDuration", T - 1000)
    store.isolations.add("npu-1001", "E1001", "critical", "FaultDuration", T)
    assert active(store) == [("E1001", "critical", "FaultDuration", T - 1000)]


def test_remove_manually_separate_reason_cache_target_level(store: Any) -> None:
    """TestRemoveManuallySeparateReasonCache, "should remove manually separate reason when logic ids contain
    target level" (an operator's release: IsolationKeeper._release_reasons)."""
    store.isolations.add("npu-1001", "", "ManuallySeparateNPU", "FaultAutofill", T)
    assert store.isolations.release("npu-1001", T + 1, "administrator", level="ManuallySeparateNPU") == 1
    assert active(store) == []


def test_remove_manually_separate_reason_cache_other_level(store: Any) -> None:
    """TestRemoveManuallySeparateReasonCache, "should not remove when logic ids not contain target level"."""
    store.isolations.add("npu-1001", "E1001", "critical", "FaultDuration", T)
    assert store.isolations.release("npu-1001", T + 1, "administrator", level="ManuallySeparateNPU") == 0
    assert len(active(store)) == 1


def test_remove_timeout_reason_cache_all(store: Any) -> None:
    """TestRemoveTimeoutReasonCache, "should remove timeout reason when fault code match" (no matcher: all)."""
    store.isolations.add("npu-1001", "E1001", "critical", "FaultDuration", T)
    assert store.isolations.release("npu-1001", T + 1, "rule no longer holds") == 1
    assert active(store) == []


def test_remove_timeout_reason_cache_other_code(store: Any) -> None:
    """TestRemoveTimeoutReasonCache, "should not remove when fault code not match"."""
    store.isolations.add("npu-1001", "E1001", "critical", "FaultDuration", T)
    assert store.isolations.release("npu-1001", T + 1, "rule no longer holds", "E1002") == 0
    assert len(active(store)) == 1
