"""The pure code-level fault policy (contract sections 7 and 8)."""

from __future__ import annotations

import json
from importlib import resources
from typing import Any

import pytest
from ascend_common.faults import (
    MAIN_LIST_KEYS,
    FaultLevel,
    SwitchFaultLevel,
    chip_level,
    chip_network_level,
    code_level,
    default_fault_code_table,
    default_switch_fault_table,
    is_network_code,
    load_fault_code_table,
    load_switch_fault_table,
    network_healthy,
    network_level,
    reset_candidate,
    schedulable,
    severity_level,
    switch_code_level,
)
from ascend_common.faults.codes import NETWORK_CODES
from ascend_common.faults.policy import supports_grace_tolerance

L = FaultLevel


def _raw_fault_codes() -> dict[str, list[str]]:
    data: dict[str, list[str]] = json.loads(
        resources.files("ascend_common.data").joinpath("faultCode.json").read_bytes()
    )
    return data


# Real codes picked from the packaged faultCode.json, at least one per level; the key is where the
# file lists the code (checked against the raw file below, independently of the loader).
REAL_CODES = [
    ("80E21007", "NotHandleFaultCodes", L.NOT_HANDLE_FAULT),
    ("200001002", "NotHandleFaultCodes", L.NOT_HANDLE_FAULT),  # 9 digits, above 32 bits
    ("81078603", "NotHandleFaultCodes", L.NOT_HANDLE_FAULT),  # RoCE link down
    ("81A3880C", "SubHealthFaultCodes", L.SUB_HEALTH_FAULT),
    ("110000002", "SubHealthFaultCodes", L.SUB_HEALTH_FAULT),  # 9 digits
    ("80C98008", "RestartRequestCodes", L.RESTART_REQUEST),
    ("8107800D", "RestartRequestCodes", L.RESTART_REQUEST),
    ("8C204E00", "RestartBusinessCodes", L.RESTART_BUSINESS),
    ("80E01801", "RestartBusinessCodes", L.RESTART_BUSINESS),
    ("8C0E4E00", "FreeRestartNPUCodes", L.FREE_RESTART_NPU),
    ("81CB8009", "FreeRestartNPUCodes", L.FREE_RESTART_NPU),
    ("8C1FA006", "RestartNPUCodes", L.RESTART_NPU),
    ("40F84E00", "RestartNPUCodes", L.RESTART_NPU),  # the synthetic card-drop code
    ("8118043C", "PreSeparateNPUCodes", L.PRE_SEPARATE_NPU),
    ("110001024", "PreSeparateNPUCodes", L.PRE_SEPARATE_NPU),  # 9 digits
    ("80E3A201", "SeparateNPUCodes", L.SEPARATE_NPU),
    ("8F19800C", "SeparateNPUCodes", L.SEPARATE_NPU),
]


@pytest.mark.parametrize(("code", "key", "level"), REAL_CODES)
def test_real_code_is_listed_where_the_test_says(code: str, key: str, level: FaultLevel) -> None:
    raw = _raw_fault_codes()
    assert code in raw[key]
    assert MAIN_LIST_KEYS[key] is level
    others = [k for k in MAIN_LIST_KEYS if k != key and code in raw.get(k, [])]
    assert others == [], f"{code} is also under {others}; pick an unambiguous code"


@pytest.mark.parametrize(("code", "key", "level"), REAL_CODES)
@pytest.mark.parametrize("severity", [None, 0, 3])
def test_real_code_level_ignores_severity(code: str, key: str, level: FaultLevel, severity: int | None) -> None:
    assert code_level(default_fault_code_table(), code, severity) is level
    assert code_level(default_fault_code_table(), code.lower(), severity) is level
    assert code_level(default_fault_code_table(), int(code, 16), severity) is level


@pytest.mark.parametrize(
    ("code", "level"),
    [
        ("A2301001", L.SEPARATE_NPU),  # listed under RestartBusiness and Separate
        ("B4060011", L.RESTART_BUSINESS),  # listed twice under RestartBusiness
        ("020001002", L.SEPARATE_NPU),  # written with a leading zero in the file
        ("20001002", L.SEPARATE_NPU),  # ... and matched as the number the library reports
        (0x20001002, L.SEPARATE_NPU),
        ("020000002", L.SUB_HEALTH_FAULT),
    ],
)
def test_table_quirks(code: str | int, level: FaultLevel) -> None:
    assert code_level(default_fault_code_table(), code) is level


# --- severity fallback -------------------------------------------------------------------------

