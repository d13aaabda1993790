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
  ErrorCodeHex = strings.ToUpper(comma-joined FormatFaultCodeHex(code)), ErrorCode written as
  an empty list, RankList never nil; data `reset.json` = json.Marshal(info), `checkCode` =
  MakeDataHash(info) = hex sha256 of those same bytes; `restartType` = "hotReset" on a retry, else
  the old ConfigMap's. It refuses to write ranks over a `reset.json` that says "isolate", and
  carries RetryTime over from the old `reset.json` (next_reset_config).
- pkg/common/constants.go: policy names, statuses, data keys; ResetTaskNameKey
  "volcano.sh/job-name", ResetTaskNameKeyInLabel "training.kubeflow.org/job-name".
- pkg/device/ascendtolerance.go: GetDevProcessPolicy (level -> policy), processPolicyTable
  (policy severity), GenerateTaskDevFaultInfoList (RankList of a pod: every chip of the pod by
  ascending logic id); pkg/common/common.go GetJobNameOfPod.
- The retry (needAddRetry) is from the reference's in-pod hot reset (pkg/device/ascend910.go
  preProcess: the first `unrecovered` write of a reset the node is not already running for the
  task), removed from the reference's HEAD (commit 40bc27dd), where only ClearResetInfo writes.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Final

from ascend_common.gojson import (
    INT32,
    INT64,
    GoJSON,
    GoNumber,
    GoObject,
    go_field,
    go_int,
    go_int_field,
    go_json,
    go_loads,
)

__all__ = [
    "CHECK_CODE_KEY",
    "CM_NAME_PREFIX",
    "HOT_RESET",
    "INFERENCE_RANK_INDEX",
    "JOB_NAME_LABELS",
    "MAX_RANK_INDEX",
    "POLICIES",
    "REFUSED_NO_CONFIG_MAP",
    "REFUSED_NO_RESET_JSON",
    "REFUSED_RESCHEDULE",
    "REFUSED_UNMARSHAL",
    "RESET_JSON_KEY",
    "RESTART_TYPE_KEY",
    "STATUSES",
    "DevFaultInfo",
    "RankEntry",
    "ResetConfigRefused",
    "clear_reset_config",
    "error_code_hex",
    "job_name",
    "most_severe_policy",
    "next_reset_config",
    "parse_rank_index",
    "policy_for_level",
    "rank_id",
    "rank_list",
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

# Looked up in this order, as the reference's GetJobNameOfPod (deploy-name: inference deployments).
JOB_NAME_LABELS: Final = ("volcano.sh/job-name", "training.kubeflow.org/job-name", "deploy-name")


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
        "UpdateTime": go_int_field(update_time_s, "UpdateTime", INT64),
        "RetryTime": go_int_field(retry_time, "RetryTime", INT64),
        "FaultFlushing": _bool(fault_flushing, "FaultFlushing"),
        "GracefulExit": go_int_field(graceful_exit, "GracefulExit", INT64),
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
        "RankId": go_int_field(entry.rank_id, "RankId", INT64),
        "LogicId": go_int_field(entry.logic_id, "LogicId", INT32),
        "Status": entry.status,
        "Policy": entry.policy,
        "InitialPolicy": entry.initial_policy,
        "ErrorCode": [],
        "ErrorCodeHex": codes_hex,
    }


def error_code_hex(codes: Iterable[int], *spellings: Mapping[str, str]) -> str:
    """ErrorCodeHex: each code upper-cased as FormatFaultCodeHex writes it, comma-joined.

    `spellings` are the fault policy's own spellings (ascend_common.faults.table.register_spellings:
    upper-case hex without leading zeros -> the configured text), the first that knows a code
    winning, so a configured "020001002" keeps its leading zero; other codes are
    strconv.FormatInt(code, 16).
    """
    parts = []
    for code in codes:
        code = go_int_field(code, "ErrorCode", INT64)
        plain = f"-{-code:X}" if code < 0 else f"{code:X}"
        spelled = next((known[plain] for known in spellings if plain in known), None)
        parts.append(plain if spelled is None else spelled.upper())
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


