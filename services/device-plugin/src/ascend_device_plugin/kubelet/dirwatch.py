"""Wake up when an entry of a directory is created or removed (Linux inotify, no polling).

The kubelet re-creates `kubelet.sock` when it restarts; inotify tells us within
microseconds and costs nothing while idle. Where inotify is unavailable (another OS, a
filesystem without it, the watch limit reached) callers fall back to polling.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import logging
import os
from pathlib import Path

log = logging.getLogger(__name__)
IN_CREATE = 0x00000100
IN_DELETE = 0x00000200
IN_MOVED_TO = 0x00000080
IN_NONBLOCK = 0o4000
IN_CLOEXEC = 0o2000000


class DirWatch:
    def __init__(self, path: Path) -> None:
        self.path = path
        self._fd: int | None = None
        self._event = asyncio.Event()

    @property
    def active(self) -> bool:
        return self._fd is not None

    def start(self) -> bool:
        """Start watching; False when inotify cannot be used (then poll)."""
        try:
            libc = ctypes.CDLL(None, use_errno=True)
            fd = libc.inotify_init1(IN_NONBLOCK | IN_CLOEXEC)
            if fd < 0:
                raise OSError(ctypes.get_errno(), "inotify_init1")
            wd = libc.inotify_add_watch(fd, os.fsencode(self.path), IN_CREATE | IN_DELETE | IN_MOVED_TO)
            if wd < 0:
                err = ctypes.get_errno()
                os.close(fd)
                raise OSError(err, f"inotify_add_watch {self.path}")
        except (OSError, AttributeError) as exc:
            log.warning("inotify unavailable; polling the plugin dir", extra={"error": str(exc)})
            return False
        self._fd = fd
        asyncio.get_running_loop().add_reader(fd, self._readable)
        return True

    def _readable(self) -> None:
        assert self._fd is not None
        with contextlib.suppress(BlockingIOError):
            while os.read(self._fd, 65536):
                pass
        self._event.set()

    async def wait(self, within: float) -> None:
        """Return after a change in the directory, or after `within` seconds."""
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(within):
                await self._event.wait()
        self._event.clear()

    def stop(self) -> None:
        if self._fd is not None:
            asyncio.get_running_loop().remove_reader(self._fd)
            os.close(self._fd)
            self._fd = None
