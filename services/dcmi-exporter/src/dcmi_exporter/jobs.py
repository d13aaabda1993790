"""Reset jobs: reset a chip's whole reset group and follow its boot status to 16.

The exporter checks only what the library can see (processes on the chips, another reset
already running); the fault-manager decides *whether* a chip should be reset.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
from dataclasses import dataclass

from ascend_common.clock import Clock
from ascend_common.reset_groups import group_of, unknown_group_reason
from ascend_common.schemas.exporter import (
    BOOT_STATUS_READY,
    Chip,
    EventType,
    JobError,
    JobState,
    ResetChannel,
    ResetJob,
)

from dcmi_exporter.backends.base import Backend
from dcmi_exporter.backends.errors import DcmiError
from dcmi_exporter.node.calls import CallGuard
from dcmi_exporter.node.poller import ChipPoller, chip_key

log = logging.getLogger(__name__)
MAX_JOBS_KEPT = 256


class ResetRefused(Exception):
    """The reset cannot start now (processes run, a reset is under way, the chip is unknown)."""


class ChannelUnsupported(Exception):
    pass


def busy_reason(group: list[Chip]) -> str | None:
    """Why the library side forbids a reset now, or None."""
    for chip in group:
        dyn = chip.dynamic
        if dyn is None or not dyn.processes.is_ok:
            return f"cannot tell whether processes run on {chip.name}"
        if dyn.processes.value:
            pids = ",".join(str(p.pid) for p in dyn.processes.value)
            return f"processes {pids} run on {chip.name}"
    return None


@dataclass
class ResetJobs:
    backend: Backend
    guard: CallGuard
    poller: ChipPoller
    clock: Clock
    timeout_s: float
    poll_period_s: float

    def __post_init__(self) -> None:
        self._jobs: dict[str, ResetJob] = {}
        self._active: dict[int, str] = {}  # logic id -> job id
        self._tasks: set[asyncio.Task[None]] = set()

    def get(self, job_id: str) -> ResetJob | None:
        return self._jobs.get(job_id)

    async def start(self, logic_id: int, channel: str) -> ResetJob:
        snap = self.poller.snapshot
        chip = snap.by_logic[logic_id]
        if reason := unknown_group_reason(chip):  # the reference finds no ring and resets nothing
            raise ResetRefused(reason)
        group = group_of(chip, snap.chips)
        for member in group:
            if member.logic_id in self._active:
                raise ResetRefused(f"{member.name} is already being reset by job {self._active[member.logic_id]}")
        if reason := busy_reason(group):
            raise ResetRefused(reason)
        chosen = ResetChannel.INBAND
        if channel == ResetChannel.OUTBAND:
            if not await self._outband_everywhere([c.logic_id for c in group]):
                raise ChannelUnsupported(f"out-of-band reset is not supported on every chip of {chip.name}'s group")
            chosen = ResetChannel.OUTBAND
        for member in group:  # re-check: the await above let other requests in
            if member.logic_id in self._active:
                raise ResetRefused(f"{member.name} is already being reset by job {self._active[member.logic_id]}")
        job = ResetJob(
            id=secrets.token_hex(8),
            logic_ids=[c.logic_id for c in group],
            phy_ids=[c.phy_id for c in group],
            channel=chosen,
            state=JobState.PENDING,
            boot_status={c.logic_id: None for c in group},
            created_at=self.clock.now(),
        )
        self._store(job)
        for c in group:
            self._active[c.logic_id] = job.id
        task = asyncio.create_task(self._run(job, fallback=channel == "auto"), name=f"reset-{job.id}")
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        log.info("reset job started", extra={"job": job.id, "chips": [c.name for c in group], "channel": chosen})
        return job

    async def _outband_everywhere(self, logic_ids: list[int]) -> bool:
        for logic in logic_ids:
            addr = self.poller.address(logic)
            if addr is None:
                return False
            try:
                if not await self.guard.call(chip_key(logic), lambda a=addr: self.backend.outband_supported(a)):  # type: ignore[misc]
                    return False
            except DcmiError:
                return False
        return True

    def _store(self, job: ResetJob) -> None:
        self._jobs[job.id] = job
        while len(self._jobs) > MAX_JOBS_KEPT:
            oldest = next(iter(self._jobs))
            if self._jobs[oldest].state in (JobState.PENDING, JobState.RUNNING):
                break
            del self._jobs[oldest]
        self.poller.publish(EventType.JOB, job=job)

    async def _run(self, job: ResetJob, fallback: bool) -> None:
        try:
            job = await self._reset_all(job)
            if job.state is JobState.FAILED and fallback and await self._outband_everywhere(job.logic_ids):
                log.warning("in-band reset failed; trying out-of-band", extra={"job": job.id})
                job = job.model_copy(update={"channel": ResetChannel.OUTBAND, "error": None, "finished_at": None})
                job = await self._reset_all(job)
        except Exception as exc:  # never leave a job running forever
            log.exception("reset job crashed", extra={"job": job.id})
            job = self._finish(job, JobError(code=-8005, message=f"internal error: {exc}"))
        finally:
            for logic in job.logic_ids:
                if self._active.get(logic) == job.id:
                    del self._active[logic]
            for logic in job.logic_ids:
                self.poller.refresh_soon(logic)

    async def _reset_all(self, job: ResetJob) -> ResetJob:
        job = job.model_copy(update={"state": JobState.RUNNING})
        self._store(job)
        for logic in job.logic_ids:
            addr = self.poller.address(logic)
            assert addr is not None
            try:
                await self.guard.call(chip_key(logic), lambda a=addr: self.backend.reset(a, job.channel))  # type: ignore[misc]
            except DcmiError as exc:
                log.error("reset failed", extra={"job": job.id, "logic_id": logic, "code": exc.code})
                return self._finish(job, JobError(code=exc.code, message=str(exc)))
        deadline = asyncio.get_running_loop().time() + self.timeout_s
        while True:
            await asyncio.sleep(self.poll_period_s)
            status = dict(job.boot_status)
            for logic in job.logic_ids:
                addr = self.poller.address(logic)
                assert addr is not None
                try:
                    status[logic] = await self.guard.call(chip_key(logic), lambda a=addr: self.backend.boot_status(a))  # type: ignore[misc]
                except DcmiError:
                    status[logic] = None  # not back yet: a rebooting chip may refuse calls
            if status != job.boot_status:
                job = job.model_copy(update={"boot_status": status})
                self._store(job)
            if all(v == BOOT_STATUS_READY for v in status.values()):
                for logic in job.logic_ids:
                    # Its boot-status reads here are not the poller's: tell it, so lost events get looked for.
                    self.poller.mark_reset(logic)
                job = job.model_copy(update={"state": JobState.SUCCEEDED, "finished_at": self.clock.now()})
                self._store(job)
                log.info("reset job succeeded", extra={"job": job.id})
                return job
            if asyncio.get_running_loop().time() > deadline:
                return self._finish(
                    job, JobError(code=-8006, message=f"boot status did not reach 16 within {self.timeout_s}s")
                )

    def _finish(self, job: ResetJob, error: JobError) -> ResetJob:
        job = job.model_copy(update={"state": JobState.FAILED, "error": error, "finished_at": self.clock.now()})
        self._store(job)
        log.error("reset job failed", extra={"job": job.id, "code": error.code, "error": error.message})
        return job

    async def stop(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
