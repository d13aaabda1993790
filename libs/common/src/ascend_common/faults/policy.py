"""The pure code-level fault policy (contract sections 7 and 8).

These rules are what the device-plugin falls back to without the fault-manager, and what the
fault-manager builds on (it adds FaultDuration, FaultFrequency, manual isolation and history).
Reference behaviour cited below is from Huawei MindCluster, component/ascend-device-plugin.
"""

from __future__ import annotations

from collections.abc import Iterable

from ascend_common.chips import ResourceType
from ascend_common.faults.codes import NETWORK_CODES
from ascend_common.faults.levels import FaultLevel, SwitchFaultLevel, most_serious
from ascend_common.faults.table import FaultCodeTable, SwitchFaultTable, normalize_code, normalize_switch_code
from ascend_common.naming import parse_device_id

CodeLike = str | int
"""A chip fault code: hex text (`"80E01801"`, `"0x80e01801"`) or the number the library reports."""

# NETWORK_CODES: the reference's pkg/common/fault_code.go `NetworkFaultCodes` (RoCE link down, UBOE
# port down, UBOE sub-health and UBOE pre-separate), in normalize_code() form.

# DCMI event severity: 0 suggestion/warning, 1 minor, 2 major, 3 critical
# (reference pkg/common/constants.go: FaultSeveritySuggestion = iota, FaultSeverityMinor, ...).
SEVERITY_MINOR = 1

# Levels at which a chip still takes pods; PreSeparateNPU (and FreeRestartNPU with
# GraceToleranceOn) joins them only while a pod uses the chip, so that its job is not disturbed
# (reference pkg/device/ascendcommon.go isHealthy).
_SCHEDULABLE = frozenset({FaultLevel.NORMAL_NPU, FaultLevel.NOT_HANDLE_FAULT, FaultLevel.SUB_HEALTH_FAULT})
_NETWORK_HEALTHY = frozenset({FaultLevel.NORMAL_NPU, FaultLevel.NOT_HANDLE_FAULT})

# Restarting a chip or a job does not heal a network fault, so the reference refuses these levels
# for network codes and uses NotHandleFault instead (fault_code.go
# mappingChipFaultToNetworkFaultCodesNotSupport).
_NO_NETWORK_MEANING = frozenset(
    {FaultLevel.RESTART_REQUEST, FaultLevel.RESTART_BUSINESS, FaultLevel.FREE_RESTART_NPU, FaultLevel.RESTART_NPU}
)

# Levels a hot reset can heal; Separate levels need an operator, the others need nothing
# (reference pkg/server/hot_reset_manager.go filterFaultDevices).
RESET_CANDIDATE_LEVELS: frozenset[FaultLevel] = _NO_NETWORK_MEANING


def is_network_code(code: CodeLike) -> bool:
    """Whether `code` is a network (parameter-plane) fault; ValueError for a malformed code."""
    return normalize_code(code) in NETWORK_CODES


def severity_level(severity: int | None) -> FaultLevel:
    """The level of a code that no list names, from its event severity.

    Reference fault_code.go `getFaultTypeBySeverity`: severity above minor -> SeparateNPU, unknown
    severity (a polled code, or an event never seen) -> SeparateNPU, otherwise NotHandleFault.
    """
    if severity is None or severity > SEVERITY_MINOR:
        return FaultLevel.SEPARATE_NPU
    return FaultLevel.NOT_HANDLE_FAULT


def code_level(table: FaultCodeTable, code: CodeLike, severity: int | None = None) -> FaultLevel:
    """Level of one code from the main lists, else from its severity (None = unknown)."""
    listed = table.main_level(code)
    return listed if listed is not None else severity_level(severity)