@dataclass(frozen=True)
class DevFaultInfo:
    """A chip's fault as its job is told it (DevFaultInfo without LogicId: rank_list keys it)."""

    status: str
    policy: str
    initial_policy: str
    error_codes: tuple[int, ...] = ()
    error_code_hex: str | None = None


def rank_list(rank_index: int, pod_logic_ids: Iterable[int], faults: Mapping[int, DevFaultInfo]) -> list[RankEntry]:
    """The RankList of one pod (GenerateTaskDevFaultInfoList).

    `pod_logic_ids` are the logic ids of EVERY chip the pod was given on this node (the reference
    parses the pod's device annotation and converts its phy ids), not only the faulty ones: the
    entries follow ascending logic id, and RankId = rank_index x (chips of the pod) + position,
    or -1 for every chip of an inference pod (rank index -1). A logic id repeated counts twice,
    as there. Raises ValueError when a chip has no entry in `faults` (the reference's "device is
    not in global cache": no list at all), or for a negative rank index other than -1.
    """
    ordered = sorted(pod_logic_ids)
    if rank_index < 0 and rank_index != INFERENCE_RANK_INDEX:
        raise ValueError(f"rank index {rank_index} is negative")
    entries: list[RankEntry] = []
    for position, logic in enumerate(ordered):
        info = faults.get(logic)
        if info is None:
            raise ValueError(f"device {logic} is not in global cache")
        rank = INFERENCE_RANK_INDEX if rank_index == INFERENCE_RANK_INDEX else rank_index * len(ordered) + position
        entries.append(
            RankEntry(
                rank_id=rank,
                logic_id=logic,
                status=info.status,
                policy=info.policy,
                initial_policy=info.initial_policy,
                error_codes=info.error_codes,
                error_code_hex=info.error_code_hex,
            )
        )
    return entries


# Reasons of ResetConfigRefused, the reference's error texts where it has one.
REFUSED_NO_CONFIG_MAP: Final = "reset config map not found"
REFUSED_NO_RESET_JSON: Final = "invalid reset info data"
REFUSED_RESCHEDULE: Final = "task should be rescheduled"
REFUSED_UNMARSHAL: Final = "failed to unmarshal reset info data"


class ResetConfigRefused(ValueError):
    """The reference would not write the reset ConfigMap (WriteResetInfoDataIntoCM returns an error).

    `reason` is one of the REFUSED_* texts, REFUSED_UNMARSHAL followed by ": <why>".
    REFUSED_RESCHEDULE is the expected one: a chip of the job was isolated, so the job must be
    rescheduled and only a clear (no ranks) may still be written.
    """

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def next_reset_config(
    old_data: Mapping[str, str] | None,
    ranks: Sequence[RankEntry],
    *,
    update_time_s: int,
    retry: bool,
) -> dict[str, str]:
    """The whole new `data` of a job's reset ConfigMap, written over `old_data` (WriteResetInfoDataIntoCM).

    `old_data` is the ConfigMap's current data (None: there is none). `retry` is the reference's
    needAddRetry: True for the first `unrecovered` write of a reset this node starts for the job
    (preProcess: the task is not in reset on this node yet), False for every later write of that
    reset (`recovered`, `failed`) and for a clear.

    Refuses (ResetConfigRefused) when there is no ConfigMap or no `reset.json` in it; when the old
    `reset.json` text contains "isolate" and `ranks` is not empty; when the old `reset.json` is not
    what Go's json.Unmarshal takes into TaskResetInfo. Otherwise RetryTime is the old
    `reset.json`'s, plus one on a retry; `restartType` is "hotReset" on a retry, else the old
    one's, and absent when the old data has none. UpdateTime is `update_time_s`; FaultFlushing,
    GracefulExit and RestartFaultProcess are written zero, because the reference copies only
    RankList from the info it is given. Every other key of `old_data` is dropped: the reference
    replaces the ConfigMap's data, so the result is the complete data, not a patch.
    """
    if old_data is None:
        raise ResetConfigRefused(REFUSED_NO_CONFIG_MAP)
    old_text = old_data.get(RESET_JSON_KEY)
    if old_text is None:
        raise ResetConfigRefused(REFUSED_NO_RESET_JSON)
    # A substring test on the raw text, as the reference: any "isolate" anywhere refuses.
    if "isolate" in old_text and len(ranks) != 0:
        raise ResetConfigRefused(REFUSED_RESCHEDULE)
    retry_time = _old_retry_time(old_text)
    if retry:
        # Go's int wraps; a RetryTime of 2^63-1 is not a state a job reaches otherwise.
        retry_time = INT64[0] if retry_time == INT64[1] else retry_time + 1
    rendered = render_reset_config(ranks, update_time_s=update_time_s, retry_time=retry_time)
    data = {RESET_JSON_KEY: rendered[RESET_JSON_KEY], CHECK_CODE_KEY: rendered[CHECK_CODE_KEY]}
    restart_type = HOT_RESET if retry else old_data.get(RESTART_TYPE_KEY)
    if restart_type is not None:
        data[RESTART_TYPE_KEY] = restart_type
    return data