UNLISTED = "8DEAD001"


def test_unlisted_code_is_really_unlisted() -> None:
    assert all(UNLISTED not in codes for codes in _raw_fault_codes().values())


@pytest.mark.parametrize(
    ("severity", "level"),
    [
        (None, L.SEPARATE_NPU),  # unknown (a polled code): the reference isolates
        (0, L.NOT_HANDLE_FAULT),  # suggestion / warning
        (1, L.NOT_HANDLE_FAULT),  # minor
        (2, L.SEPARATE_NPU),  # major
        (3, L.SEPARATE_NPU),  # critical
    ],
)
def test_severity_fallback(severity: int | None, level: FaultLevel) -> None:
    assert severity_level(severity) is level
    assert code_level(default_fault_code_table(), UNLISTED, severity) is level
    assert code_level(load_fault_code_table({}), "80E01801", severity) is level


def test_code_level_rejects_a_malformed_code() -> None:
    with pytest.raises(ValueError, match="hex"):
        code_level(default_fault_code_table(), "80E0180Z", 0)


# --- network codes -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("code", "expected"),
    [
        ("81078603", True),
        ("0x81078607", True),
        ("110000002", True),
        ("110001024", True),
        (0x81078603, True),
        ("80E01801", False),
        ("81078604", False),
        ("10001024", False),
    ],
)
def test_is_network_code(code: str | int, expected: bool) -> None:
    assert is_network_code(code) is expected


def test_network_codes_of_the_contract() -> None:
    assert frozenset({"81078603", "81078607", "110000002", "110001024"}) == NETWORK_CODES


@pytest.mark.parametrize(
    ("code", "level"),
    [
        ("81078603", L.NOT_HANDLE_FAULT),
        ("81078607", L.NOT_HANDLE_FAULT),
        ("110000002", L.SUB_HEALTH_FAULT),
        ("110001024", L.PRE_SEPARATE_NPU),
    ],
)
def test_network_level_from_the_packaged_table(code: str, level: FaultLevel) -> None:
    assert network_level(default_fault_code_table(), code) is level


@pytest.mark.parametrize(
    ("doc", "level"),
    [
        # Main lists: Restart* levels are demoted to NotHandleFault for a network code.
        ({"RestartRequestCodes": ["81078603"]}, L.NOT_HANDLE_FAULT),
        ({"RestartBusinessCodes": ["81078603"]}, L.NOT_HANDLE_FAULT),
        ({"FreeRestartNPUCodes": ["81078603"]}, L.NOT_HANDLE_FAULT),
        ({"RestartNPUCodes": ["81078603"]}, L.NOT_HANDLE_FAULT),
        # ... the other main levels carry over.
        ({"NotHandleFaultCodes": ["81078603"]}, L.NOT_HANDLE_FAULT),
        ({"SubHealthFaultCodes": ["81078603"]}, L.SUB_HEALTH_FAULT),
        ({"PreSeparateNPUCodes": ["81078603"]}, L.PRE_SEPARATE_NPU),
        ({"SeparateNPUCodes": ["81078603"]}, L.SEPARATE_NPU),
        # Explicit network lists.
        ({"NotHandleFaultNetworkCodes": ["81078603"]}, L.NOT_HANDLE_FAULT),
        ({"SubHealthFaultNetworkCodes": ["81078603"]}, L.SUB_HEALTH_FAULT),
        ({"PreSeparateNPUNetworkCodes": ["81078603"]}, L.PRE_SEPARATE_NPU),
        ({"SeparateNPUNetworkCodes": ["81078603"]}, L.SEPARATE_NPU),
        ({"SeparateNPUNetworkCodes": ["81078603"], "RestartNPUCodes": ["81078603"]}, L.SEPARATE_NPU),
        # Both: merged like the reference, the more serious wins.
        ({"NotHandleFaultNetworkCodes": ["81078603"], "SeparateNPUCodes": ["81078603"]}, L.SEPARATE_NPU),
        ({"PreSeparateNPUNetworkCodes": ["81078603"], "NotHandleFaultCodes": ["81078603"]}, L.PRE_SEPARATE_NPU),
        # Listed nowhere: PreSeparateNPU (no new pods).
        ({}, L.PRE_SEPARATE_NPU),
        ({"SeparateNPUNetworkCodes": ["81078607"]}, L.PRE_SEPARATE_NPU),
    ],
)
def test_network_level_rules(doc: dict[str, Any], level: FaultLevel) -> None:
    assert network_level(load_fault_code_table(doc), "81078603") is level


