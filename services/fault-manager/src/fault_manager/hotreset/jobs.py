"""The two jobs of a hot reset: the exporter's reset job (started, polled to its end within
WaitDeviceResetTime), and the training job told through its `reset-config-<job>` ConfigMap and that
ConfigMap's host mirror (`unrecovered` before the reset, `recovered` or `failed` after)."""

from __future__ import annotations

import asyncio
import errno
import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from ascend_common.adapters.clients.exporter import ExporterClient, ExporterError
from ascend_common.adapters.hostfs import HostDir, UnsafePath
from ascend_common.adapters.kube.configmaps import ConfigMaps, Conflict
from ascend_common.clock import Clock
from ascend_common.inuse import chips_in_use_for_allocation
from ascend_common.kubenames import dns1123_label, dns1123_subdomain
from ascend_common.pods import SlimPod
from ascend_common.schemas.exporter import Chip, JobState
from ascend_common.schemas.verdict import ChipVerdict

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
from fault_manager.policy.engine import Policy

log = logging.getLogger(__name__)
JOB_POLL_S = 1.0
# As Path.mkdir and write_text left them under the usual umask 022: the agents read the files.
MIRROR_DIR_MODE = 0o755
MIRROR_FILE_MODE = 0o644
Jobs = dict[tuple[str, str], list[SlimPod]]  # (namespace, job) -> its pods that use the group


class FaultState(Protocol):
    """What hot reset reads of the fault-manager (fault_manager.reactor.published.Published)."""

    def verdicts(self) -> dict[str, ChipVerdict]: ...

    def policy(self) -> Policy: ...

    def chips(self) -> frozenset[str]: ...


async def exporter_reset(
    exporter: ExporterClient, group: list[Chip], wait_s: float, wait_policy_s: float
) -> tuple[str, int, str]:
    """Run the group's reset as an exporter job: (outcome, code, message). GraceTolerance.WaitDeviceResetTime
    (`wait_s` real seconds) bounds the whole reset, as in the reference; the exporter's own
    --reset-timeout may be longer, and the chips must not wait on it."""
    outcome, code, message = "failed", -8005, "unknown"
    try:
        job = await exporter.reset(group[0].logic_id, "auto")
        log.info("hot reset started",
                 extra={"chips": [c.name for c in group], "job": job.id, "channel": job.channel.value})  # fmt: skip
        async with asyncio.timeout(wait_s):
            while job.state not in (JobState.SUCCEEDED, JobState.FAILED):
                await asyncio.sleep(min(JOB_POLL_S, wait_s / 20))
                job = await exporter.job(job.id)
        if job.state is JobState.SUCCEEDED:
            outcome, code, message = "succeeded", 0, f"{job.channel.value} reset done"
        elif job.error is not None:
            code, message = job.error.code, job.error.message
    except ExporterError as exc:
        code, message = exc.status, exc.detail
    except TimeoutError:
        code, message = -8006, f"the reset did not end within WaitDeviceResetTime ({wait_policy_s} s)"
    return outcome, code, message


