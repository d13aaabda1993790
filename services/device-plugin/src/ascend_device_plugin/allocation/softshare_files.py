"""Soft share's files on the host, behind a small interface so the allocator and the cleanup are
testable without root: the per-pod quota directories under the npu-info directory
(`<npu-info-dir>/<ns>.<job>/<phy>_<vid>/npu_info.config`, the reference's /etc/enpu) and the
chips' shared-memory files (`<softShareDevConfigDir>/<phy>/<dieId>`).

Every method blocks (file system calls): callers run them in a thread (softshare_dirs.py).
Modes are set with chmod after creation, so the process umask does not change them.
"""

from __future__ import annotations

import contextlib
import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from ascend_device_plugin.core.softshare_cleanup import Listing, PodDir
from ascend_device_plugin.core.softshare_pod import NPU_INFO_FILE, shm_host_path

DIR_MODE = 0o755  # api.DefaultSoftShareDeviceConfigDirPerm
FILE_MODE = 0o644  # api.DefaultSoftShareDeviceConfigPerm
SHM_MODE = 0o666  # common.DefaultPerm: every pod of the chip writes it


class SoftShareFiles(Protocol):
    def npu_info_dir_ready(self) -> bool:
        """The npu-info directory exists (it is never created: a missing one is a deployment error)."""

    def listing(self, jobs: frozenset[str] | None = None) -> Listing:
        """The npu-info directory's subdirectories (only `jobs` when given) and their entries."""

    def pod_path(self, found: PodDir) -> Path:
        """Where a pod's directory is on the host."""

    def write_pod_dir(self, found: PodDir, text: str) -> None:
        """Make the job's directory if needed and the pod's (which must not exist), and write its
        quota file; on failure, remove what this call made and raise OSError."""

    def ensure_shm(self, phy: int, die: str) -> Path:
        """The chip's shared-memory file, made empty if missing; its path."""

    def remove_pod_dir(self, found: PodDir) -> None:
        """Remove a pod's directory and what is in it (gone already: nothing to do)."""

    def remove_job_dir(self, job: str) -> None:
        """Remove a job's directory if it is empty (gone already: nothing to do)."""


@dataclass(frozen=True)
class HostFiles:
    npu_info_dir: Path
    config_dir: Path

    def npu_info_dir_ready(self) -> bool:
        return self.npu_info_dir.is_dir()

    def listing(self, jobs: frozenset[str] | None = None) -> Listing:
        found: dict[str, dict[str, bool]] = {}
        try:
            tops = [e for e in os.scandir(self.npu_info_dir) if jobs is None or e.name in jobs]
        except FileNotFoundError:
            return found
        for top in tops:
            if not top.is_dir(follow_symlinks=False):
                continue
            try:
                found[top.name] = {e.name: e.is_dir(follow_symlinks=False) for e in os.scandir(top.path)}
            except (FileNotFoundError, NotADirectoryError):
                continue  # removed meanwhile
        return found

    def pod_path(self, found: PodDir) -> Path:
        return self.npu_info_dir / found.job / found.name

    def write_pod_dir(self, found: PodDir, text: str) -> None:
        job = self.npu_info_dir / found.job
        made_job = False
        pod = job / found.name
        try:
            with contextlib.suppress(FileExistsError):
                job.mkdir()
                made_job = True
                job.chmod(DIR_MODE)
            pod.mkdir()  # FileExistsError: a vid in use after all; refused, never overwritten
            pod.chmod(DIR_MODE)
            path = pod / NPU_INFO_FILE
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, FILE_MODE)
            with os.fdopen(fd, "w", encoding="utf-8") as out:
                out.write(text)
            path.chmod(FILE_MODE)
        except OSError:
            if pod.exists():
                shutil.rmtree(pod, ignore_errors=True)
            if made_job:
                with contextlib.suppress(OSError):
                    job.rmdir()
            raise

    def ensure_shm(self, phy: int, die: str) -> Path:
        path = Path(shm_host_path(self.config_dir, phy, die))
        chip_dir = path.parent
        if not chip_dir.is_dir():
            chip_dir.mkdir(parents=True, exist_ok=True)
            chip_dir.chmod(DIR_MODE)
        with contextlib.suppress(FileExistsError):
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, SHM_MODE)
            os.close(fd)
            path.chmod(SHM_MODE)
        return path

    def remove_pod_dir(self, found: PodDir) -> None:
        path = self.pod_path(found)
        if path.is_symlink() or not path.is_dir():
            return  # gone, or not a directory we made: never followed
        shutil.rmtree(path)

    def remove_job_dir(self, job: str) -> None:
        with contextlib.suppress(FileNotFoundError):
            (self.npu_info_dir / job).rmdir()
