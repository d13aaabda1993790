"""The job's `reset-config-<job>` ConfigMap (contract section 8), rendered.

Pure: the training job's agents read `reset.json` (from the ConfigMap and from the host file the
plugin mirrors it to) to stop training on `unrecovered` and resume on `recovered`, and check
`checkCode` against it, so the bytes are the reference's.

Reference (MindCluster, component/ascend-device-plugin):
- pkg/common/proto.go: TaskResetInfo {RankList []*TaskDevInfo, UpdateTime int64, RetryTime int,
  FaultFlushing bool, GracefulExit int, RestartFaultProcess bool}; TaskDevInfo {RankId int,
  DevFaultInfo (embedded, so its fields follow RankId)}; DevFaultInfo {LogicId int32, Status,
  Policy, InitialPolicy, ErrorCode []int64, ErrorCodeHex}. No json tags: Go field names.
- pkg/kubeclient/client_server.go WriteResetInfoDataIntoCM / setNewTaskInfoWithHexString:
  ErrorCodeHex = strings.ToUpper(comma-joined strconv.FormatInt(code, 16)), ErrorCode written as
  an empty list, RankList never nil; data `reset.json` = json.Marshal(info), `checkCode` =
  MakeDataHash(info) = hex sha256 of those same bytes; `restartType` = "hotReset".
- pkg/common/constants.go: policy names, statuses, data keys; ResetTaskNameKey
  "volcano.sh/job-name", ResetTaskNameKeyInLabel "training.kubeflow.org/job-name".
- pkg/device/ascendtolerance.go: GetDevProcessPolicy (level -> policy), processPolicyTable
  (policy severity), GenerateTaskDevFaultInfoList (RankId); pkg/common/common.go GetJobNameOfPod.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Final

from ascend_common.gojson import GoJSON, go_json

__all__ = [
    "CHECK_CODE_KEY",
    "CM_NAME_PREFIX",
    "HOT_RESET",
    "INFERENCE_RANK_INDEX",
    "JOB_NAME_LABELS",
    "MAX_RANK_INDEX",
    "POLICIES",
    "RESET_JSON_KEY",
    "RESTART_TYPE_KEY",
    "STATUSES",
    "RankEntry",
    "error_code_hex",
    "job_name",
    "most_severe_policy",
    "parse_rank_index",
    "policy_for_level",
    "rank_id",
    "render_reset_config",
]

CM_NAME_PREFIX: Final = "reset-config-"
RESET_JSON_KEY: Final = "reset.json"
CHECK_CODE_KEY: Final = "checkCode"
RESTART_TYPE_KEY: Final = "restartType"
HOT_RESET: Final = "hotReset"
INFERENCE_RANK_INDEX: Final = -1
RANK_INDEX_ANNOTATION: Final = "hccl/rankIndex"
# RankId = rank index x chips of the pod + position must stay a Go int; no job has 2^31 pods.
MAX_RANK_INDEX: Final = 2**31 - 1
_RANK_INDEX = re.compile(r"-1|[0-9]{1,12}")

UNRECOVERED: Final = "unrecovered"
RECOVERED: Final = "recovered"
FAILED: Final = "failed"
STATUSES: Final = frozenset({UNRECOVERED, RECOVERED, FAILED})

# Policies from least to most severe (processPolicyTable). "empty" is what the reference gives a
# chip without a fault worth handling; "ignore" is a valid value the reference never assigns.
POLICIES: Final = ("empty", "ignore", "restart_request", "restart", "free_reset", "reset", "isolate")
_SEVERITY: Final = {policy: rank for rank, policy in enumerate(POLICIES)}

_POLICY_BY_LEVEL: Final = {
    "NormalNPU": "empty",
    "NotHandleFault": "empty",
    "SubHealthFault": "empty",
    "RestartRequest": "restart_request",
    "RestartBusiness": "restart",
    "FreeRestartNPU": "free_reset",
    "RestartNPU": "reset",
}

# Looked up in this order; the reference's GetJobNameOfPod reads the first two, the contract
# adds deploy-name for inference deployments.
JOB_NAME_LABELS: Final = ("volcano.sh/job-name", "training.kubeflow.org/job-name", "deploy-name")

_INT = (-(2**63), 2**63 - 1)  # Go int on a 64-bit node
_INT32 = (-(2**31), 2**31 - 1)


@dataclass(frozen=True)
class RankEntry:
    """One rank of RankList. `error_code_hex` None: derived from `error_codes` as the reference does.

    The reference writes ErrorCode as an empty list and only ErrorCodeHex carries the codes
    (setNewTaskInfoWithHexString), so `error_codes` only feeds ErrorCodeHex.
    """

    rank_id: int
    logic_id: int
    status: str
    policy: str
    initial_policy: str
    error_codes: tuple[int, ...] = ()
    error_code_hex: str | None = None


def render_reset_config(
    ranks: Sequence[RankEntry],
    *,
    update_time_s: int,
    retry_time: int = 0,
    fault_flushing: bool = False,
    graceful_exit: int = 0,
    restart_fault_process: bool = False,
) -> dict[str, str]:
    """The ConfigMap `data`: reset.json, checkCode (sha256 of exactly that text), restartType.

    `ranks` in the reference's order: the pod's chips by ascending logic id. GracefulExit is an
    int in the reference (not a bool).
    """
    info: dict[str, GoJSON] = {
        "RankList": [_rank(entry) for entry in ranks],
        "UpdateTime": _int(update_time_s, "UpdateTime", _INT),
        "RetryTime": _int(retry_time, "RetryTime", _INT),
        "FaultFlushing": _bool(fault_flushing, "FaultFlushing"),
        "GracefulExit": _int(graceful_exit, "GracefulExit", _INT),
        "RestartFaultProcess": _bool(restart_fault_process, "RestartFaultProcess"),
    }
    text = go_json(info)
    return {
        RESET_JSON_KEY: text,
        CHECK_CODE_KEY: hashlib.sha256(text.encode("utf-8")).hexdigest(),
        RESTART_TYPE_KEY: HOT_RESET,
    }


def _rank(entry: RankEntry) -> dict[str, GoJSON]:
    if entry.status not in STATUSES:
        raise ValueError(f"rank {entry.rank_id}: unknown status {entry.status!r}")
    for name, policy in (("Policy", entry.policy), ("InitialPolicy", entry.initial_policy)):
        if policy not in _SEVERITY:
            raise ValueError(f"rank {entry.rank_id}: unknown {name} {policy!r}")
    codes_hex = error_code_hex(entry.error_codes) if entry.error_code_hex is None else entry.error_code_hex
    return {
        "RankId": _int(entry.rank_id, "RankId", _INT),
        "LogicId": _int(entry.logic_id, "LogicId", _INT32),
        "Status": entry.status,
        "Policy": entry.policy,
        "InitialPolicy": entry.initial_policy,
        "ErrorCode": [],
        "ErrorCodeHex": codes_hex,
    }


def error_code_hex(codes: Iterable[int]) -> str:
    """ErrorCodeHex: upper-case hex of each code, comma-joined (strconv.FormatInt(code, 16))."""
    parts = []
    for code in codes:
        code = _int(code, "ErrorCode", _INT)
        parts.append(f"-{-code:X}" if code < 0 else f"{code:X}")
    return ",".join(parts)


def policy_for_level(level: str) -> str:
    """The reset policy of a chip at `level` (GetDevProcessPolicy).

    NormalNPU / NotHandleFault / SubHealthFault -> "empty"; RestartRequest -> "restart_request";
    RestartBusiness -> "restart"; FreeRestartNPU -> "free_reset"; RestartNPU -> "reset"; every
    other level (PreSeparateNPU, SeparateNPU, ManuallySeparateNPU, and any unknown one) ->
    "isolate", the safe side.
    """
    return _POLICY_BY_LEVEL.get(str(level), "isolate")


def most_severe_policy(policies: Iterable[str]) -> str:
    """The job's policy: its most severe chip policy (GetTaskProcessPolicy); "empty" for none."""
    result = "empty"
    for policy in policies:
        if policy not in _SEVERITY:
            raise ValueError(f"unknown policy {policy!r}")
        if _SEVERITY[policy] > _SEVERITY[result]:
            result = policy
    return result