@dataclass
class TrainingJobs:
    """The training jobs on a group, and what each was last told through its reset ConfigMap."""

    state: FaultState
    clock: Clock
    configmaps: ConfigMaps | None = None
    mirror_dir: Path | None = None
    _told: dict[tuple[str, str], str] = field(default_factory=dict)  # job -> status last written
    # job -> logic id -> (policy, initial policy, error codes) of the current episode
    _episode: dict[tuple[str, str], dict[int, tuple[str, str, str]]] = field(default_factory=dict)

    async def of_group(self, group: list[Chip], pods: list[SlimPod]) -> tuple[Jobs, str | None]:
        """The jobs (namespace, name) whose pods use the group; a reason when one is not in in-place recovery."""
        names = {c.name for c in group}
        jobs: Jobs = {}
        for pod in pods:
            if not chips_in_use_for_allocation([pod]) & names:
                continue
            job = job_name(pod.labels)
            if not job:
                return {}, f"pod {pod.namespace}/{pod.name} uses the group and belongs to no job"
            if (bad := bad_job_name(pod.namespace, job)) is not None:
                log.warning("job refused: its name cannot name a reset ConfigMap or its host mirror",
                            extra={"pod": f"{pod.namespace}/{pod.name}", "error": bad})  # fmt: skip
                return {}, f"pod {pod.namespace}/{pod.name} uses the group and {bad}"
            jobs.setdefault((pod.namespace, job), []).append(pod)
        for namespace, job in jobs:
            if self.configmaps is None or await self.configmaps.get(namespace, f"reset-config-{job}") is None:
                return {}, f"job {namespace}/{job} uses the group and takes no part in in-place recovery"
        return jobs, None

    def told_unrecovered(self, jobs: Jobs) -> Jobs:
        return {job: pods for job, pods in jobs.items() if self._told.get(job) == "unrecovered"}

    async def tell(self, jobs: Jobs, group: list[Chip], status: str, listed: Mapping[str, Chip]) -> str | None:
        """Write each job's reset ConfigMap (the RankList of its pods' chips on this node) and its host
        mirror, over what the ConfigMap holds (WriteResetInfoDataIntoCM). Every job's write is checked
        first: when the reference would refuse one, nothing is written and the reason is returned.
        `listed`: the exporter's chips as last listed, by name."""
        assert self.configmaps is not None
        todo = {job: pods for job, pods in jobs.items() if self._told.get(job) != status}
        ranks = {job: self._ranks(job[0], job[1], pods, group, status, listed) for job, pods in todo.items()}
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
                try:
                    await asyncio.to_thread(self._mirror, namespace, cm, data)
                except UnsafePath as exc:  # the ConfigMap still tells the job
                    log.error(
                        "reset ConfigMap's host mirror not written: a symlink or a bad name under the mirror dir",
                        extra={"configmap": f"{namespace}/{cm}", "path": exc.filename, "error": str(exc)},
                    )
            try:
                await self.configmaps.put(namespace, cm, data, {"reset": "true"},
                                          current.resource_version if current else None)  # fmt: skip
                return True
            except Conflict:
                continue
        return False

    def _ranks(
        self, namespace: str, job: str, pods: list[SlimPod], group: list[Chip], status: str,
        listed: Mapping[str, Chip],
    ) -> list[RankEntry]:  # fmt: skip
        """The job's RankList on this node: every chip of its pods, by pod, each pod's by logic id
        (GenerateTaskDevFaultInfoList). A chip's policy and codes are its fault's, kept for the whole
        episode (its first policy is InitialPolicy): after a good reset its verdict is clean."""
        verdicts = self.state.verdicts()
        known = {c.name: c for c in listed.values()} | {c.name: c for c in group}
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
        write_mirror(self.mirror_dir, namespace, cm, data)


def bad_job_name(namespace: str, job: str) -> str | None:
    """Why a job's names cannot become `reset-config-<job>` in `namespace` (and the mirror's
    `<namespace>.reset-config-<job>` directory), or None: the namespace must be a DNS-1123 label and
    the ConfigMap name a DNS-1123 subdomain, as the API server requires of both."""
    if not dns1123_label(namespace):
        return f"its namespace {namespace[:80]!r} is not a DNS-1123 label"
    if not dns1123_subdomain(f"{CM_NAME_PREFIX}{job}"):
        return f"its job name {job[:80]!r} does not make a DNS-1123 subdomain {CM_NAME_PREFIX}<job>"
    return None


def write_mirror(mirror_dir: Path, namespace: str, cm: str, data: dict[str, str]) -> None:
    """The ConfigMap's host mirror, `<mirror>/<namespace>.<cm>/<key>`, one file per key (blocking).
    The agents' pods mount the mirror, so every step goes through hostfs: never through a symlink
    planted there (UnsafePath), never outside the mirror (the names are checked again)."""
    if not dns1123_label(namespace) or not dns1123_subdomain(cm):
        raise UnsafePath(errno.EINVAL, "not a namespace and ConfigMap name", f"{namespace[:80]}.{cm[:260]}")
    with HostDir.root(mirror_dir, create_mode=MIRROR_DIR_MODE) as top, \
            top.sub(f"{namespace}.{cm}", create_mode=MIRROR_DIR_MODE) as folder:  # fmt: skip
        for name in (RESET_JSON_KEY, RESTART_TYPE_KEY):
            if name not in data:  # as the ConfigMap: a key it does not hold is no file
                folder.unlink(name)
                continue
            folder.write_atomically(name, data[name].encode(), MIRROR_FILE_MODE, fsync=False)
