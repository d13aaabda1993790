"""Which chip groups hot reset may reset now, or why not: pure, the verdicts, the exporter's chips and
times in, a reason (or None) out. The loop keeps the state these rules read (when each chip was last
busy, which groups run a reset, when a group's jobs were told) and acts on the answers."""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping

from ascend_common.faults import reset_candidate
from ascend_common.inuse import chips_in_use_for_allocation
from ascend_common.pods import SlimPod
from ascend_common.schemas.exporter import Chip
from ascend_common.schemas.verdict import ChipVerdict

from fault_manager.hotreset.token_bucket import TOKEN_MAX_COUNT, TOKEN_REFILL_INTERVAL_MS

IDLE_S = 60.0  # policy seconds a group must have been idle
TOKENS_RULE = (
    f"{TOKEN_MAX_COUNT} per faulty chip, refilled {TOKEN_REFILL_INTERVAL_MS // 3_600_000} h after the last refill"
)


def no_token(name: str) -> str:
    return f"{name} has no reset token left ({TOKENS_RULE})"


def candidates(verdicts: Iterable[ChipVerdict], running: Collection[str]) -> list[str]:
    """The chips a reset could heal and that no reset is running for, by name."""
    return sorted(
        v.chip
        for v in verdicts
        # Not "unschedulable": a FreeRestartNPU chip a job uses stays schedulable under GraceToleranceOn
        # and is reset through the job's in-place recovery.
        if reset_candidate(v.fault_level) and not v.resetting and v.chip not in running
    )


def busy(chip: Chip) -> bool:
    """Idle means no process: a pod of a job in in-place recovery stays while its agents stop training,
    and a pod of any other job blocks the reset outright (TrainingJobs.of_group)."""
    return chip.dynamic is None or not chip.dynamic.processes.is_ok or bool(chip.dynamic.processes.value)


def why_not(
    group: list[Chip], now: float, running: Collection[str], busy_since: Mapping[str, float], started: float,
    idle_real: float,
) -> str | None:  # fmt: skip
    """Why the group may not be reset now: a reset runs, processes run, or it has not been idle for
    `idle_real` seconds (a chip never seen busy counts from `started`: nothing is known idle before
    it was watched)."""
    for chip in group:
        if chip.name in running:
            return f"{chip.name} is being reset"
        dyn = chip.dynamic
        if dyn is None or not dyn.processes.is_ok:
            return f"cannot tell whether processes run on {chip.name}"
        if dyn.processes.value:
            return f"processes run on {chip.name}"
    last_busy = max(busy_since.get(c.name, started) for c in group)
    if now - last_busy < idle_real:
        return f"idle for {now - last_busy:.1f} s of the {idle_real:.1f} s needed"
    return None


def self_healing(key: tuple[str, ...], verdicts: Mapping[str, ChipVerdict], now: float, wait: float) -> str | None:
    """GraceTolerance.WaitFaultSelfHealingTime: give a fresh fault the chance to clear by itself."""
    newest = max((verdicts[c].since for c in key if c in verdicts), default=now)
    if now - newest < wait:
        return f"waiting {wait:.1f} s for the fault to heal by itself"
    return None


def processes_outstay(group: list[Chip], told: float, now: float, wait: float) -> bool:
    """GraceTolerance.WaitProcessReadCMTime: the job was told at `told`, but its processes still run."""
    running = any(c.dynamic is not None and c.dynamic.processes.value for c in group)
    if not running:
        return False
    return now - told > wait


def healthy(verdict: ChipVerdict) -> bool:
    """Healthy for hot reset: schedulable, and not merely kept so for its job (GraceToleranceOn)."""
    return verdict.schedulable and not reset_candidate(verdict.fault_level)


def pod_on_group(group: list[Chip], pods: Iterable[SlimPod]) -> str | None:
    """Inference hot reset (the reference's -hotReset=0): a group any pod holds is not reset, whatever
    its job (the reference's isRingFree refuses a device with PodUsed); there is no job to tell."""
    names = {c.name for c in group}
    for pod in pods:
        held = chips_in_use_for_allocation([pod]) & names
        if held:
            return f"pod {pod.namespace}/{pod.name} uses {', '.join(sorted(held))}"
    return None
