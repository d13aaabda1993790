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
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

import httpx
from ascend_common.adapters.clients.exporter import ExporterClient, ExporterError
from ascend_common.adapters.kube.configmaps import ConfigMaps, Conflict
from ascend_common.adapters.lifecycle import TaskScope
from ascend_common.chips import ChipFamily
from ascend_common.clock import Clock, policy_seconds
from ascend_common.faults import GraceTolerance, reset_candidate
from ascend_common.inuse import chips_in_use_for_allocation
from ascend_common.pods import SlimPod
from ascend_common.reset_groups import group_of, unknown_group_reason
from ascend_common.schemas.exporter import Chip, JobState
from ascend_common.schemas.verdict import ChipVerdict

from fault_manager.hotreset import stored_tokens
from fault_manager.hotreset.reset_config import (
    CM_NAME_PREFIX,
    RANK_INDEX_ANNOTATION,
    RESET_JSON_KEY,
    RESTART_TYPE_KEY,
    DevFaultInfo,
    RankEntry,
    ResetConfigRefused,
    error_code_hex,
    job_name,
    next_reset_config,
    parse_rank_index,
    policy_for_level,
    rank_list,
)
from fault_manager.hotreset.reset_info import (
    EMPTY,
    NO_ID,
    RESET_INFO_ANNOTATION,
    ResetDevice,
    ResetInfo,
    clear_need_external_ops,
    mark_need_external_ops,
    read_annotation,
    render_reset_info,
)
from fault_manager.hotreset.tokens import TOKEN_MAX_COUNT, TOKEN_REFILL_INTERVAL_MS
from fault_manager.policy.engine import Policy
from fault_manager.store import Store

log = logging.getLogger(__name__)
IDLE_S = 60.0  # policy seconds a group must have been idle
JOB_POLL_S = 1.0
TOKENS_RULE = (
    f"{TOKEN_MAX_COUNT} per faulty chip, refilled {TOKEN_REFILL_INTERVAL_MS // 3_600_000} h after the last refill"
)


@dataclass(frozen=True)
class OperatorItem:
    """A group that needs an operator, and why."""

    chips: tuple[str, ...]
    reason: str
    since_ms: int


class FaultState(Protocol):
    """What hot reset reads of the fault-manager (fault_manager.reactor.published.Published)."""

    def verdicts(self) -> dict[str, ChipVerdict]: ...

    def policy(self) -> Policy: ...

    def chips(self) -> frozenset[str]: ...


class ResetMarks(Protocol):
    """How hot reset tells the fault-manager a reset runs (fault_manager.reactor.inputs.Inbox)."""

    async def set_resetting(self, chips: tuple[str, ...], on: bool) -> None: ...


