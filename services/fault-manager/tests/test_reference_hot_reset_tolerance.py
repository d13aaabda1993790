"""Ports of the reference's Go tests of job fault tolerance (pkg/device/ascendtorlerance_test.go).

The reference tests methods of HotResetTools; ours are pure functions of fault_manager.hotreset.reset_config:
- GetDevProcessPolicy(faultType) -> policy_for_level(level);
- GenerateTaskDevFaultInfoList(devIdList, rankIndex) with the tool's globalDevFaultInfo cache ->
  rank_list(rank_index, pod_logic_ids, faults), the cache passed as `faults` and the rank index
  as the int parse_rank_index gives for the annotation's text.
Test names are the Go test's, then the convey case.
"""

from __future__ import annotations

import pytest
from fault_manager.hotreset.reset_config import DevFaultInfo, policy_for_level, rank_list

# --- TestGetDevProcessPolicy: 2 convey cases -------------------------------------------------------


def test_GetDevProcessPolicy_train_and_infer_model_success() -> None:
    assert policy_for_level("NormalNPU") == "empty"
    assert policy_for_level("NotHandleFault") == "empty"

    assert policy_for_level("RestartBusiness") == "restart"

    assert policy_for_level("FreeRestartNPU") == "free_reset"
    assert policy_for_level("RestartNPU") == "reset"

    assert policy_for_level("SeparateNPU") == "isolate"


def test_GetDevProcessPolicy_infer_model_success() -> None:
    assert policy_for_level("RestartRequest") == "restart_request"


# --- TestGenerateTaskDevFaultInfoList: 1 convey case -----------------------------------------------


def _reset_err() -> DevFaultInfo:  # mockResetErrDevFaultInfo
    # The mock's ErrorCodeHex "0x8C204E00" is left out: the reference recomputes ErrorCodeHex from
    # ErrorCode when it writes (setNewTaskInfoWithHexString), and so do we.
    return DevFaultInfo(status="unrecovered", policy="reset", initial_policy="reset", error_codes=(2350927360,))


def _empty_err() -> DevFaultInfo:  # mockEmptyErrDevFaultInfo
    return DevFaultInfo(status="unrecovered", policy="empty", initial_policy="empty")


def test_GenerateTaskDevFaultInfoList_success() -> None:
    faults = {0: _reset_err(), 1: _empty_err(), 2: _empty_err(), 3: _empty_err()}
    task_dev_info = rank_list(0, [0, 1, 2, 3], faults)
    assert task_dev_info is not None
    assert len(task_dev_info) == 4  # lengthOfDevFaultInfo
    assert task_dev_info[0].rank_id == 0  # rankID0
    assert task_dev_info[0].status == "unrecovered"
    assert task_dev_info[0].policy == "reset"
    assert task_dev_info[0].initial_policy == "reset"


# --- beyond the Go cases: the rest of GenerateTaskDevFaultInfoList's rule --------------------------


def test_GenerateTaskDevFaultInfoList_orders_by_logic_id_and_counts_the_whole_pod() -> None:
    faults = {logic: _empty_err() for logic in (9, 3, 5)}
    ranks = rank_list(2, [9, 3, 5], faults)
    assert [(r.logic_id, r.rank_id) for r in ranks] == [(3, 6), (5, 7), (9, 8)]


def test_GenerateTaskDevFaultInfoList_inference_pod() -> None:
    ranks = rank_list(-1, [1, 0], {0: _empty_err(), 1: _reset_err()})
    assert [(r.logic_id, r.rank_id) for r in ranks] == [(0, -1), (1, -1)]


def test_GenerateTaskDevFaultInfoList_device_not_in_cache() -> None:
    with pytest.raises(ValueError, match="device 2 is not in global cache"):
        rank_list(0, [0, 2], {0: _empty_err()})