def clear_reset_config(old_data: Mapping[str, str] | None, *, update_time_s: int) -> dict[str, str]:
    """ClearResetInfo: an empty RankList over `old_data`; allowed after an isolation."""
    return next_reset_config(old_data, [], update_time_s=update_time_s, retry=False)


# What Go's json.Unmarshal accepts into TaskResetInfo: null anywhere, else the field's JSON type;
# an integer must be an integer literal in range. Unknown keys are ignored.
_Check = Callable[[object], bool]


def _go_int(bits: int) -> _Check:
    def check(value: object) -> bool:
        return value is None or (isinstance(value, GoNumber) and go_int(value, bits) is not None)

    return check


def _go_bool(value: object) -> bool:
    return value is None or isinstance(value, bool)


def _go_string(value: object) -> bool:
    return value is None or isinstance(value, str)


def _go_slice(item: _Check) -> _Check:
    def check(value: object) -> bool:
        return value is None or (isinstance(value, list) and not isinstance(value, GoObject) and all(map(item, value)))

    return check


def _go_struct(fields: Mapping[str, _Check]) -> _Check:
    def check(value: object) -> bool:
        if value is None:
            return True
        if not isinstance(value, GoObject):
            return False
        for key, item in value:
            name = go_field(key, fields)
            if name is not None and not fields[name](item):
                return False
        return True

    return check


_IS_INT64 = _go_int(64)
_TASK_DEV_INFO = _go_struct(
    {
        "RankId": _IS_INT64,
        "LogicId": _go_int(32),
        "Status": _go_string,
        "Policy": _go_string,
        "InitialPolicy": _go_string,
        "ErrorCode": _go_slice(_IS_INT64),
        "ErrorCodeHex": _go_string,
    }
)
_TASK_RESET_INFO_FIELDS: Final[Mapping[str, _Check]] = {
    "RankList": _go_slice(_TASK_DEV_INFO),
    "UpdateTime": _IS_INT64,
    "RetryTime": _IS_INT64,
    "FaultFlushing": _go_bool,
    "GracefulExit": _IS_INT64,
    "RestartFaultProcess": _go_bool,
}
_TASK_RESET_INFO = _go_struct(_TASK_RESET_INFO_FIELDS)


def _old_retry_time(text: str) -> int:
    """RetryTime of an old `reset.json`, as Go's json.Unmarshal into TaskResetInfo reads it."""
    try:
        value = go_loads(text)
    except ValueError as exc:
        raise ResetConfigRefused(f"{REFUSED_UNMARSHAL}: {exc}") from None
    if not _TASK_RESET_INFO(value):
        raise ResetConfigRefused(f"{REFUSED_UNMARSHAL}: it is not a TaskResetInfo")
    retry_time = 0
    if isinstance(value, GoObject):
        for key, item in value:
            # Every matching key is decoded in turn, so the last non-null one wins.
            if go_field(key, _TASK_RESET_INFO_FIELDS) == "RetryTime" and isinstance(item, GoNumber):
                retry_time = go_int(item, 64) or 0
    return retry_time


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


def _bool(value: bool, name: str) -> bool:
    if not isinstance(value, bool):
        raise TypeError(f"{name} must be a bool, got {value!r}")
    return value
