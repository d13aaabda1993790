"""Hot reset (contract section 8): reset a faulty chip's whole group when it is safe, or say why not.

Candidates are chips whose verdict is Unhealthy at a level that a reset can heal
(RestartRequest, RestartBusiness, FreeRestartNPU, RestartNPU). A group is reset only when
no process runs on any of its chips, it has been idle for the idle period (60 s of policy
time), the faulty chip still has a reset token (a bucket of 3 per chip, refilled whole 6 h of
policy time after its last refill, as the reference's; in SQLite, so it survives a restart), and every pod that uses it
belongs to a job in in-place recovery (it has a `reset-config-<job>` ConfigMap). Such a job is
told `unrecovered` (its agents stop training and release the chips), then `recovered` or
`failed` after the reset; the ConfigMap is mirrored to host files that its containers read.
The reset itself is the exporter's job (in-band, out-of-band where the library supports it);
its chips show as `-Recovering` meanwhile. A group that cannot be healed this
way goes to the operator: `GET /v1/resets` and the node annotation `ResetInfo`.

Two modes, the reference's -hotReset values (`infer`): 2, training (the above), and 0, inference:
a group is reset when no pod and no process uses it and it has been idle for the idle period, the
faulty chip paying a token as above; no job is told anything (there is none), and no
WaitFaultSelfHealingTime is waited (the reference's UnifiedHotReset waits the idle period alone).
On an Atlas 300I Duo node the group is the card (reset_groups), and the reactor keeps a chip
unschedulable while its cardmate is (`duo.py`, the reference's setHealthyIfDuoCard).

This loop keeps the state and acts; what may reset is the planner's (pure), the tokens are
stored_tokens', the exporter's reset job and the training job's ConfigMap are jobs', and ResetInfo
and the operator's list are handoff's.
"""

from __future__ import annotations

import asyncio
import logging
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

import httpx
from ascend_common.adapters.clients.exporter import ExporterClient, ExporterError
from ascend_common.adapters.kube.configmaps import ConfigMaps
from ascend_common.adapters.lifecycle import TaskScope
from ascend_common.clock import Clock, policy_seconds
from ascend_common.faults import GraceTolerance
from ascend_common.pods import SlimPod
from ascend_common.reset_groups import group_of, unknown_group_reason
from ascend_common.schemas.exporter import Chip

from fault_manager.hotreset import planner
from fault_manager.hotreset.handoff import NodeAnnotations, OperatorHandoff, OperatorItem
from fault_manager.hotreset.jobs import FaultState, Jobs, TrainingJobs, exporter_reset
from fault_manager.hotreset.planner import IDLE_S, no_token, pod_on_group
from fault_manager.hotreset.stored_tokens import ResetTokens
from fault_manager.store import Store, in_store_thread

log = logging.getLogger(__name__)


class ResetMarks(Protocol):
    """How hot reset tells the fault-manager a reset runs (fault_manager.reactor.inputs.Inbox)."""

    async def set_resetting(self, chips: tuple[str, ...], on: bool) -> None: ...


