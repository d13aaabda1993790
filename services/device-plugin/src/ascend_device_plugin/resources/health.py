"""Whether the kubelet may schedule on a chip: the exporter's view and the verdicts, combined.

Pure. The fault-manager's verdict decides while it is connected. Without it, the plugin keeps
the last verdict and may only make it worse with the code-level policy of libs/common: it
never releases a chip that the fault-manager isolated.

"In use" is ascend_common.inuse.chips_in_use_for_health, as in the fault-manager: a PreSeparateNPU
chip that an active pod's Volcano annotation or a Running pod's allocation names stays Healthy.
GraceToleranceOn belongs to the fault-manager's hot reset; the plugin only keeps it for a chip
whose last verdict granted it.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from ascend_common.faults import FaultCodeTable, FaultLevel, chip_level, schedulable
from ascend_common.schemas.exporter import Chip, ChipState
from ascend_common.schemas.verdict import ChipVerdict


class HealthSource(StrEnum):
    EXPORTER = "exporter"  # the exporter cannot read the chip (or is gone)
    VERDICT = "verdict"
    LAST_VERDICT = "last-verdict+code-policy"
    CODE_POLICY = "code-policy"


# Why a chip is not healthy where no fault level says it: the exporter's view (its ChipState values,
# a label value each, as a DRA taint's value must be), or the library's health without a code.
EXPORTER_LOST = "exporter_lost"
LIBRARY_UNHEALTHY = "library_unhealthy"
# Every value HealthDecision.fault takes, most serious fault levels first.
FAULTS: tuple[str, ...] = (
    *(level.value for level in FaultLevel), *(state.value for state in ChipState if state is not ChipState.OK),
    EXPORTER_LOST, LIBRARY_UNHEALTHY,
)  # fmt: skip


@dataclass(frozen=True)
class HealthDecision:
    healthy: bool
    source: HealthSource
    reason: str
    # Not healthy: why, in one word (a FaultLevel's value, a ChipState's, or the two above); the
    # value of the chip's DRA taint. Empty when healthy.
    fault: str = ""


def decide(
    chip: Chip,
    verdict: ChipVerdict | None,
    fault_manager_connected: bool,
    table: FaultCodeTable,
    in_use_for_health: bool,
) -> HealthDecision:
    if chip.state is not ChipState.OK:
        return HealthDecision(
            False, HealthSource.EXPORTER, f"exporter reports the chip {chip.state.value}", chip.state.value
        )
    if verdict is not None and fault_manager_connected:
        fault = "" if verdict.schedulable else verdict.fault_level.value
        return HealthDecision(verdict.schedulable, HealthSource.VERDICT, f"verdict {verdict.fault_level}", fault)
    codes = []
    if chip.dynamic is not None and chip.dynamic.error_codes.is_ok:
        codes = list(chip.dynamic.error_codes.value or [])
    level = chip_level(table, [(code, None) for code in codes])
    # A FreeRestartNPU chip the fault-manager left schedulable had GraceToleranceOn; without it
    # the plugin cannot tell, and a job's chip must not flap because the fault-manager restarts.
    grace = verdict is not None and verdict.schedulable and verdict.fault_level is FaultLevel.FREE_RESTART_NPU
    by_codes = schedulable(level, in_use_for_health, grace_tolerance_on=grace)
    code_fault = "" if by_codes else level.value
    if not codes and chip.healthy is False:
        # The library says unhealthy without a code to explain it: do not offer the chip.
        by_codes, code_fault = False, LIBRARY_UNHEALTHY
    if verdict is not None:
        healthy = verdict.schedulable and by_codes
        fault = code_fault if verdict.schedulable else verdict.fault_level.value
        reason = f"last verdict {verdict.fault_level}, codes {level}"
        return HealthDecision(healthy, HealthSource.LAST_VERDICT, reason, fault)
    return HealthDecision(by_codes, HealthSource.CODE_POLICY, f"codes {level}", code_fault)
