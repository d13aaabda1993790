"""Ports of the reference's Go tests of the reset ConfigMap write (pkg/kubeclient).

WriteResetInfoDataIntoCM(taskName, namespace, taskInfo, needAddRetry) reads the ConfigMap, decides
and updates it; ours decides only: next_reset_config(old_data, ranks, update_time_s=, retry=)
returns the new data or raises ResetConfigRefused where the Go function returns an error, and
the caller reads and writes the ConfigMap. ClearResetInfo -> clear_reset_config.
The Go cases patch functions with gomonkey; each port says what stands in for the patch.
Test names are the Go test's, then the convey case.
"""

from __future__ import annotations

import hashlib
import json

import pytest
from fault_manager.hotreset.reset_config import (
    REFUSED_NO_RESET_JSON,
    REFUSED_UNMARSHAL,
    RankEntry,
    ResetConfigRefused,
    clear_reset_config,
    next_reset_config,
)

T = 1718000000


def _task_reset_info() -> list[RankEntry]:  # getTaskResetInfo
    return [
        RankEntry(0, 0, "unrecovered", "reset", "reset", (2350927360,)),  # mockResetErrDevFaultInfo(0)
        RankEntry(1, 1, "unrecovered", "empty", "empty"),  # mockEmptyErrDevFaultInfo(1)
    ]


# getMockCreateCM(ResetInfoCMDataKey, ResetInfoCMNamePrefix + "node"): the old ConfigMap's
# reset.json is the text "reset-config-node".
OLD_CM = {"reset.json": "reset-config-node"}

# --- TestWriteResetInfoDataIntoCM: 3 convey cases --------------------------------------------------


def test_WriteResetInfoDataIntoCM_invalid_reset_info_data() -> None:
    with pytest.raises(ResetConfigRefused) as refused:
        next_reset_config(OLD_CM, _task_reset_info(), update_time_s=T, retry=True)
    # Go: "failed to unmarshal reset info data, err: invalid character 'r' looking for beginning of value"
    assert refused.value.reason.startswith(REFUSED_UNMARSHAL)
    assert isinstance(refused.value, ValueError)


# The next two Go cases patch json.Unmarshal to succeed without filling anything, so the old
# reset.json reads as an empty TaskResetInfo: "{}" stands in for it here.
OLD_CM_UNMARSHALLED = {"reset.json": "{}"}


def test_WriteResetInfoDataIntoCM_marshal_task_reset_data_failed() -> None:
    # Go patches common.MarshalData to return nothing and expects "marshal task reset data failed".
    # json.Marshal of a TaskResetInfo cannot fail, and our renderer has no such failure: the
    # port checks that the data is never empty instead.
    data = next_reset_config(OLD_CM_UNMARSHALLED, _task_reset_info(), update_time_s=T, retry=True)
    assert data["reset.json"]
    assert data["checkCode"] == hashlib.sha256(data["reset.json"].encode()).hexdigest()


def test_WriteResetInfoDataIntoCM_update_cm() -> None:
    data = next_reset_config(OLD_CM_UNMARSHALLED, _task_reset_info(), update_time_s=T, retry=True)
    assert list(data) == ["reset.json", "checkCode", "restartType"]
    info = json.loads(data["reset.json"])
    assert info["RetryTime"] == 1  # the old RetryTime (0) plus one: needAddRetry is true
    assert info["UpdateTime"] == T
    assert [(r["RankId"], r["LogicId"], r["Policy"], r["ErrorCodeHex"]) for r in info["RankList"]] == [
        (0, 0, "reset", "8C204E00"),
        (1, 1, "empty", ""),
    ]
    assert data["restartType"] == "hotReset"


# --- TestClearResetInfo (kubeclient_test.go): 2 convey cases ---------------------------------------
# Go patches WriteResetInfoDataIntoCM itself; the ports run the real rule under ClearResetInfo.


def test_ClearResetInfo_write_reset_info_data_into_cm_error() -> None:
    # The write's error comes back as the clear's: here a ConfigMap without reset.json.
    with pytest.raises(ResetConfigRefused) as refused:
        clear_reset_config({"checkCode": "x"}, update_time_s=T)
    assert refused.value.reason == REFUSED_NO_RESET_JSON


def test_ClearResetInfo_success() -> None:
    # A clear writes an empty RankList, which is allowed even over an isolation.
    old = next_reset_config(OLD_CM_UNMARSHALLED, [], update_time_s=T, retry=True)
    isolated = json.loads(old["reset.json"]) | {
        "RankList": [{"RankId": 0, "LogicId": 0, "Status": "failed", "Policy": "isolate"}]
    }
    data = clear_reset_config({**old, "reset.json": json.dumps(isolated)}, update_time_s=T + 5)
    info = json.loads(data["reset.json"])
    assert info["RankList"] == []
    assert info["RetryTime"] == 1  # kept, not reset: a clear is not a retry
    assert data["restartType"] == "hotReset"  # the old ConfigMap's
