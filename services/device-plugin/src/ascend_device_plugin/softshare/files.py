"""Soft share's files on the host, behind a small interface so the allocator and the cleanup are
testable without root: the per-pod quota directories under the npu-info directory
(`<npu-info-dir>/<ns>.<job>/<phy>_<vid>/npu_info.config`, the reference's /etc/enpu) and the
chips' shared-memory files (`<softShareDevConfigDir>/<phy>/<dieId>`).

Every method blocks (file system calls): callers run them in a thread (softshare_dirs.py).
Everything below the two configured directories goes through ascend_common.adapters.hostfs: pods
write the shared-memory directory, so no write, chmod or removal may follow a symlink planted
there. Modes are set with fchmod, so the process umask does not change them.

Each pod directory also holds OWNER_FILE, the uid of the pod the plugin made it for: the cleanup
decides from it, not from the pod's annotations, which whoever may edit the pod can change.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from ascend_common.adapters.hostfs import HostDir, UnsafePath

from ascend_device_plugin.softshare.cleanup import Listing, PodDir
from ascend_device_plugin.softshare.pod import NPU_INFO_FILE, shm_host_path

DIR_MODE = 0o755  # api.DefaultSoftShareDeviceConfigDirPerm
FILE_MODE = 0o644  # api.DefaultSoftShareDeviceConfigPerm
SHM_MODE = 0o666  # common.DefaultPerm: every pod of the chip writes it
OWNER_FILE = ".pod-uid"  # ours: which pod the directory was made for (not in the reference)
MAX_OWNER_BYTES = 128


class SoftShareFiles(Protocol):
    def npu_info_dir_ready(self) -> bool:
        """The npu-info directory exists (it is never created: a missing one is a deployment error)."""

    def listing(self, jobs: frozenset[str] | None = None) -> Listing:
        """The npu-info directory's subdirectories (only `jobs` when given) and their entries."""

    def owners(self, dirs: Iterable[PodDir]) -> dict[PodDir, str | None]:
        """The pod uid each directory was made for (None: the directory holds no record of it)."""

    def pod_path(self, found: PodDir) -> Path:
        """Where a pod's directory is on the host."""

    def write_pod_dir(self, found: PodDir, text: str, owner: str) -> None:
        """Make the job's directory if needed and the pod's (which must not exist), and write its
        owner record and quota file; on failure, remove what this call made and raise OSError."""

    def ensure_shm(self, phy: int, die: str) -> Path:
        """The chip's shared-memory file, made empty if missing; its path."""

    def remove_pod_dir(self, found: PodDir) -> None:
        """Remove a pod's directory and what is in it (gone already: nothing to do; a symlink in
        its place: UnsafePath, nothing removed)."""

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
            top = HostDir.root(self.npu_info_dir)
        except FileNotFoundError:
            return found
        with top:
            for name, is_dir in list(top.entries()):
                if not is_dir or (jobs is not None and name not in jobs):
                    continue
                try:
                    with top.sub(name) as job:
                        found[name] = dict(job.entries())
                except (FileNotFoundError, NotADirectoryError, UnsafePath):
                    continue  # removed or replaced meanwhile
        return found

    def owners(self, dirs: Iterable[PodDir]) -> dict[PodDir, str | None]:
        result: dict[PodDir, str | None] = {}
        with HostDir.root(self.npu_info_dir) as top:
            for found in dirs:
                try:
                    with top.walk(f"{found.job}/{found.name}") as pod:
                        raw = pod.read(OWNER_FILE, MAX_OWNER_BYTES)
                    text = raw.decode("ascii").strip() if len(raw) <= MAX_OWNER_BYTES else ""
                except (OSError, UnicodeDecodeError):
                    text = ""
                result[found] = text or None
        return result

    def pod_path(self, found: PodDir) -> Path:
        return self.npu_info_dir / found.job / found.name

    def write_pod_dir(self, found: PodDir, text: str, owner: str) -> None:
        with HostDir.root(self.npu_info_dir) as top:
            made_job = False
            try:
                job = top.sub(found.job, create_mode=DIR_MODE, exclusive=True)
                made_job = True
            except FileExistsError:
                job = top.sub(found.job)
            with job:
                made_pod = False
                try:
                    # FileExistsError: a vid in use after all; refused, never overwritten.
                    with job.sub(found.name, create_mode=DIR_MODE, exclusive=True) as pod:
                        made_pod = True
                        pod.create(OWNER_FILE, f"{owner}\n".encode(), FILE_MODE)
                        pod.create(NPU_INFO_FILE, text.encode(), FILE_MODE)
                except OSError:
                    if made_pod:
                        with contextlib.suppress(OSError):
                            job.remove_tree(found.name)
                    if made_job:
                        with contextlib.suppress(OSError):
                            top.rmdir(found.job)
                    raise

    def ensure_shm(self, phy: int, die: str) -> Path:
        path = Path(shm_host_path(self.config_dir, phy, die))
        with (
            HostDir.root(self.config_dir, create_mode=DIR_MODE) as top,
            top.sub(str(phy), create_mode=DIR_MODE) as chip_dir,
            contextlib.suppress(FileExistsError),
        ):
            chip_dir.create(path.name, b"", SHM_MODE)
        return path

    def remove_pod_dir(self, found: PodDir) -> None:
        try:
            with HostDir.root(self.npu_info_dir) as top, top.sub(found.job) as job:
                job.remove_tree(found.name)
        except (FileNotFoundError, NotADirectoryError):
            return

    def remove_job_dir(self, job: str) -> None:
        with HostDir.root(self.npu_info_dir) as top:
            top.rmdir(job)