def test_network_level_of_a_chip_code_is_normal() -> None:
    table = load_fault_code_table({"SeparateNPUNetworkCodes": ["80E01801"], "SeparateNPUCodes": ["80E01801"]})
    assert network_level(table, "80E01801") is L.NORMAL_NPU


# --- chip levels -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("codes", "level", "network"),
    [
        ([], L.NORMAL_NPU, L.NORMAL_NPU),
        ([("80E21007", None)], L.NOT_HANDLE_FAULT, L.NORMAL_NPU),
        ([("80E21007", None), ("8C1FA006", 0)], L.RESTART_NPU, L.NORMAL_NPU),
        ([("8C1FA006", None), ("80E21007", None), ("80E3A201", None)], L.SEPARATE_NPU, L.NORMAL_NPU),
        ([("81A3880C", None), ("80E21007", None)], L.SUB_HEALTH_FAULT, L.NORMAL_NPU),
        ([("80E21007", None), (UNLISTED, 1)], L.NOT_HANDLE_FAULT, L.NORMAL_NPU),
        ([("80E21007", None), (UNLISTED, None)], L.SEPARATE_NPU, L.NORMAL_NPU),
        ([("80E21007", None), (UNLISTED, 2)], L.SEPARATE_NPU, L.NORMAL_NPU),
        # Network codes act on the network level only.
        ([("110001024", None)], L.NORMAL_NPU, L.PRE_SEPARATE_NPU),
        ([("81078603", 3), ("80C98008", None)], L.RESTART_REQUEST, L.NOT_HANDLE_FAULT),
        ([("81078603", None), ("110000002", None), ("110001024", None)], L.NORMAL_NPU, L.PRE_SEPARATE_NPU),
        ([("81078603", None), ("110000002", None)], L.NORMAL_NPU, L.SUB_HEALTH_FAULT),
    ],
)
def test_chip_levels(codes: list[tuple[str, int | None]], level: FaultLevel, network: FaultLevel) -> None:
    table = default_fault_code_table()
    assert chip_level(table, codes) is level
    assert chip_network_level(table, codes) is network


def test_chip_level_can_include_network_codes() -> None:
    table = default_fault_code_table()
    codes: list[tuple[str | int, int | None]] = [("110001024", None), ("80E21007", None)]
    assert chip_level(table, codes) is L.NOT_HANDLE_FAULT
    assert chip_level(table, codes, include_network_codes=True) is L.PRE_SEPARATE_NPU


def test_chip_level_accepts_any_iterable() -> None:
    table = default_fault_code_table()
    assert chip_level(table, iter([(0x8C1FA006, None)])) is L.RESTART_NPU
    assert chip_network_level(table, ((c, None) for c in ["110001024"])) is L.PRE_SEPARATE_NPU


# --- scheduling and network health -------------------------------------------------------------


@pytest.mark.parametrize(
    ("level", "idle", "in_use", "in_use_grace"),
    [
        (L.NORMAL_NPU, True, True, True),
        (L.NOT_HANDLE_FAULT, True, True, True),
        (L.SUB_HEALTH_FAULT, True, True, True),
        (L.PRE_SEPARATE_NPU, False, True, True),  # a pre-separate chip keeps serving the job that uses it
        (L.RESTART_REQUEST, False, False, False),
        (L.RESTART_BUSINESS, False, False, False),
        (L.FREE_RESTART_NPU, False, False, True),  # with grace tolerance the job keeps it until its reset
        (L.RESTART_NPU, False, False, False),
        (L.SEPARATE_NPU, False, False, False),
        (L.MANUALLY_SEPARATE_NPU, False, False, False),
    ],
)
def test_schedulable(level: FaultLevel, idle: bool, in_use: bool, in_use_grace: bool) -> None:
    assert schedulable(level, in_use_for_health=False) is idle
    assert schedulable(level, in_use_for_health=False, grace_tolerance_on=True) is idle, "grace needs a pod"
    assert schedulable(level, in_use_for_health=True) is in_use
    assert schedulable(level, in_use_for_health=True, grace_tolerance_on=True) is in_use_grace


# Reference pkg/device/ascendcommon_test.go TestIsHealthy: the fault type and npuIsUsedNow are
# mocked there; here they are the arguments.
@pytest.mark.parametrize(
    ("case", "level", "used", "healthy"),
    [
        ("01-normal npu is healthy, device should be healthy", L.NORMAL_NPU, False, True),
        ("02-PreSeparate npu is healthy and npu is used now, device should be healthy", L.PRE_SEPARATE_NPU, True, True),
        ("03-PreSeparate npu is not used now, device should be unhealthy", L.PRE_SEPARATE_NPU, False, False),
    ],
)
def test_is_healthy(case: str, level: FaultLevel, used: bool, healthy: bool) -> None:
    assert schedulable(level, used) is healthy, case


