"""Hot reset (contract section 8): reset a faulty chip's whole group when it is safe, or say why not.

Candidates are chips whose verdict is Unhealthy at a level that a reset can heal
(RestartRequest, RestartBusiness, FreeRestartNPU, RestartNPU). A group is reset only when
no process runs on any of its chips, it has been idle for the idle period (60 s of policy
time), every chip still has a reset token (3 per 6 h, in SQLite), and every pod that uses it
belongs to a job in in-place recovery (it has a `reset-config-<job>` ConfigMap). Such a job is
told `unrecovered` (its agents stop training and release the chips), then `recovered` or
`failed` after the reset; the ConfigMap is mirrored to host files that its containers read.
The reset itself is the exporter's job (in-band, out-of-band where the library supports it);
its chips show as `-Recovering` meanwhile. A group that cannot be healed this
way goes to the operator: `GET /v1/resets` and the node annotation `ResetInfo`.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path

import httpx
from ascend_common.clients.exporter import ExporterClient, ExporterError
from ascend_common.faults import GraceTolerance, reset_candidate
from ascend_common.inuse import chips_in_use
from ascend_common.kube.pods import SlimPod
from ascend_common.reset_groups import group_of
from ascend_common.resetinfo import (
    RANK_INDEX_ANNOTATION,
    RankEntry,
    error_code_hex,
    job_name,
    parse_rank_index,
    policy_for_level,
    rank_id,
    render_reset_config,
)
from ascend_common.schemas.exporter import Chip, JobState

from fault_manager.configmaps import ConfigMaps, Conflict
from fault_manager.service import FaultManager
from fault_manager.store import Store

log = logging.getLogger(__name__)
IDLE_S = 60.0  # policy seconds a group must have been idle
JOB_POLL_S = 1.0


@dataclass(frozen=True)
class OperatorItem:
    """A group that needs an operator, and why."""

    chips: tuple[str, ...]
    reason: str
    since_ms: int


@dataclass
class HotReset:
    fm: FaultManager
    exporter: ExporterClient
    store: Store
    write_reset_info: Callable[[str], Awaitable[None]] | None = None
    pods: Callable[[], list[SlimPod]] = list
    configmaps: ConfigMaps | None = None
    mirror_dir: Path | None = None
    period_s: float = 1.0
    operator: dict[tuple[str, ...], OperatorItem] = field(default_factory=dict)
    _busy_since: dict[str, float] = field(default_factory=dict)  # chip -> last time seen busy (real)
    _running: set[str] = field(default_factory=set)
    _blocked: dict[tuple[str, ...], str] = field(default_factory=dict)
    _task: asyncio.Task[None] | None = None
    _jobs: set[asyncio.Task[None]] = field(default_factory=set)
    _written_info: str | None = None
    _told: dict[tuple[str, str], str] = field(default_factory=dict)  # job -> status last written
    _told_at: dict[tuple[str, ...], float] = field(default_factory=dict)  # group -> when its jobs were told
    # job -> logic id -> (policy, initial policy, error codes) of the current episode
    _episode: dict[tuple[str, str], dict[int, tuple[str, str, str]]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self._started = self.fm.clock.now()  # nothing is known idle before we watched it

    async def start(self) -> None:
        self._task = asyncio.create_task(self._loop(), name="hot-reset")

    async def stop(self) -> None:
        for task in [*(self._jobs), *([self._task] if self._task else [])]:
            task.cancel()
        await asyncio.gather(*self._jobs, *([self._task] if self._task else []), return_exceptions=True)

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
            for v in self.fm.board.current().values()
            if reset_candidate(v.fault_level) and not v.schedulable and not v.resetting and v.chip not in self._running
        )

    async def tick(self) -> None:
        wanted = self.candidates()
        self._forget_healed()
        if not wanted:
            await self._publish_info()
            return
        listing = await self.exporter.chips()
        chips = {c.name: c for c in listing.chips}
        now = self.fm.clock.now()
        for chip in listing.chips:
            # Idle means no process: a pod of a job in in-place recovery stays while its agents
            # stop training, and a pod of any other job blocks the reset outright (_jobs_of).
            if chip.dynamic is None or not chip.dynamic.processes.is_ok or chip.dynamic.processes.value:
                self._busy_since[chip.name] = now
        seen: set[tuple[str, ...]] = set()
        for name in wanted:
            if name not in chips:
                continue
            group = group_of(chips[name], listing.chips)
            key = tuple(c.name for c in group)
            if key in seen or key in self.operator:
                continue
            seen.add(key)
            jobs, reason = await self._jobs_of(group)
            reason = reason or self._self_healing(key, now)
            if reason is None and jobs:
                # The job's agents must stop first: tell them, then wait for the chips to be idle.
                await self._tell_jobs(jobs, group, "unrecovered")
                if self._processes_outstay(key, group, now):
                    await self._tell_jobs(jobs, group, "failed")
                    self._to_operator(key, "the job's processes did not stop within WaitProcessReadCMTime",
                                      int(now * 1000))  # fmt: skip
                    continue
            reason = reason or self._why_not(group, now)
            if reason is not None:
                if self._blocked.get(key) != reason:
                    self._blocked[key] = reason
                    log.info("hot reset waits", extra={"chips": list(key), "reason": reason})
                continue
            self._blocked.pop(key, None)
            now_ms = int(now * 1000)
            if not await asyncio.to_thread(self.store.take_reset_tokens, list(key), now_ms):
                self._to_operator(key, "no reset token left (3 per chip per 6 h)", now_ms)
                continue
            task = asyncio.create_task(self._reset(group, jobs), name=f"reset-{key[0]}")
            self._jobs.add(task)
            task.add_done_callback(self._jobs.discard)
        await self._publish_info()

    async def request(self, name: str) -> tuple[list[str], str | None]:
        """An operator's reset of a chip's group, through the same preconditions (not the level).

        Returns the group and None when the reset started, or the reason it did not.
        """
        listing = await self.exporter.chips()
        chips = {c.name: c for c in listing.chips}
        if name not in chips:
            return [], f"no chip {name} on this node"
        group = group_of(chips[name], listing.chips)
        key = tuple(c.name for c in group)
        now = self.fm.clock.now()
        jobs, reason = await self._jobs_of(group)
        reason = reason or self._why_not(group, now)
        if reason is None and not await asyncio.to_thread(self.store.take_reset_tokens, list(key), int(now * 1000)):
            reason = "no reset token left (3 per chip per 6 h)"
        if reason is not None:
            return list(key), reason
        self.operator.pop(key, None)
        if jobs:
            await self._tell_jobs(jobs, group, "unrecovered")
        task = asyncio.create_task(self._reset(group, jobs), name=f"reset-{key[0]}")
        self._jobs.add(task)
        task.add_done_callback(self._jobs.discard)
        return list(key), None

    def _grace(self) -> GraceTolerance:
        return self.fm.engine.policy.customization.grace

    def _self_healing(self, key: tuple[str, ...], now: float) -> str | None:
        """GraceTolerance.WaitFaultSelfHealingTime: give a fresh fault the chance to clear by itself."""
        wait = self.fm.engine.real_time(self._grace().wait_fault_self_healing_s)
        verdicts = self.fm.board.current()
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
        return now - told > self.fm.engine.real_time(self._grace().wait_process_read_cm_s)

    def _why_not(self, group: list[Chip], now: float) -> str | None:
        for chip in group:
            if chip.name in self._running:
                return f"{chip.name} is being reset"
            dyn = chip.dynamic
            if dyn is None or not dyn.processes.is_ok:
                return f"cannot tell whether processes run on {chip.name}"
            if dyn.processes.value:
                return f"processes run on {chip.name}"
        idle_real = self.fm.engine.real_time(IDLE_S)
        last_busy = max(self._busy_since.get(c.name, self._started) for c in group)
        if now - last_busy < idle_real:
            return f"idle for {now - last_busy:.1f} s of the {idle_real:.1f} s needed"
        return None

    async def _jobs_of(self, group: list[Chip]) -> tuple[dict[tuple[str, str], list[SlimPod]], str | None]:
        """The jobs (namespace, name) whose pods use the group; a reason when one is not in in-place recovery."""
        names = {c.name for c in group}
        jobs: dict[tuple[str, str], list[SlimPod]] = {}
        for pod in self.pods():
            if not chips_in_use([pod]) & names:
                continue
            job = job_name(pod.labels)
            if not job:
                return {}, f"pod {pod.namespace}/{pod.name} uses the group and belongs to no job"
            jobs.setdefault((pod.namespace, job), []).append(pod)
        for namespace, job in jobs:
            if self.configmaps is None or await self.configmaps.get(namespace, f"reset-config-{job}") is None:
                return {}, f"job {namespace}/{job} uses the group and takes no part in in-place recovery"
        return jobs, None

    async def _tell_jobs(self, jobs: dict[tuple[str, str], list[SlimPod]], group: list[Chip], status: str) -> None:
        """Write each job's reset ConfigMap (RankList of its chips on this node) and its host mirror."""
        assert self.configmaps is not None
        verdicts = self.fm.board.current()
        by_name = {c.name: c for c in group}
        for (namespace, job), pods in jobs.items():
            if self._told.get((namespace, job)) == status:
                continue
            self._told[(namespace, job)] = status
            ranks: list[RankEntry] = []
            for pod in sorted(pods, key=lambda p: p.name):
                chips = sorted({by_name[n].logic_id for n in chips_in_use([pod]) if n in by_name})
                index = parse_rank_index(pod.annotations.get(RANK_INDEX_ANNOTATION))
                episode = self._episode.setdefault((namespace, job), {})
                names = {c.logic_id: c.name for c in group}
                for logic in chips:
                    v = verdicts.get(names[logic])
                    if logic not in episode or status == "unrecovered":
                        # Policy and codes are the fault's, kept for the whole episode (its first
                        # policy is InitialPolicy): after a good reset the chip's verdict is clean.
                        policy = policy_for_level(v.fault_level.value) if v is not None else "empty"
                        codes = error_code_hex(int(c, 16) for c in (v.codes if v is not None else []))
                        first = episode[logic][1] if logic in episode else policy
                        episode[logic] = (policy, first, codes)
                    policy, first, codes = episode[logic]
                    ranks.append(RankEntry(rank_id(index, chips, logic), logic, status, policy, first, (), codes))
            cm = f"reset-config-{job}"
            data = render_reset_config(ranks, update_time_s=int(self.fm.clock.now()))
            if self.mirror_dir is not None:  # first: the agents read the files
                await asyncio.to_thread(self._mirror, namespace, cm, data)
            for _ in range(3):
                current = await self.configmaps.get(namespace, cm)
                if current is not None and current.data.get("reset.json") == data["reset.json"]:
                    break
                try:
                    await self.configmaps.put(namespace, cm, data, {"reset": "true"},
                                              current.resource_version if current else None)  # fmt: skip
                    break
                except Conflict:
                    continue
            if status != "unrecovered":
                self._episode.pop((namespace, job), None)
            log.info("job told", extra={"job": f"{namespace}/{job}", "status": status})

    def _mirror(self, namespace: str, cm: str, data: dict[str, str]) -> None:
        assert self.mirror_dir is not None
        folder = self.mirror_dir / f"{namespace}.{cm}"
        folder.mkdir(parents=True, exist_ok=True)
        for name, text in (("reset.json", data["reset.json"]), ("restartType", data["restartType"])):
            tmp = folder / f".{name}.tmp"
            tmp.write_text(text)
            tmp.replace(folder / name)

    async def _reset(self, group: list[Chip], jobs: dict[tuple[str, str], list[SlimPod]] | None = None) -> None:
        key = tuple(c.name for c in group)
        now_ms = int(self.fm.clock.now() * 1000)
        attempt = await asyncio.to_thread(self.store.record_reset_attempt, ",".join(key), list(key), "auto", now_ms)
        self._running.update(key)
        self.fm.set_resetting(key, True)
        outcome, code, message = "failed", -8005, "unknown"
        wait_policy_s = self._grace().wait_device_reset_s
        wait_s = self.fm.engine.real_time(wait_policy_s)
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
            self.fm.set_resetting(key, False)
        finished_ms = int(self.fm.clock.now() * 1000)
        await asyncio.to_thread(self.store.finish_reset_attempt, attempt, outcome, code or None, finished_ms)
        if jobs:
            await self._tell_jobs(jobs, group, "recovered" if outcome == "succeeded" else "failed")
        if outcome == "succeeded":
            log.info("hot reset succeeded", extra={"chips": list(key)})
        else:
            log.error("hot reset failed", extra={"chips": list(key), "code": code, "error": message})
            self._to_operator(key, f"reset failed ({code}): {message}", int(self.fm.clock.now() * 1000))
        await self._publish_info()

    def _to_operator(self, key: tuple[str, ...], reason: str, at_ms: int) -> None:
        if key not in self.operator:
            log.warning("hot reset needs an operator", extra={"chips": list(key), "reason": reason})
        self.operator[key] = OperatorItem(key, reason, at_ms)

    def _forget_healed(self) -> None:
        """A group whose chips are all schedulable again needs no operator any more."""
        verdicts = self.fm.board.current()
        for key in list(self.operator):
            if all(verdicts.get(c) is not None and verdicts[c].schedulable for c in key):
                del self.operator[key]

    def reset_info(self) -> str:
        """The node annotation `ResetInfo`: the chips an operator must handle, and why."""
        items = [{"chips": list(i.chips), "reason": i.reason, "since_ms": i.since_ms} for i in self.operator.values()]
        return json.dumps({"ManualReset": sorted(items, key=lambda i: i["chips"])}, separators=(",", ":"))

    async def _publish_info(self) -> None:
        info = self.reset_info()
        if info != self._written_info and self.write_reset_info is not None:
            await self.write_reset_info(info)
            self._written_info = info
