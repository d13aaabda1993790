"""The reset-config-<job> ConfigMap and its helpers, rule by rule (contract section 8).

Expected strings follow the reference's TaskResetInfo / TaskDevInfo / DevFaultInfo structs and
WriteResetInfoDataIntoCM (see fault_manager.hotreset.reset_config); test_deviceinfo_golden.py checks the
same renderer against output of a real Go toolchain.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

import pytest
from ascend_common.faults.levels import FaultLevel
from fault_manager.hotreset.reset_config import (
    POLICIES,
    REFUSED_NO_CONFIG_MAP,
    REFUSED_NO_RESET_JSON,
    REFUSED_RESCHEDULE,
    REFUSED_UNMARSHAL,
    DevFaultInfo,
    RankEntry,
    ResetConfigRefused,
    clear_reset_config,
    error_code_hex,
    job_name,
    most_severe_policy,
    next_reset_config,
    policy_for_level,
    rank_id,
    rank_list,
    render_reset_config,
)

T = 1718000000


def _rank(**overrides: Any) -> RankEntry:
    fields: dict[str, Any] = {
        "rank_id": 4,
        "logic_id": 0,
        "status": "unrecovered",
        "policy": "reset",
        "initial_policy": "restart",
        "error_codes": (0x80E01801, 0x8C1FA006),
    }
    return RankEntry(**(fields | overrides))


def test_reset_json_golden_and_check_code() -> None:
    data = render_reset_config(
        [_rank()], update_time_s=T, retry_time=2, fault_flushing=True, graceful_exit=1, restart_fault_process=True
    )
    expected = (
        '{"RankList":[{"RankId":4,"LogicId":0,"Status":"unrecovered","Policy":"reset","InitialPolicy":"restart",'
        '"ErrorCode":[],"ErrorCodeHex":"80E01801,8C1FA006"}],"UpdateTime":1718000000,"RetryTime":2,'
        '"FaultFlushing":true,"GracefulExit":1,"RestartFaultProcess":true}'
    )
    assert data == {
        "reset.json": expected,
        "checkCode": hashlib.sha256(expected.encode()).hexdigest(),
        "restartType": "hotReset",
    }


def test_field_order() -> None:
    parsed = json.loads(render_reset_config([_rank()], update_time_s=T)["reset.json"])
    assert list(parsed) == [
        "RankList",
        "UpdateTime",
        "RetryTime",
        "FaultFlushing",
        "GracefulExit",
        "RestartFaultProcess",
    ]
    # DevFaultInfo is embedded in TaskDevInfo, so its fields follow RankId.
    assert list(parsed["RankList"][0]) == [
        "RankId",
        "LogicId",
        "Status",
        "Policy",
        "InitialPolicy",
        "ErrorCode",
        "ErrorCodeHex",
    ]


def test_defaults_and_no_ranks() -> None:
    assert render_reset_config([], update_time_s=T)["reset.json"] == (
        '{"RankList":[],"UpdateTime":1718000000,"RetryTime":0,"FaultFlushing":false,"GracefulExit":0,'
        '"RestartFaultProcess":false}'
    )


def test_check_code_follows_every_byte() -> None:
    base = render_reset_config([_rank()], update_time_s=T)
    for changed in (
        render_reset_config([_rank()], update_time_s=T + 1),
        render_reset_config([_rank(status="recovered")], update_time_s=T),
        render_reset_config([_rank()], update_time_s=T, graceful_exit=1),
    ):
        assert changed["checkCode"] != base["checkCode"]
        assert changed["checkCode"] == hashlib.sha256(changed["reset.json"].encode()).hexdigest()


@pytest.mark.parametrize(
    ("codes", "explicit", "written"),
    [
        ((), None, ""),
        ((0x80E01801,), None, "80E01801"),
        ((0x110001024, 0x40F84E00), None, "110001024,40F84E00"),
        ((0x0000ABCD,), None, "ABCD"),
        ((-26,), None, "-1A"),  # strconv.FormatInt of a negative int64
        ((1, 2), "FROM-CALLER", "FROM-CALLER"),
    ],
)
def test_error_code_hex_and_empty_error_code_list(codes: tuple[int, ...], explicit: str | None, written: str) -> None:
    entry = _rank(error_codes=codes, error_code_hex=explicit)
    rank = json.loads(render_reset_config([entry], update_time_s=T)["reset.json"])["RankList"][0]
    assert rank["ErrorCodeHex"] == written
    assert rank["ErrorCode"] == []  # the reference moves the codes into ErrorCodeHex


def test_error_code_hex_helper() -> None:
    assert error_code_hex([0x80E01801, 0x8C1FA006]) == "80E01801,8C1FA006"
    with pytest.raises(TypeError):
        error_code_hex([True])


def test_error_code_hex_keeps_the_policys_spelling() -> None:
    # FormatFaultCodeHex: a configured "020001002" keeps its leading zero, upper-cased after.
    first = {"20001002": "020001002", "8C1FA006": "08c1fa006"}
    second = {"8C1FA006": "8c1fa006", "80E01801": "0080e01801"}
    codes = [0x20001002, 0x8C1FA006, 0x80E01801, 0xABC]
    assert error_code_hex(codes, first, second) == "020001002,08C1FA006,0080E01801,ABC"
    assert error_code_hex(codes) == "20001002,8C1FA006,80E01801,ABC"


@pytest.mark.parametrize(
    ("kwargs", "error"),
    [
        ({"graceful_exit": True}, TypeError),  # an int in the reference, never a bool
        ({"graceful_exit": "1"}, TypeError),
        ({"fault_flushing": 1}, TypeError),
        ({"restart_fault_process": None}, TypeError),
        ({"retry_time": 2**63}, ValueError),
        ({"update_time_s": 1.0}, TypeError),
    ],
)
def test_mistyped_fields_are_rejected(kwargs: dict[str, Any], error: type[Exception]) -> None:
    args: dict[str, Any] = {"update_time_s": T} | kwargs
    with pytest.raises(error):
        render_reset_config([], **args)


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"status": "done"}, "status"),
        ({"policy": "reboot"}, "Policy"),
        ({"initial_policy": ""}, "InitialPolicy"),
        ({"logic_id": 2**31}, "LogicId"),
    ],
)
def test_bad_ranks_are_rejected(overrides: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        render_reset_config([_rank(**overrides)], update_time_s=T)


@pytest.mark.parametrize(
    ("level", "policy"),
    [
        (FaultLevel.NORMAL_NPU, "empty"),
        (FaultLevel.NOT_HANDLE_FAULT, "empty"),
        (FaultLevel.SUB_HEALTH_FAULT, "empty"),
        (FaultLevel.RESTART_REQUEST, "restart_request"),
        (FaultLevel.RESTART_BUSINESS, "restart"),
        (FaultLevel.FREE_RESTART_NPU, "free_reset"),
        (FaultLevel.RESTART_NPU, "reset"),
        (FaultLevel.PRE_SEPARATE_NPU, "isolate"),
        (FaultLevel.SEPARATE_NPU, "isolate"),
        (FaultLevel.MANUALLY_SEPARATE_NPU, "isolate"),
        ("RestartNPU", "reset"),
        ("SomethingNew", "isolate"),  # unknown: the safe side, as the reference's default branch
    ],
)
def test_policy_for_level(level: str, policy: str) -> None:
    assert policy_for_level(level) == policy


def test_every_level_has_a_valid_policy() -> None:
    assert {policy_for_level(level) for level in FaultLevel} <= set(POLICIES)


@pytest.mark.parametrize(
    ("policies", "worst"),
    [
        ([], "empty"),
        (["empty", "ignore"], "ignore"),
        (["restart", "restart_request", "empty"], "restart"),
        (["reset", "free_reset"], "reset"),
        (["reset", "isolate", "restart"], "isolate"),
    ],
)
def test_most_severe_policy(policies: list[str], worst: str) -> None:
    assert most_severe_policy(policies) == worst


def test_most_severe_policy_rejects_unknown() -> None:
    with pytest.raises(ValueError, match="unknown policy"):
        most_severe_policy(["reset", "nuke"])


@pytest.mark.parametrize(
    ("rank_index", "chips", "logic_id", "expected"),
    [
        (0, [0, 1, 2, 3], 0, 0),
        (0, [0, 1, 2, 3], 3, 3),
        (2, [4, 5, 6, 7], 5, 9),  # 2 x 4 + position 1
        (1, [7, 3, 5], 5, 4),  # sorted by logic id: [3, 5, 7] -> 1 x 3 + 1
        (3, [9], 9, 3),
        (-1, [0, 1], 1, -1),  # inference
        (-1, [4], 4, -1),
    ],
)
def test_rank_id(rank_index: int, chips: list[int], logic_id: int, expected: int) -> None:
    assert rank_id(rank_index, chips, logic_id) == expected


def test_rank_id_rejects_a_chip_of_another_pod_and_bad_indexes() -> None:
    with pytest.raises(ValueError, match="not one of the pod's chips"):
        rank_id(0, [0, 1], 2)
    with pytest.raises(ValueError, match="negative"):
        rank_id(-2, [0, 1], 1)


@pytest.mark.parametrize(
    ("labels", "name"),
    [
        ({}, None),
        ({"app": "x"}, None),
        ({"volcano.sh/job-name": "job-a"}, "job-a"),
        ({"training.kubeflow.org/job-name": "job-b"}, "job-b"),
        ({"deploy-name": "svc-c"}, "svc-c"),
        ({"deploy-name": "svc-c", "training.kubeflow.org/job-name": "job-b", "volcano.sh/job-name": "job-a"}, "job-a"),
        ({"deploy-name": "svc-c", "training.kubeflow.org/job-name": "job-b"}, "job-b"),
        # the first label present decides, even when empty (GetJobNameOfPod checks presence)
        ({"volcano.sh/job-name": "", "training.kubeflow.org/job-name": "job-b"}, None),
    ],
)
def test_job_name(labels: dict[str, str], name: str | None) -> None:
    assert job_name(labels) == name


# --- rank_list (GenerateTaskDevFaultInfoList) ---------------------------------------------------------


def _fault(policy: str = "empty", codes: tuple[int, ...] = ()) -> DevFaultInfo:
    return DevFaultInfo(status="unrecovered", policy=policy, initial_policy=policy, error_codes=codes)


def test_rank_list_is_every_chip_of_the_pod_by_logic_id() -> None:
    faults = {logic: _fault() for logic in range(8)} | {6: _fault("reset", (0x80E01801,))}
    ranks = rank_list(1, [7, 6, 5, 4], faults)
    assert [(r.rank_id, r.logic_id, r.policy) for r in ranks] == [
        (4, 4, "empty"),
        (5, 5, "empty"),
        (6, 6, "reset"),
        (7, 7, "empty"),
    ]
    assert json.loads(render_reset_config(ranks, update_time_s=T)["reset.json"])["RankList"][2]["ErrorCodeHex"] == (
        "80E01801"
    )


def test_rank_list_agrees_with_rank_id() -> None:
    chips = [11, 2, 7]
    ranks = rank_list(3, chips, {logic: _fault() for logic in chips})
    assert [r.rank_id for r in ranks] == [rank_id(3, chips, r.logic_id) for r in ranks]


def test_rank_list_rejects_other_negative_rank_indexes() -> None:
    with pytest.raises(ValueError, match="negative"):
        rank_list(-2, [0], {0: _fault()})


# --- next_reset_config (WriteResetInfoDataIntoCM) ------------------------------------------------------


def _old(
    retry_time: int = 0, restart_type: str | None = "hotReset", ranks: list[RankEntry] | None = None
) -> dict[str, str]:
    data = render_reset_config(ranks or [], update_time_s=T - 60, retry_time=retry_time)
    if restart_type is None:
        del data["restartType"]
    else:
        data["restartType"] = restart_type
    return data


def _info(data: dict[str, str]) -> dict[str, Any]:
    parsed: dict[str, Any] = json.loads(data["reset.json"])
    return parsed


def test_next_reset_config_carries_retry_time_over() -> None:
    data = next_reset_config(_old(retry_time=2), [_rank()], update_time_s=T, retry=False)
    assert _info(data)["RetryTime"] == 2
    assert _info(data)["UpdateTime"] == T
    assert (
        next_reset_config(_old(retry_time=2), [_rank()], update_time_s=T, retry=True)["reset.json"]
        == (render_reset_config([_rank()], update_time_s=T, retry_time=3)["reset.json"])
    )


@pytest.mark.parametrize(
    ("old_type", "retry", "written"),
    [
        ("hotReset", False, "hotReset"),
        ("podReschedule", False, "podReschedule"),  # kept as the old ConfigMap has it
        ("", False, ""),  # present, even when empty
        (None, False, None),  # absent stays absent
        ("podReschedule", True, "hotReset"),  # a retry sets it back to hotReset
        (None, True, "hotReset"),
    ],
)
def test_next_reset_config_restart_type(old_type: str | None, retry: bool, written: str | None) -> None:
    data = next_reset_config(_old(restart_type=old_type), [_rank()], update_time_s=T, retry=retry)
    assert data.get("restartType") == written
    assert ("restartType" in data) == (written is not None)


def test_next_reset_config_is_the_whole_data_with_a_matching_check_code() -> None:
    old = _old() | {"other": "dropped"}
    data = next_reset_config(old, [_rank()], update_time_s=T, retry=False)
    assert set(data) == {"reset.json", "checkCode", "restartType"}
    assert data["checkCode"] == hashlib.sha256(data["reset.json"].encode()).hexdigest()


def test_next_reset_config_writes_the_optional_fields_zero() -> None:
    old = render_reset_config([], update_time_s=T, fault_flushing=True, graceful_exit=1, restart_fault_process=True)
    info = _info(next_reset_config(old, [_rank()], update_time_s=T, retry=False))
    assert (info["FaultFlushing"], info["GracefulExit"], info["RestartFaultProcess"]) == (False, 0, False)


def test_next_reset_config_refuses_ranks_after_an_isolation() -> None:
    isolated = _old(ranks=[_rank(status="failed", policy="isolate")])
    with pytest.raises(ResetConfigRefused) as refused:
        next_reset_config(isolated, [_rank()], update_time_s=T, retry=True)
    assert refused.value.reason == REFUSED_RESCHEDULE
    # Only a clear passes, and it keeps RetryTime.
    assert _info(clear_reset_config(isolated, update_time_s=T))["RankList"] == []


@pytest.mark.parametrize(
    "text",
    [
        '{"RankList":[],"Note":"isolated by hand"}',  # any "isolate" in the text, as a substring
        "not json, isolate",  # checked before the text is parsed
    ],
)
def test_isolate_is_a_substring_test_on_the_raw_text(text: str) -> None:
    with pytest.raises(ResetConfigRefused) as refused:
        next_reset_config({"reset.json": text}, [_rank()], update_time_s=T, retry=False)
    assert refused.value.reason == REFUSED_RESCHEDULE


def test_next_reset_config_needs_the_config_map_and_its_reset_json() -> None:
    with pytest.raises(ResetConfigRefused) as refused:
        next_reset_config(None, [], update_time_s=T, retry=False)
    assert refused.value.reason == REFUSED_NO_CONFIG_MAP
    with pytest.raises(ResetConfigRefused) as refused:
        next_reset_config({"restartType": "hotReset"}, [], update_time_s=T, retry=False)
    assert refused.value.reason == REFUSED_NO_RESET_JSON


@pytest.mark.parametrize(
    ("text", "retry_time"),
    [
        ("null", 0),  # Go leaves the zero value
        ("{}", 0),
        ('  {"RetryTime": 7}\n', 7),
        ('{"retrytime": 4}', 4),  # Go matches field names ignoring case
        ('{"RetryTime": 4, "RETRYTIME": 6}', 6),  # every match is decoded: the last wins
        ('{"RetryTime": 4, "retryTime": null}', 4),  # null leaves the field as it is
        ('{"RetryTime": -3}', -3),
        ('{"RetryTime": 2, "Extra": {"x": [1.5, "y"]}}', 2),  # unknown keys are ignored
        ('{"RankList": null, "UpdateTime": null}', 0),
        ('{"RankList": [null, {"RankId": 1, "ErrorCode": [1, null]}]}', 0),
        ('{"RankList": [{"DevFaultInfo": 5}]}', 0),  # an embedded struct is no field of its own
        ('{"RankList": [{"LogicId": 2147483647}]}', 0),
    ],
)
def test_retry_time_is_read_as_go_unmarshals_it(text: str, retry_time: int) -> None:
    data = next_reset_config({"reset.json": text}, [], update_time_s=T, retry=False)
    assert _info(data)["RetryTime"] == retry_time


@pytest.mark.parametrize(
    "text",
    [
        "",
        "reset-config-node",
        "[]",
        '"text"',
        "5",
        '{"RetryTime": 1.0}',  # an int field takes integer literals only
        '{"RetryTime": 1e2}',
        '{"RetryTime": "1"}',
        '{"RetryTime": 9223372036854775808}',  # beyond Go's int
        '{"RetryTime": NaN}',
        '{"RetryTime": 1} x',
        '{"FaultFlushing": 1}',
        '{"GracefulExit": false}',
        '{"UpdateTime": {}}',
        '{"RankList": {}}',
        '{"RankList": [1]}',
        '{"RankList": [{"LogicId": 2147483648}]}',  # LogicId is an int32
        '{"RankList": [{"Status": 1}]}',
        '{"RankList": [{"ErrorCode": ["80E01801"]}]}',
        '{"rAnKlIsT": 3}',
    ],
)
def test_an_old_reset_json_go_cannot_unmarshal_is_refused(text: str) -> None:
    with pytest.raises(ResetConfigRefused) as refused:
        next_reset_config({"reset.json": text}, [], update_time_s=T, retry=True)
    assert refused.value.reason.startswith(REFUSED_UNMARSHAL)


def test_go_field_matching_folds_the_kelvin_sign_and_long_s() -> None:
    # Unicode simple folding maps U+212A to k and U+017F to s, so Go matches these keys.
    with pytest.raises(ResetConfigRefused):
        next_reset_config({"reset.json": '{"Ran\u212aList": 3}'}, [], update_time_s=T, retry=False)
    with pytest.raises(ResetConfigRefused):
        next_reset_config({"reset.json": '{"FaultFlu\u017fhing": 3}'}, [], update_time_s=T, retry=False)


def test_retry_time_wraps_as_a_go_int() -> None:
    data = next_reset_config({"reset.json": f'{{"RetryTime": {2**63 - 1}}}'}, [], update_time_s=T, retry=True)
    assert _info(data)["RetryTime"] == -(2**63)


def test_a_huge_number_in_the_old_reset_json_is_a_refusal_not_a_crash() -> None:
    """Python's int() refuses more than 4300 digits with a bare ValueError; Go's decoder refuses the
    overflow: the write is refused (the hot-reset loop handles only ResetConfigRefused)."""
    from fault_manager.hotreset.reset_config import ResetConfigRefused, next_reset_config

    old = {"reset.json": '{"RankList":[],"RetryTime":' + "9" * 5000 + "}"}
    with pytest.raises(ResetConfigRefused, match="unmarshal"):
        next_reset_config(old, [], update_time_s=1, retry=True)
