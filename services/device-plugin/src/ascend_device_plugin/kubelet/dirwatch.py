"""Wake up when an entry of a directory is created or removed (Linux inotify, no polling).

The kubelet re-creates `kubelet.sock` when it restarts; inotify tells us within
microseconds and costs nothing while idle. Where inotify is unavailable (another OS, a
filesystem without it, the watch limit reached) callers fall back to polling.

A caller may watch only some names: the kubelet writes its checkpoint into the same directory
(a temporary file renamed over `kubelet_internal_checkpoint`) on every admission, and waking the
registrar for each of those competed with the admission for a core.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import logging
import os
import struct
from collections.abc import Callable
from pathlib import Path

log = logging.getLogger(__name__)
IN_CREATE = 0x00000100
IN_DELETE = 0x00000200
IN_MOVED_TO = 0x00000080
IN_NONBLOCK = 0o4000
IN_CLOEXEC = 0o2000000
IN_Q_OVERFLOW = 0x00004000
EVENT = struct.Struct("iIII")  # struct inotify_event without its name: wd, mask, cookie, len (inotify(7))


def names_of(events: bytes) -> list[str] | None:
    """The entry names in a read of inotify events; None after an overflow (events were lost)."""
    names, offset = [], 0
    while offset + EVENT.size <= len(events):
        _, mask, _, length = EVENT.unpack_from(events, offset)
        if mask & IN_Q_OVERFLOW:
            return None
        start = offset + EVENT.size
        names.append(os.fsdecode(events[start : start + length].rstrip(b"\0")))
        offset = start + length
    return names


class DirWatch:
    def __init__(self, path: Path, wanted: Callable[[str], bool] | None = None) -> None:
        """`wanted`: the entry names whose creation or removal wakes us (None: every name)."""
        self.path = path
        self.wanted = wanted
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
        wanted, wake = self.wanted, self.wanted is None
        with contextlib.suppress(BlockingIOError):
            while events := os.read(self._fd, 65536):
                if wanted is not None and not wake:
                    names = names_of(events)
                    wake = names is None or any(wanted(name) for name in names)
        if wake:
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
