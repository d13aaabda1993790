"""Soft share's per-pod directories over time: made by Allocate (a fresh vid per chip), removed
with their pods (softshare/cleanup.py's rule), swept once the first pod list is in.

One lock orders every step that lists and then writes or removes: two Allocates for one chip
must not take the same vid, and a cleanup must not list a directory an Allocate has just made
before it knows the directory is held. The file system calls run in a thread (they block).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Container, Coroutine, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ascend_device_plugin.model.chip_pod import PodView
from ascend_device_plugin.softshare.cleanup import PodDir, active, held_dirs, job_of, removals
from ascend_device_plugin.softshare.files import SoftShareFiles
from ascend_device_plugin.softshare.pod import is_job_dir, is_pod_dir, next_vid, pod_dir_name, vids_of

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Made:
    found: PodDir
    vid: int
    path: Path  # the pod's directory on the host
    shm: Path  # the chip's shared-memory file on the host


@dataclass
class SoftShareDirs:
    files: SoftShareFiles
    pods: Callable[[], Iterable[PodView]] = list  # the pod cache (none without a cluster)
    # Pod uid -> the directory Allocate gave it, until the pod is gone: its report (vnpuId) may not
    # have reached the cache yet, and a cleanup must not take a live pod's directory meanwhile.
    _handed_out: dict[str, PodDir] = field(default_factory=dict)
    _lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    _tasks: set[asyncio.Task[None]] = field(default_factory=set)

    async def ready(self) -> bool:
        return await asyncio.to_thread(self.files.npu_info_dir_ready)

    async def make(self, pod: PodView, job: str, phy: int, die: str, text: Callable[[int], str]) -> Made:
        """Give `pod` a directory for chip `phy`: the next free vid, the quota file `text(vid)`, the
        chip's shared-memory file. OSError when the host refuses (nothing of the pod's left then)."""
        async with self._lock:
            listing = await asyncio.to_thread(self.files.listing)
            names = {top: [name for name, is_dir in entries.items() if is_dir] for top, entries in listing.items()}
            vid = next_vid(vids_of(names, phy))
            found = PodDir(job, pod_dir_name(phy, vid))
            shm = await asyncio.to_thread(self.files.ensure_shm, phy, die)
            await asyncio.to_thread(self.files.write_pod_dir, found, text(vid), pod.uid)
            self._handed_out[pod.uid] = found
        log.info("soft-share directory made", extra={"pod": pod.key, "dir": str(found), "vid": vid})
        return Made(found, vid, self.files.pod_path(found), shm)

    def pod_gone(self, pod: PodView) -> None:
        """A pod was deleted or finished: if it held a soft-share directory, clean up its job's."""
        handed = self._handed_out.pop(pod.uid, None)
        job = handed.job if handed is not None else job_of(pod)
        if job is not None:
            self._in_background(self.clean(frozenset({job})), f"soft-share-clean-{job}")

    def forget(self, present: Container[str]) -> None:
        """Drop the handed-out directories of pods the cache no longer has (a missed deletion)."""
        for uid in [uid for uid in self._handed_out if uid not in present]:
            del self._handed_out[uid]

    async def clean(self, jobs: frozenset[str] | None = None) -> list[str]:
        """Remove the directories no active pod holds (only under `jobs` when given; all: the sweep).
        Returns what was removed, relative to the npu-info directory."""
        removed: list[str] = []
        async with self._lock:
            listing = await asyncio.to_thread(self.files.listing, jobs)
            dirs = [PodDir(job, name) for job, entries in listing.items() for name, is_dir in entries.items()
                     if is_dir and is_job_dir(job) and is_pod_dir(name)]  # fmt: skip
            owners = await asyncio.to_thread(self.files.owners, dirs)
            pods = list(self.pods())
            pod_dirs, job_dirs = removals(listing, held_dirs(pods, self._handed_out.values(), owners))
            # From now on a pod's deletion finds its directory's job from the record, not its labels.
            live = {p.uid: p for p in pods if active(p)}
            for where, uid in owners.items():
                if uid in live and where not in pod_dirs:
                    self._handed_out.setdefault(uid, where)
            for found in pod_dirs:
                try:
                    await asyncio.to_thread(self.files.remove_pod_dir, found)
                except OSError as exc:
                    log.error("soft-share directory not removed", extra={"dir": str(found), "error": str(exc)})
                    continue
                removed.append(str(found))
                log.info("soft-share directory removed", extra={"dir": str(found)})
            for job in job_dirs:
                try:
                    await asyncio.to_thread(self.files.remove_job_dir, job)
                except OSError as exc:  # not empty after all, or not ours to remove
                    log.warning("soft-share job directory not removed", extra={"dir": job, "error": str(exc)})
                    continue
                removed.append(job)
                log.info("soft-share job directory removed", extra={"dir": job})
        return removed

    async def sweep_when(self, synced: Callable[[float], Awaitable[bool]]) -> None:
        """The sweep, once the pod cache has its first list (before, every directory looks unheld)."""
        while not await synced(30.0):
            log.warning("soft-share sweep waits for the first pod list")
        await self.clean()

    def _in_background(self, work: Coroutine[Any, Any, list[str]], name: str) -> None:
        task = asyncio.create_task(self._logged(work), name=name)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _logged(self, work: Coroutine[Any, Any, list[str]]) -> None:
        try:
            await work
        except Exception:  # the next deletion or restart tries again
            log.exception("soft-share cleanup failed")

    async def drain(self) -> None:
        """Wait for the cleanups started so far."""
        while self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)

    async def stop(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