@dataclass
class HotReset:
    state: FaultState
    marks: ResetMarks
    exporter: ExporterClient
    store: Store
    clock: Clock
    node_name: str
    tasks: TaskScope
    node: NodeAnnotations | None = None
    pods: Callable[[], list[SlimPod]] = list
    configmaps: ConfigMaps | None = None
    mirror_dir: Path | None = None
    period_s: float = 1.0
    infer: bool = False  # the reference's -hotReset=0: no job takes part, a pod on the group blocks it
    _busy_since: dict[str, float] = field(default_factory=dict)  # chip -> last time seen busy (real)
    _running: set[str] = field(default_factory=set)
    _blocked: dict[tuple[str, ...], str] = field(default_factory=dict)
    _chips: dict[str, Chip] = field(default_factory=dict)  # the exporter's chips, as last listed
    _told_at: dict[tuple[str, ...], float] = field(default_factory=dict)  # group -> when its jobs were told
    # Attempts ended since start, by outcome (RESET_OUTCOMES): fault_manager_hot_resets_total.
    outcomes: Counter[str] = field(default_factory=Counter)

    def __post_init__(self) -> None:
        self._started = self.clock.now()  # nothing is known idle before we watched it
        self.handoff = OperatorHandoff(self.node, self.node_name)
        self.jobs = TrainingJobs(self.state, self.clock, self.configmaps, self.mirror_dir)
        self.buckets = ResetTokens(self.store, self.clock)

    @property
    def operator(self) -> dict[tuple[str, ...], OperatorItem]:
        """The groups that need an operator, and why (`GET /v1/resets`)."""
        return self.handoff.items

    async def start(self) -> None:
        await self.handoff.read()
        self.tasks.essential(self._loop(), "hot-reset")

    async def stop(self) -> None:
        await self.tasks.stop()

    async def _loop(self) -> None:
        while True:
            try:
                await self.tick()
            except (httpx.HTTPError, ExporterError) as exc:
                log.warning("hot reset: exporter unavailable", extra={"error": str(exc)})
            except Exception:  # keep watching; one bad round must not end hot reset
                log.exception("hot reset round failed")
            await asyncio.sleep(self.period_s)

    def candidates(self) -> list[str]:
        return planner.candidates(self.state.verdicts().values(), self._running)

    async def tick(self) -> None:
        if not self.handoff.known:
            await self.handoff.read()
            if not self.handoff.known:  # an earlier run's hand-offs are not known yet: neither reset nor rewrite
                return
        wanted = self.candidates()
        self._forget_healed()
        if not wanted:
            await self.handoff.publish()
            return
        listing = await self.exporter.chips()
        chips = self._chips = {c.name: c for c in listing.chips}
        now = self.clock.now()
        now_ms = int(now * 1000)
        for chip in listing.chips:
            if planner.busy(chip):
                self._busy_since[chip.name] = now
        seen: set[tuple[str, ...]] = set()
        for name in wanted:
            if name not in chips:
                continue
            faulty = chips[name]
            group = group_of(faulty, listing.chips)
            key = tuple(c.name for c in group)
            if key in seen or key in self.operator:
                continue
            seen.add(key)
            if faulty.phy_id in self.handoff.listed_at_start:
                await self._abandon(key, {}, group, f"{name} was left for an operator by an earlier run (ResetInfo)",
                                    now_ms, [faulty])  # fmt: skip
                continue
            jobs: Jobs = {}
            if self.infer:
                reason = self._held_by_pod(group, now) or unknown_group_reason(faulty)
            else:
                jobs, reason = await self.jobs.of_group(group, self.pods())
                reason = reason or unknown_group_reason(faulty) or self._self_healing(key, now)
            if reason is None and not await self.buckets.has(faulty, now_ms):
                # Before the job is told anything: it must not stop training for a reset that cannot come.
                await self._abandon(key, jobs, group, no_token(name), now_ms, [faulty])
                continue
            if reason is None and jobs:
                # The job's agents must stop first: tell them, then wait for the chips to be idle.
                refused = await self._tell_jobs(jobs, group, "unrecovered")
                if refused is not None:
                    await self._refused(key, jobs, group, refused, now_ms, [faulty], "auto")
                    continue
                if self._processes_outstay(key, group, now):
                    await self._abandon(key, jobs, group, "the job's processes did not stop within "
                                        "WaitProcessReadCMTime", now_ms, [faulty])  # fmt: skip
                    continue
            reason = reason or self._why_not(group, now)
            if reason is not None:
                if self._blocked.get(key) != reason:
                    self._blocked[key] = reason
                    log.info("hot reset waits", extra={"chips": list(key), "reason": reason})
                continue
            self._blocked.pop(key, None)
            if not await self.buckets.consume(faulty, now_ms):  # spent meanwhile (an operator's request)
                await self._abandon(key, jobs, group, no_token(name), now_ms, [faulty])
                continue
            self._start_reset(group, jobs)
        await self.handoff.publish()

    async def request(self, name: str) -> tuple[list[str], str | None]:
        """An operator's reset of a chip's group, through the same preconditions (not the level).

        Returns the group and None when the reset started, or the reason it did not.
        """
        listing = await self.exporter.chips()
        chips = self._chips = {c.name: c for c in listing.chips}
        if name not in chips:
            return [], f"no chip {name} on this node"
        faulty = chips[name]
        group = group_of(faulty, listing.chips)
        key = tuple(c.name for c in group)
        now = self.clock.now()
        now_ms = int(now * 1000)
        jobs: Jobs = {}
        if self.infer:
            reason = self._held_by_pod(group, now)
        else:
            jobs, reason = await self.jobs.of_group(group, self.pods())
        reason = reason or unknown_group_reason(faulty) or self._why_not(group, now)
        if reason is None and not await self.buckets.has(faulty, now_ms):
            reason = no_token(name)
        if reason is not None:
            return list(key), reason
        if jobs:
            refused = await self._tell_jobs(jobs, group, "unrecovered")
            if refused is not None:
                await self._refused(key, jobs, group, refused, now_ms, [], "operator")
                return list(key), refused
        if not await self.buckets.consume(faulty, now_ms):
            await self._tell_jobs(jobs, group, "failed")
            return list(key), no_token(name)
        self.operator.pop(key, None)
        self._start_reset(group, jobs)
        return list(key), None

    def _start_reset(self, group: list[Chip], jobs: Jobs) -> None:
        self.tasks.spawn(self._reset(group, jobs), f"reset-{group[0].name}")

    async def _refused(
        self,
        key: tuple[str, ...],
        jobs: Jobs,
        group: list[Chip],
        reason: str,
        at_ms: int,
        chips: list[Chip],
        channel: str,
    ) -> None:
        """A job's reset ConfigMap refused the write: record it (GET /v1/resets) and, for an automatic
        reset, hand the ring to the operator."""
        await in_store_thread(self.store.resets.refuse, ",".join(key), list(key), channel, at_ms, reason)
        self.outcomes["refused"] += 1
        if channel == "auto":
            await self._abandon(key, jobs, group, reason, at_ms, chips)
        else:
            await self._tell_jobs(self.jobs.told_unrecovered(jobs), group, "failed")

    async def _abandon(
        self,
        key: tuple[str, ...],
        jobs: Jobs,
        group: list[Chip],
        reason: str,
        at_ms: int,
        chips: list[Chip],
    ) -> None:
        """No reset for this ring: the jobs already told `unrecovered` are told `failed` (else they wait
        for a reset that never comes), and the ring goes to the operator."""
        told = self.jobs.told_unrecovered(jobs)
        if told:
            await self._tell_jobs(told, group, "failed")
        self._told_at.pop(key, None)
        self.handoff.hand_over(key, reason, at_ms, chips)

    async def tokens(self) -> dict[str, int]:
        """Reset tokens left per chip of the node (a chip that never used its bucket has them all)."""
        return await self.buckets.left(self.state.chips(), int(self.clock.now() * 1000))

    def _held_by_pod(self, group: list[Chip], now: float) -> str | None:
        """Inference mode: why a pod keeps the group from a reset. A held group counts as busy, so its
        idle period starts when the last pod leaves (the reference records idle time only once the
        ring is free of pods and processes)."""
        reason = pod_on_group(group, self.pods())
        if reason is not None:
            for chip in group:
                self._busy_since[chip.name] = now
        return reason

    def _grace(self) -> GraceTolerance:
        return self.state.policy().customization.grace

    def _self_healing(self, key: tuple[str, ...], now: float) -> str | None:
        wait = policy_seconds(self.clock, self._grace().wait_fault_self_healing_s)
        return planner.self_healing(key, self.state.verdicts(), now, wait)

    def _processes_outstay(self, key: tuple[str, ...], group: list[Chip], now: float) -> bool:
        told = self._told_at.setdefault(key, now)
        wait = policy_seconds(self.clock, self._grace().wait_process_read_cm_s)
        return planner.processes_outstay(group, told, now, wait)

    def _why_not(self, group: list[Chip], now: float) -> str | None:
        idle_real = policy_seconds(self.clock, IDLE_S)
        return planner.why_not(group, now, self._running, self._busy_since, self._started, idle_real)

    async def _tell_jobs(self, jobs: Jobs, group: list[Chip], status: str) -> str | None:
        return await self.jobs.tell(jobs, group, status, self._chips)

    async def _reset(self, group: list[Chip], jobs: Jobs | None = None) -> None:
        key = tuple(c.name for c in group)
        now_ms = int(self.clock.now() * 1000)
        attempt = await in_store_thread(self.store.resets.record, ",".join(key), list(key), "auto", now_ms)
        self._running.update(key)
        await self.marks.set_resetting(key, True)
        wait_policy_s = self._grace().wait_device_reset_s
        wait_s = policy_seconds(self.clock, wait_policy_s)
        try:
            outcome, code, message = await exporter_reset(self.exporter, group, wait_s, wait_policy_s)
        finally:
            self._running.difference_update(key)
            await self.marks.set_resetting(key, False)
        finished_ms = int(self.clock.now() * 1000)
        why = None if outcome == "succeeded" else f"reset failed ({code}): {message}"
        await in_store_thread(self.store.resets.finish, attempt, outcome, code or None, finished_ms, reason=why)
        self.outcomes[outcome] += 1
        self._told_at.pop(key, None)  # the episode is over: the next one waits for its own processes
        if jobs:
            await self._tell_jobs(jobs, group, "recovered" if outcome == "succeeded" else "failed")
        if outcome == "succeeded":
            log.info("hot reset succeeded", extra={"chips": list(key)})
        else:
            log.error("hot reset failed", extra={"chips": list(key), "code": code, "error": message})
            self.handoff.hand_over(key, f"reset failed ({code}): {message}", int(self.clock.now() * 1000), group,
                                   failed=True)  # fmt: skip
        await self.handoff.publish()

    def _forget_healed(self) -> None:
        """A chip that is healthy again needs no operator any more, nor does a group whose chips all are;
        such a group's jobs are no longer waited for."""
        verdicts = self.state.verdicts()
        self.handoff.forget_healed(verdicts)
        for key in list(self._told_at):
            if all(c in verdicts and planner.healthy(verdicts[c]) for c in key):
                self._told_at.pop(key, None)

    def reset_info(self) -> str:
        """The node annotation `ResetInfo`, byte for byte as the reference writes it."""
        return self.handoff.reset_info()