class NodeAnnotations(Protocol):
    """The node object's annotations, where ResetInfo is kept (fault_manager.hotreset.node_annotations)."""

    async def read(self) -> Mapping[str, str] | None:
        """The node's annotations (None: no node object, so nothing was left on it)."""

    async def write_reset_info(self, info: str) -> None: ...


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
    operator: dict[tuple[str, ...], OperatorItem] = field(default_factory=dict)
    _busy_since: dict[str, float] = field(default_factory=dict)  # chip -> last time seen busy (real)
    _running: set[str] = field(default_factory=set)
    _blocked: dict[tuple[str, ...], str] = field(default_factory=dict)
    _written_info: str | None = None
    info: ResetInfo = EMPTY  # the node annotation ResetInfo, in the reference's schema
    _listed_at_start: set[int] = field(default_factory=set)  # phy ids ResetInfo named when we started
    _chips: dict[str, Chip] = field(default_factory=dict)  # the exporter's chips, as last listed
    _info_known: bool = False  # the node's ResetInfo has been read (or there is no node to read)
    _told: dict[tuple[str, str], str] = field(default_factory=dict)  # job -> status last written
    _told_at: dict[tuple[str, ...], float] = field(default_factory=dict)  # group -> when its jobs were told
    # job -> logic id -> (policy, initial policy, error codes) of the current episode
    _episode: dict[tuple[str, str], dict[int, tuple[str, str, str]]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self._started = self.clock.now()  # nothing is known idle before we watched it

    async def start(self) -> None:
        await self._read_info()
        self.tasks.essential(self._loop(), "hot-reset")

    async def _read_info(self) -> None:
        """The chips an earlier run (ours or the reference's) left for an operator (InitResetInfoMgr):
        they stay listed until they are healthy, and hot reset leaves them to the operator. Until the
        node has been read, nothing is reset or written (the next round reads again): an unreadable
        node must not erase what an earlier run asked an operator to do."""
        if self.node is None:
            self._info_known = True
            return
        try:
            annotations = await self.node.read()
        except Exception as exc:
            log.warning("ResetInfo not read; hot reset waits", extra={"node": self.node_name, "error": str(exc)})
            return
        self._info_known = True
        info, error = read_annotation(annotations)
        if error is not None:  # as the reference: dropped whole, and our next write replaces it
            log.warning("ignoring a malformed ResetInfo annotation",
                        extra={"node": self.node_name, "error": str(error)})  # fmt: skip
            return
        self.info = info
        self._written_info = render_reset_info(info) if annotations and RESET_INFO_ANNOTATION in annotations else None
        self._listed_at_start = {dev.phy_id for dev in info.manual_reset_devs}
        if info.manual_reset_devs:
            log.info("chips left for an operator by an earlier run",
                     extra={"node": self.node_name, "phy_ids": sorted(self._listed_at_start)})  # fmt: skip

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
        return sorted(
            v.chip
            for v in self.state.verdicts().values()
            # Not "unschedulable": a FreeRestartNPU chip a job uses stays schedulable under GraceToleranceOn
            # and is reset through the job's in-place recovery.
            if reset_candidate(v.fault_level) and not v.resetting and v.chip not in self._running
        )

    async def tick(self) -> None:
        if not self._info_known:
            await self._read_info()
            if not self._info_known:  # an earlier run's hand-offs are not known yet: neither reset nor rewrite
                return
        wanted = self.candidates()
        self._forget_healed()
        if not wanted:
            await self._publish_info()
            return
        listing = await self.exporter.chips()
        chips = self._chips = {c.name: c for c in listing.chips}
        now = self.clock.now()
        now_ms = int(now * 1000)
        for chip in listing.chips:
            # Idle means no process: a pod of a job in in-place recovery stays while its agents
            # stop training, and a pod of any other job blocks the reset outright (_jobs_of).
            if chip.dynamic is None or not chip.dynamic.processes.is_ok or chip.dynamic.processes.value:
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
            if faulty.phy_id in self._listed_at_start:
                await self._abandon(key, {}, group, f"{name} was left for an operator by an earlier run (ResetInfo)",
                                    now_ms, [faulty])  # fmt: skip
                continue
            jobs, reason = await self._jobs_of(group)
            reason = reason or unknown_group_reason(faulty) or self._self_healing(key, now)
            if reason is None and not await self._has_token(faulty, now_ms):
                # Before the job is told anything: it must not stop training for a reset that cannot come.
                await self._abandon(key, jobs, group, f"{name} has no reset token left ({TOKENS_RULE})", now_ms,
                                    [faulty])  # fmt: skip
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
            if not await self._consume_token(faulty, now_ms):  # spent meanwhile (an operator's request)
                await self._abandon(key, jobs, group, f"{name} has no reset token left ({TOKENS_RULE})", now_ms,
                                    [faulty])  # fmt: skip
                continue
            self._start_reset(group, jobs)
        await self._publish_info()

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
        jobs, reason = await self._jobs_of(group)
        reason = reason or unknown_group_reason(faulty) or self._why_not(group, now)
        if reason is None and not await self._has_token(faulty, now_ms):
            reason = f"{name} has no reset token left ({TOKENS_RULE})"
        if reason is not None:
            return list(key), reason
        if jobs:
            refused = await self._tell_jobs(jobs, group, "unrecovered")
            if refused is not None:
                await self._refused(key, jobs, group, refused, now_ms, [], "operator")
                return list(key), refused
        if not await self._consume_token(faulty, now_ms):
            await self._tell_jobs(jobs, group, "failed")
            return list(key), f"{name} has no reset token left ({TOKENS_RULE})"
        self.operator.pop(key, None)
        self._start_reset(group, jobs)
        return list(key), None

    def _start_reset(self, group: list[Chip], jobs: dict[tuple[str, str], list[SlimPod]]) -> None:
        self.tasks.spawn(self._reset(group, jobs), f"reset-{group[0].name}")

    async def _refused(
        self,
        key: tuple[str, ...],
        jobs: dict[tuple[str, str], list[SlimPod]],
        group: list[Chip],
        reason: str,
        at_ms: int,
        chips: list[Chip],
        channel: str,
    ) -> None:
        """A job's reset ConfigMap refused the write: record it (GET /v1/resets) and, for an automatic
        reset, hand the ring to the operator."""
        await asyncio.to_thread(self.store.resets.refuse, ",".join(key), list(key), channel, at_ms, reason)
        if channel == "auto":
            await self._abandon(key, jobs, group, reason, at_ms, chips)
        else:
            await self._tell_jobs(self._told_unrecovered(jobs), group, "failed")

    async def _abandon(
        self,
        key: tuple[str, ...],
        jobs: dict[tuple[str, str], list[SlimPod]],
        group: list[Chip],
        reason: str,
        at_ms: int,
        chips: list[Chip],
    ) -> None:
        """No reset for this ring: the jobs already told `unrecovered` are told `failed` (else they wait
        for a reset that never comes), and the ring goes to the operator."""
        told = self._told_unrecovered(jobs)
        if told:
            await self._tell_jobs(told, group, "failed")
        self._told_at.pop(key, None)
        self._to_operator(key, reason, at_ms, chips)

    def _told_unrecovered(self, jobs: dict[tuple[str, str], list[SlimPod]]) -> dict[tuple[str, str], list[SlimPod]]:
        return {job: pods for job, pods in jobs.items() if self._told.get(job) == "unrecovered"}

    def _interval_ms(self) -> int:
        """The token refill interval in real ms (it runs on policy time)."""
        return round(policy_seconds(self.clock, TOKEN_REFILL_INTERVAL_MS / 1000) * 1000)

    async def _has_token(self, chip: Chip, now_ms: int) -> bool:
        left = await asyncio.to_thread(
            stored_tokens.tokens, self.store.buckets, chip.name, now_ms, interval_ms=self._interval_ms()
        )
        return left > 0

    async def _consume_token(self, chip: Chip, now_ms: int) -> bool:
        """One token of the faulty chip's bucket (the reference's TokenBucketMgr.ConsumeToken: the
        rest of its group pays nothing)."""
        return await asyncio.to_thread(
            stored_tokens.consume, self.store.buckets, chip.name, chip.logic_id, now_ms, interval_ms=self._interval_ms()
        )

    async def tokens(self) -> dict[str, int]:
        """Reset tokens left per chip of the node (a chip that never used its bucket has them all)."""
        names = self.state.chips()
        now_ms = int(self.clock.now() * 1000)
        used = await asyncio.to_thread(
            stored_tokens.tokens_by_chip, self.store.buckets, now_ms, interval_ms=self._interval_ms()
        )
        return {chip: used.get(chip, TOKEN_MAX_COUNT) for chip in sorted(names | set(used))}

    def _grace(self) -> GraceTolerance:
        return self.state.policy().customization.grace

    def _self_healing(self, key: tuple[str, ...], now: float) -> str | None:
        """GraceTolerance.WaitFaultSelfHealingTime: give a fresh fault the chance to clear by itself."""
        wait = policy_seconds(self.clock, self._grace().wait_fault_self_healing_s)
        verdicts = self.state.verdicts()
        newest = max((verdicts[c].since for c in key if c in verdicts), default=now)
        if now - newest < wait:
            return f"waiting {wait:.1f} s for the fault to heal by itself"
        return None

    def _processes_outstay(self, key: tuple[str, ...], group: list[Chip], now: float) -> bool:
        """GraceTolerance.WaitProcessReadCMTime: the job was told, but its processes still run."""
        told = self._told_at.setdefault(key, now)
        running = any(c.dynamic is not None and c.dynamic.processes.value for c in group)
        if not running:
            return False
        return now - told > policy_seconds(self.clock, self._grace().wait_process_read_cm_s)

    def _why_not(self, group: list[Chip], now: float) -> str | None:
        for chip in group:
            if chip.name in self._running:
                return f"{chip.name} is being reset"
            dyn = chip.dynamic
            if dyn is None or not dyn.processes.is_ok:
                return f"cannot tell whether processes run on {chip.name}"
            if dyn.processes.value:
                return f"processes run on {chip.name}"
        idle_real = policy_seconds(self.clock, IDLE_S)
        last_busy = max(self._busy_since.get(c.name, self._started) for c in group)
        if now - last_busy < idle_real:
            return f"idle for {now - last_busy:.1f} s of the {idle_real:.1f} s needed"
        return None

    async def _jobs_of(self, group: list[Chip]) -> tuple[dict[tuple[str, str], list[SlimPod]], str | None]:
        """The jobs (namespace, name) whose pods use the group; a reason when one is not in in-place recovery."""
        names = {c.name for c in group}
        jobs: dict[tuple[str, str], list[SlimPod]] = {}
        for pod in self.pods():
            if not chips_in_use_for_allocation([pod]) & names:
                continue
            job = job_name(pod.labels)
            if not job:
                return {}, f"pod {pod.namespace}/{pod.name} uses the group and belongs to no job"
            jobs.setdefault((pod.namespace, job), []).append(pod)
        for namespace, job in jobs:
            if self.configmaps is None or await self.configmaps.get(namespace, f"reset-config-{job}") is None:
                return {}, f"job {namespace}/{job} uses the group and takes no part in in-place recovery"
        return jobs, None

    async def _tell_jobs(
        self, jobs: dict[tuple[str, str], list[SlimPod]], group: list[Chip], status: str
    ) -> str | None:
        """Write each job's reset ConfigMap (the RankList of its pods' chips on this node) and its host
        mirror, over what the ConfigMap holds (WriteResetInfoDataIntoCM). Every job's write is checked
        first: when the reference would refuse one, nothing is written and the reason is returned."""
        assert self.configmaps is not None
        todo = {job: pods for job, pods in jobs.items() if self._told.get(job) != status}
        ranks = {job: self._ranks(job[0], job[1], pods, group, status) for job, pods in todo.items()}
        # The first `unrecovered` of a reset is a retry of the job (needAddRetry): RetryTime + 1 and
        # restartType hotReset; its later writes keep both.
        retry = status == "unrecovered"
        for (namespace, job), job_ranks in ranks.items():
            cm = f"{CM_NAME_PREFIX}{job}"
            current = await self.configmaps.get(namespace, cm)
            try:
                next_reset_config(current.data if current is not None else None, job_ranks, update_time_s=0,
                                  retry=retry)  # fmt: skip
            except ResetConfigRefused as exc:
                log.warning("reset ConfigMap not written: the reference would refuse it",
                            extra={"job": f"{namespace}/{job}", "configmap": cm, "reason": exc.reason})  # fmt: skip
                return f"{namespace}/{cm} refused: {exc.reason}"
        for (namespace, job), job_ranks in ranks.items():
            cm = f"{CM_NAME_PREFIX}{job}"
            try:
                written = await self._write_reset_config(namespace, cm, job_ranks, retry)
            except ResetConfigRefused as exc:  # changed since the check above
                log.warning("reset ConfigMap not written: the reference would refuse it",
                            extra={"job": f"{namespace}/{job}", "configmap": cm, "reason": exc.reason})  # fmt: skip
                continue
            if not written:
                log.warning("reset ConfigMap not written: it kept changing under us",
                            extra={"job": f"{namespace}/{job}", "configmap": cm})  # fmt: skip
                continue
            self._told[(namespace, job)] = status
            if status != "unrecovered":
                self._episode.pop((namespace, job), None)
            log.info("job told", extra={"job": f"{namespace}/{job}", "status": status})
        return None

    async def _write_reset_config(self, namespace: str, cm: str, ranks: list[RankEntry], retry: bool) -> bool:
        """One write over the ConfigMap as it is (re-read on a conflict); True once it holds `ranks`."""
        assert self.configmaps is not None
        for _ in range(3):
            current = await self.configmaps.get(namespace, cm)
            data = next_reset_config(
                current.data if current is not None else None, ranks,
                update_time_s=int(self.clock.now()), retry=retry,
            )  # fmt: skip
            if current is not None and current.data.get(RESET_JSON_KEY) == data[RESET_JSON_KEY]:
                return True
            if self.mirror_dir is not None:  # first: the agents read the files
                await asyncio.to_thread(self._mirror, namespace, cm, data)
            try:
                await self.configmaps.put(namespace, cm, data, {"reset": "true"},
                                          current.resource_version if current else None)  # fmt: skip
                return True
            except Conflict:
                continue
        return False

    def _ranks(self, namespace: str, job: str, pods: list[SlimPod], group: list[Chip], status: str) -> list[RankEntry]:
        """The job's RankList on this node: every chip of its pods, by pod, each pod's by logic id
        (GenerateTaskDevFaultInfoList). A chip's policy and codes are its fault's, kept for the whole
        episode (its first policy is InitialPolicy): after a good reset its verdict is clean."""
        verdicts = self.state.verdicts()
        known = {c.name: c for c in self._chips.values()} | {c.name: c for c in group}
        policy_ = self.state.policy()
        spellings = (policy_.table.spellings, policy_.customization.spellings)
        episode = self._episode.setdefault((namespace, job), {})
        ranks: list[RankEntry] = []
        for pod in sorted(pods, key=lambda p: p.name):
            names = sorted(
                (n for n in chips_in_use_for_allocation([pod]) if n in known), key=lambda n: known[n].logic_id
            )
            faults: dict[int, DevFaultInfo] = {}
            for name in names:
                logic = known[name].logic_id
                v = verdicts.get(name)
                if logic not in episode or status == "unrecovered":
                    policy = policy_for_level(v.fault_level.value) if v is not None else "empty"
                    codes = error_code_hex((int(c, 16) for c in (v.codes if v is not None else [])), *spellings)
                    first = episode[logic][1] if logic in episode else policy
                    episode[logic] = (policy, first, codes)
                policy, first, codes = episode[logic]
                faults[logic] = DevFaultInfo(status, policy, first, (), codes)
            index = parse_rank_index(pod.annotations.get(RANK_INDEX_ANNOTATION))
            ranks.extend(rank_list(index, [known[n].logic_id for n in names], faults))
        return ranks

    def _mirror(self, namespace: str, cm: str, data: dict[str, str]) -> None:
        assert self.mirror_dir is not None
        folder = self.mirror_dir / f"{namespace}.{cm}"
        folder.mkdir(parents=True, exist_ok=True)
        for name in (RESET_JSON_KEY, RESTART_TYPE_KEY):
            if name not in data:  # as the ConfigMap: a key it does not hold is no file
                (folder / name).unlink(missing_ok=True)
                continue
            tmp = folder / f".{name}.tmp"
            tmp.write_text(data[name])
            tmp.replace(folder / name)

    async def _reset(self, group: list[Chip], jobs: dict[tuple[str, str], list[SlimPod]] | None = None) -> None:
        key = tuple(c.name for c in group)
        now_ms = int(self.clock.now() * 1000)
        attempt = await asyncio.to_thread(self.store.resets.record, ",".join(key), list(key), "auto", now_ms)
        self._running.update(key)
        await self.marks.set_resetting(key, True)
        outcome, code, message = "failed", -8005, "unknown"
        wait_policy_s = self._grace().wait_device_reset_s
        wait_s = policy_seconds(self.clock, wait_policy_s)
        try:
            job = await self.exporter.reset(group[0].logic_id, "auto")
            log.info("hot reset started", extra={"chips": list(key), "job": job.id, "channel": job.channel.value})
            # GraceTolerance.WaitDeviceResetTime bounds the whole reset, as in the reference; the
            # exporter's own --reset-timeout may be longer, and the chips must not wait on it.
            async with asyncio.timeout(wait_s):
                while job.state not in (JobState.SUCCEEDED, JobState.FAILED):
                    await asyncio.sleep(min(JOB_POLL_S, wait_s / 20))
                    job = await self.exporter.job(job.id)
            if job.state is JobState.SUCCEEDED:
                outcome, code, message = "succeeded", 0, f"{job.channel.value} reset done"
            elif job.error is not None:
                code, message = job.error.code, job.error.message
        except ExporterError as exc:
            code, message = exc.status, exc.detail
        except TimeoutError:
            code, message = -8006, f"the reset did not end within WaitDeviceResetTime ({wait_policy_s} s)"
        finally:
            self._running.difference_update(key)
            await self.marks.set_resetting(key, False)
        finished_ms = int(self.clock.now() * 1000)
        why = None if outcome == "succeeded" else f"reset failed ({code}): {message}"
        await asyncio.to_thread(self.store.resets.finish, attempt, outcome, code or None, finished_ms, reason=why)
        self._told_at.pop(key, None)  # the episode is over: the next one waits for its own processes
        if jobs:
            await self._tell_jobs(jobs, group, "recovered" if outcome == "succeeded" else "failed")
        if outcome == "succeeded":
            log.info("hot reset succeeded", extra={"chips": list(key)})
        else:
            log.error("hot reset failed", extra={"chips": list(key), "code": code, "error": message})
            self._to_operator(key, f"reset failed ({code}): {message}", int(self.clock.now() * 1000), group,
                              failed=True)  # fmt: skip
        await self._publish_info()

    def _to_operator(
        self, key: tuple[str, ...], reason: str, at_ms: int, chips: list[Chip], *, failed: bool = False
    ) -> None:
        """Hand the group to an operator: `GET /v1/resets` says why, and `chips` join ResetInfo's
        ManualResetDevs (the faulty chip, as markNeedExternalOps; a failed reset's whole ring, with
        its associated card, as execRescan / fillResetDevs)."""
        if key not in self.operator:
            log.warning("hot reset needs an operator", extra={"chips": list(key), "reason": reason})
        self.operator[key] = OperatorItem(key, reason, at_ms)
        for chip in chips:
            self.info = mark_need_external_ops(self.info, _reset_device(chip, failed=failed))

    def _forget_healed(self) -> None:
        """A chip that is healthy again needs no operator any more (checkDeviceRecovered ->
        clearNeedExternalOps), nor does a group whose chips all are."""
        verdicts = self.state.verdicts()
        healthy = [v for v in verdicts.values() if _healthy(v)]
        cleared = clear_need_external_ops(
            self.info, [ResetDevice(phy_id=v.phy_id, logic_id=v.logic_id) for v in healthy]
        )
        if cleared is not None:
            self.info = cleared
        self._listed_at_start -= {v.phy_id for v in healthy}
        for key in list(self.operator) + list(self._told_at):
            if all(c in verdicts and _healthy(verdicts[c]) for c in key):
                self.operator.pop(key, None)
                self._told_at.pop(key, None)

    def reset_info(self) -> str:
        """The node annotation `ResetInfo`, byte for byte as the reference writes it."""
        return render_reset_info(self.info)

    async def _publish_info(self) -> None:
        info = self.reset_info()
        if info != self._written_info and self.node is not None:
            await self.node.write_reset_info(info)
            self._written_info = info


def _reset_device(chip: Chip, *, failed: bool) -> ResetDevice:
    """A chip as ResetInfo lists it. A failed reset's entry carries the associated card
    (fillResetDevs: the partner card on A3, -1 elsewhere or when unknown); markNeedExternalOps' leaves it 0."""
    associated = 0
    if failed:
        partner = chip.static.partner_card
        associated = (
            partner.value
            if chip.family is ChipFamily.ASCEND910A3 and partner.is_ok and partner.value is not None
            else NO_ID
        )
    return ResetDevice(chip.card_id, chip.device_id, associated, chip.phy_id, chip.logic_id)


def _healthy(verdict: ChipVerdict) -> bool:
    """Healthy for hot reset: schedulable, and not merely kept so for its job (GraceToleranceOn)."""
    return verdict.schedulable and not reset_candidate(verdict.fault_level)
