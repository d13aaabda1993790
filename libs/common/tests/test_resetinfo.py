"""The reset-config-<job> ConfigMap and its helpers, rule by rule (contract section 8).

Expected strings follow the reference's TaskResetInfo / TaskDevInfo / DevFaultInfo structs and
WriteResetInfoDataIntoCM (see ascend_common.resetinfo); test_deviceinfo_golden.py checks the
same renderer against output of a real Go toolchain.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

import pytest
from ascend_common.faults.levels import FaultLevel
from ascend_common.resetinfo import (
    POLICIES,
    RankEntry,
    error_code_hex,
    job_name,
    most_severe_policy,
    policy_for_level,
    rank_id,
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