def rank_id(rank_index: int, chips_of_pod: Sequence[int], logic_id: int) -> int:
    """RankId of the chip `logic_id` of a pod (GenerateTaskDevFaultInfoList).

    rank_index x (chips of the pod) + the chip's position among them by ascending logic id; an
    inference pod (rank index -1) gives -1 for every chip. `chips_of_pod` are logic ids, in
    any order.
    """
    ordered = sorted(chips_of_pod)
    if logic_id not in ordered:
        raise ValueError(f"logic id {logic_id} is not one of the pod's chips {ordered}")
    if rank_index == INFERENCE_RANK_INDEX:
        return INFERENCE_RANK_INDEX
    if rank_index < 0:
        raise ValueError(f"rank index {rank_index} is negative")
    return rank_index * len(ordered) + ordered.index(logic_id)


def parse_rank_index(value: str | None) -> int:
    """The rank index of a pod from its `hccl/rankIndex` annotation (written by the job's operator).

    -1 (inference) when absent or malformed: anything but `-1` or a decimal 0..MAX_RANK_INDEX
    would make rank_id() fail or a RankId overflow, and stop the job from being told at all.
    """
    if value is None or not _RANK_INDEX.fullmatch(value):
        return INFERENCE_RANK_INDEX
    index = int(value)
    return index if index <= MAX_RANK_INDEX else INFERENCE_RANK_INDEX


def job_name(labels: Mapping[str, str]) -> str | None:
    """The job a pod belongs to, from its labels; None when it has none.

    Like the reference, the first label present decides, even when its value is empty (then the
    pod has no job): a later label does not override an earlier one.
    """
    for key in JOB_NAME_LABELS:
        if key in labels:
            return labels[key] or None
    return None


def _int(value: int, name: str, bounds: tuple[int, int]) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be an integer, got {value!r}")
    low, high = bounds
    if not low <= value <= high:
        raise ValueError(f"{name} {value} is out of range ({low}..{high})")
    return int(value)


def _bool(value: bool, name: str) -> bool:
    if not isinstance(value, bool):
        raise TypeError(f"{name} must be a bool, got {value!r}")
    return value
