"""Hot reset (contract section 8): reset a faulty chip's whole group when it is safe, or say why not.

Candidates are chips whose verdict is Unhealthy at a level that a reset can heal
(RestartRequest, RestartBusiness, FreeRestartNPU, RestartNPU). A group is reset only when
no process runs on any of its chips, it has been idle for the idle period (60 s of policy
time), every chip still has a reset token (3 per 6 h, in SQLite), and no pod uses it (in-place
recovery of jobs through their reset ConfigMaps is not implemented yet: such groups wait for
an operator). The reset itself is the exporter's job (in-band, out-of-band where the library
supports it); its chips show as `-Recovering` meanwhile. A group that cannot be healed this
way goes to the operator: `GET /v1/resets` and the node annotation `ResetInfo`.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

import httpx
from ascend_common.clients.exporter import ExporterClient, ExporterError
from ascend_common.faults import reset_candidate
from ascend_common.reset_groups import group_of
from ascend_common.schemas.exporter import Chip, JobState

from fault_manager.service import FaultManager
from fault_manager.store import Store

log = logging.getLogger(__name__)
IDLE_S = 60.0  # policy seconds a group must have been idle
JOB_POLL_S = 1.0
JOB_TIMEOUT_S = 240.0  # the exporter itself gives up after 180 s of boot status


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
    in_use: Callable[[], set[str]] = set
    write_reset_info: Callable[[str], Awaitable[None]] | None = None
    period_s: float = 1.0
    operator: dict[tuple[str, ...], OperatorItem] = field(default_factory=dict)
    _busy_since: dict[str, float] = field(default_factory=dict)  # chip -> last time seen busy (real)
    _running: set[str] = field(default_factory=set)
    _blocked: dict[tuple[str, ...], str] = field(default_factory=dict)
    _task: asyncio.Task[None] | None = None
    _jobs: set[asyncio.Task[None]] = field(default_factory=set)
    _written_info: str | None = None

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
        used = self.in_use()
        for chip in listing.chips:
            busy = bool(chip.dynamic and (not chip.dynamic.processes.is_ok or chip.dynamic.processes.value))
            if busy or chip.name in used:
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
            reason = self._why_not(group, used, now)
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
            task = asyncio.create_task(self._reset(group), name=f"reset-{key[0]}")
            self._jobs.add(task)
            task.add_done_callback(self._jobs.discard)
        await self._publish_info()

    def _why_not(self, group: list[Chip], used: set[str], now: float) -> str | None:
        for chip in group:
            if chip.name in self._running:
                return f"{chip.name} is being reset"
            dyn = chip.dynamic
            if dyn is None or not dyn.processes.is_ok:
                return f"cannot tell whether processes run on {chip.name}"
            if dyn.processes.value:
                return f"processes run on {chip.name}"
            if chip.name in used:
                return f"a pod uses {chip.name} (in-place recovery is not supported yet)"
        idle_real = self.fm.engine.real_time(IDLE_S)
        last_busy = max(self._busy_since.get(c.name, self._started) for c in group)
        if now - last_busy < idle_real:
            return f"idle for {now - last_busy:.1f} s of the {idle_real:.1f} s needed"
        return None

    async def _reset(self, group: list[Chip]) -> None:
        key = tuple(c.name for c in group)
        now_ms = int(self.fm.clock.now() * 1000)
        attempt = await asyncio.to_thread(self.store.record_reset_attempt, ",".join(key), list(key), "auto", now_ms)
        self._running.update(key)
        self.fm.set_resetting(key, True)
        outcome, code, message = "failed", -8005, "unknown"
        try:
            job = await self.exporter.reset(group[0].logic_id, "auto")
            log.info("hot reset started", extra={"chips": list(key), "job": job.id, "channel": job.channel.value})
            async with asyncio.timeout(JOB_TIMEOUT_S):
                while job.state not in (JobState.SUCCEEDED, JobState.FAILED):
                    await asyncio.sleep(JOB_POLL_S)
                    job = await self.exporter.job(job.id)
            if job.state is JobState.SUCCEEDED:
                outcome, code, message = "succeeded", 0, f"{job.channel.value} reset done"
            elif job.error is not None:
                code, message = job.error.code, job.error.message
        except ExporterError as exc:
            code, message = exc.status, exc.detail
        except TimeoutError:
            code, message = -8006, f"the reset job did not end within {JOB_TIMEOUT_S:.0f} s"
        finally:
            self._running.difference_update(key)
            self.fm.set_resetting(key, False)
        finished_ms = int(self.fm.clock.now() * 1000)
        await asyncio.to_thread(self.store.finish_reset_attempt, attempt, outcome, code or None, finished_ms)
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