def network_level(table: FaultCodeTable, code: CodeLike) -> FaultLevel:
    """Network level of one code; NormalNPU for a code that is not a network code.

    Like the reference (fault_code.go `LoadFaultCode` + `GetNetworkFaultTypeByCode`) the explicit
    *NetworkCodes lists and the main lists are merged, Restart* levels of the main lists demoted
    to NotHandleFault, and the most serious level wins; a network code that no list names is
    PreSeparateNPU.
    """
    normalized = normalize_code(code)
    if normalized not in NETWORK_CODES:
        return FaultLevel.NORMAL_NPU
    found: list[FaultLevel] = []
    explicit = table.network_levels.get(normalized)
    if explicit is not None:
        found.append(explicit)
    main = table.levels.get(normalized)
    if main is not None:
        found.append(FaultLevel.NOT_HANDLE_FAULT if main in _NO_NETWORK_MEANING else main)
    return most_serious(found) if found else FaultLevel.PRE_SEPARATE_NPU


def chip_level(
    table: FaultCodeTable,
    codes: Iterable[tuple[CodeLike, int | None]],
    *,
    include_network_codes: bool = False,
) -> FaultLevel:
    """A chip's level: the most serious level among its `(code, severity)` pairs; NormalNPU if none.

    Network codes are left out by default, as the reference does (fault_code.go `GetFaultType`):
    they act through chip_network_level() and `-NetworkUnhealthy` only, so a RoCE link flap does
    not take a chip away from the scheduler unless FaultDuration escalates it.
    """
    return most_serious(
        code_level(table, code, severity)
        for code, severity in codes
        if include_network_codes or not is_network_code(code)
    )


def chip_network_level(table: FaultCodeTable, codes: Iterable[tuple[CodeLike, int | None]]) -> FaultLevel:
    """A chip's network level from the same `(code, severity)` pairs (severity plays no part)."""
    return most_serious(network_level(table, code) for code, _severity in codes if is_network_code(code))


# The chips the reference's grace tolerance serves: its RunMode Ascend910 (910A, 910B, A3 and A5),
# advertised as huawei.com/Ascend910 or, on A5, huawei.com/npu.
_TRAINING_TYPES = frozenset({ResourceType.ASCEND910, ResourceType.NPU})


def schedulable(level: FaultLevel, in_use_for_health: bool, *, grace_tolerance_on: bool = False) -> bool:
    """Whether the kubelet should see the chip Healthy (contract section 7); reference `isHealthy`.

    `in_use_for_health`: the chip is in ascend_common.inuse.chips_in_use_for_health (the
    reference's `npuIsUsedNow`). `grace_tolerance_on`: supports_grace_tolerance() for the chip.
    """
    if level in _SCHEDULABLE:
        return True
    if level is FaultLevel.FREE_RESTART_NPU:
        # Grace tolerance resets the chip in place with the job's help, so the job keeps it meanwhile.
        return in_use_for_health and grace_tolerance_on
    return level is FaultLevel.PRE_SEPARATE_NPU and in_use_for_health


def supports_grace_tolerance(hot_reset: bool, chip: str) -> bool:
    """GraceToleranceOn for `chip` (reference pkg/server/manager.go `isSupportGraceTolerance`).

    The reference turns it on for hot-reset mode HotResetTrainOffLine (2) on a training chip, a
    910A only in SMP mode. Our hot reset (the fault-manager's --hot-reset) is that mode: it resets
    in place with the job's reset-config ConfigMap. A training chip is one advertised as
    huawei.com/Ascend910 or huawei.com/npu, read from its name. The 910A work mode is not read
    (the exporter does not report it): a 910A counts as SMP, its usual mode for training.
    """
    if not hot_reset:
        return False
    try:
        rtype = parse_device_id(chip).rtype
    except ValueError:
        return False
    return rtype in _TRAINING_TYPES


def network_healthy(level: FaultLevel) -> bool:
    """Network health from the network level: Healthy for NormalNPU or NotHandleFault."""
    return level in _NETWORK_HEALTHY


def reset_candidate(level: FaultLevel) -> bool:
    """Whether a chip at `level` may be hot-reset (contract section 8)."""
    return level in RESET_CANDIDATE_LEVELS


def switch_code_level(table: SwitchFaultTable, code: str) -> SwitchFaultLevel | None:
    """Level of a switch fault code, None when the table does not list it.

    ValueError for a code not of the `[0x<alarm>,<fault>,<peer>,<x>]` form.
    """
    return table.levels.get(normalize_switch_code(code))