# Reference pkg/server/manager_test.go TestIsSupportGraceTolerance: the hot-reset mode is our
# --hot-reset (on = HotResetTrainOffLine), the run mode comes from the chip's name.
@pytest.mark.parametrize(
    ("case", "hot_reset", "chip", "on"),
    [
        ("hot reset mode error", False, "Ascend910-0", False),
        ("run mode is not Ascend910", True, "Ascend310P-0", False),
        # "SMP chip mode is not for Ascend910" (910A in AMP mode) has no counterpart: the work mode
        # is not read, a 910A counts as SMP.
        ("GraceToleranceOn is true", True, "Ascend910-0", True),
        ("A5 is run mode Ascend910 too", True, "npu-7", True),
        ("inference chip", True, "Ascend310-1", False),
        ("a vNPU names its chip's type", True, "Ascend910-4c-100-3", True),
        ("not a chip name", True, "GPU-0", False),
        ("hot reset off, A5", False, "npu-0", False),
    ],
)
def test_supports_grace_tolerance(case: str, hot_reset: bool, chip: str, on: bool) -> None:
    assert supports_grace_tolerance(hot_reset, chip) is on, case


@pytest.mark.parametrize(
    ("level", "healthy"),
    [
        (L.NORMAL_NPU, True),
        (L.NOT_HANDLE_FAULT, True),
        (L.SUB_HEALTH_FAULT, False),
        (L.PRE_SEPARATE_NPU, False),
        (L.SEPARATE_NPU, False),
        (L.MANUALLY_SEPARATE_NPU, False),
    ],
)
def test_network_healthy(level: FaultLevel, healthy: bool) -> None:
    assert network_healthy(level) is healthy


@pytest.mark.parametrize(
    ("level", "candidate"),
    [
        (L.NORMAL_NPU, False),
        (L.NOT_HANDLE_FAULT, False),
        (L.SUB_HEALTH_FAULT, False),
        (L.RESTART_REQUEST, True),
        (L.RESTART_BUSINESS, True),
        (L.FREE_RESTART_NPU, True),
        (L.RESTART_NPU, True),
        (L.PRE_SEPARATE_NPU, False),
        (L.SEPARATE_NPU, False),  # needs an operator
        (L.MANUALLY_SEPARATE_NPU, False),
    ],
)
def test_reset_candidate(level: FaultLevel, candidate: bool) -> None:
    assert reset_candidate(level) is candidate


def test_every_reset_candidate_is_unschedulable() -> None:
    # A reset takes the chip away; it must never be a chip the kubelet still hands out. Grace
    # tolerance is the one exception, for the job on the chip until its reset (the fault-manager
    # makes a resetting chip unschedulable whatever its level).
    for level in FaultLevel:
        if reset_candidate(level):
            assert not schedulable(level, in_use_for_health=True)
            assert schedulable(level, True, grace_tolerance_on=True) is (level is L.FREE_RESTART_NPU)


# --- switch codes ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("code", "level"),
    [
        ("[0x00f1fef5,155913,cpu,na]", SwitchFaultLevel.NOT_HANDLE),
        (" [0x00f1ff06,155910,na,na] ", SwitchFaultLevel.SUB_HEALTH),
        ("[0x00f1fef5,155914,npu,na]", SwitchFaultLevel.RESTART_REQUEST),
        ("[0x00f1fef5,155912,L2,na]", SwitchFaultLevel.SEPARATE),
        ("[0x00f1fef5,155999,L2,na]", None),  # not listed
    ],
)
def test_switch_code_level(code: str, level: SwitchFaultLevel | None) -> None:
    assert switch_code_level(default_switch_fault_table(), code) == level


def test_switch_pre_separate_from_a_custom_table() -> None:
    table = load_switch_fault_table({"PreSeparateFaultCodes": ["[0x00f103b0,155907,na,na]"]})
    assert switch_code_level(table, "[0x00f103b0,155907,na,na]") is SwitchFaultLevel.PRE_SEPARATE


def test_switch_code_level_rejects_a_malformed_code() -> None:
    with pytest.raises(ValueError, match="switch fault code"):
        switch_code_level(default_switch_fault_table(), "0x00f1fef5,155913,cpu,na")
