"""Writes and removals under host directories that other users or pods may also write.

The services run as root; a path resolved by name could be redirected by a symlink planted in any
of its components (or at a temporary file's name) to a file or directory anywhere on the host.
So nothing here resolves a path by name below the operator's root: the root is opened once (it may
be a symlink: the operator chose it), each component below it is opened relative to its parent's
descriptor with O_NOFOLLOW, a temporary file gets a random name and O_EXCL, modes are set with
fchmod on the descriptor, and the rename stays inside one directory descriptor. A component that is
a symlink raises `UnsafePath` and nothing is written; callers log it with the path.

Every call blocks: services run them in a thread.
"""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
import stat
from collections.abc import Iterator, Sequence
from pathlib import Path, PurePosixPath
from types import TracebackType

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_NEW_FILE_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC


class UnsafePath(OSError):
    """A path the services refuse to write through: a component is a symlink, or a name is not a
    single plain component (empty, `.`, `..`, a `/` or a NUL in it)."""


def check_name(name: str) -> str:
    """`name` when it is one plain path component; UnsafePath otherwise."""
    if name in ("", ".", "..") or "/" in name or "\0" in name:
        raise UnsafePath(errno.EINVAL, "not a single path component", name[:120])
    return name


def _parts(rel: str | PurePosixPath) -> list[str]:
    text = str(rel)
    if text.startswith("/"):
        raise UnsafePath(errno.EINVAL, "not relative to its root", text[:200])
    # PurePosixPath would drop `.` and fold `//`: check the text as given, component by component.
    return [check_name(p) for p in text.split("/")]


class HostDir:
    """An open directory: every operation is relative to its descriptor and follows no symlink."""

    def __init__(self, fd: int, path: Path) -> None:
        self.fd = fd
        self.path = path  # for messages only; never opened by name

    @classmethod
    def root(cls, root: Path, *, create_mode: int | None = None) -> HostDir:
        """The operator's configured directory, opened as configured (a symlink to a directory is
        followed: that was the operator's choice). `create_mode`: made, with its parents, when
        missing (the operator's path, so by name)."""
        if create_mode is not None:
            root.mkdir(mode=create_mode, parents=True, exist_ok=True)
        return cls(os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC), root)

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def __enter__(self) -> HostDir:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.close()

    def _refuse_if_link(self, name: str, error: OSError) -> None:
        try:
            link = stat.S_ISLNK(os.stat(name, dir_fd=self.fd, follow_symlinks=False).st_mode)
        except OSError:
            return  # gone meanwhile: the caller's own error stands
        if link:
            raise UnsafePath(errno.ELOOP, "a symlink where a directory or file was expected",
                             str(self.path / name)) from error  # fmt: skip

    def sub(self, name: str, *, create_mode: int | None = None, set_mode: bool = False,
            exclusive: bool = False) -> HostDir:  # fmt: skip
        """The directory `name` in this one, never through a symlink. Missing: made with
        `create_mode` (fchmod, so the umask plays no part) when given, FileNotFoundError otherwise.
        `set_mode`: an existing directory gets `create_mode` too. `exclusive`: it must be made
        here (FileExistsError when anything has the name)."""
        check_name(name)
        made = False
        if create_mode is not None:
            try:
                os.mkdir(name, 0o700, dir_fd=self.fd)
                made = True
            except FileExistsError:
                if exclusive:
                    raise
        try:
            fd = os.open(name, _DIR_FLAGS, dir_fd=self.fd)
        except OSError as exc:
            if exc.errno in (errno.ELOOP, errno.ENOTDIR):
                self._refuse_if_link(name, exc)
            raise
        child = HostDir(fd, self.path / name)
        try:
            if create_mode is not None and (made or set_mode):
                os.fchmod(fd, create_mode)
        except BaseException:
            child.close()
            raise
        return child

    def walk(self, rel: str | PurePosixPath, *, create_mode: int | None = None, set_mode: bool = False) -> HostDir:
        """The directory `rel` (components separated by `/`) below this one, each step as `sub`.
        An empty `rel` is this directory again (a second descriptor)."""
        current = HostDir(os.dup(self.fd), self.path)
        if str(rel) in ("", "."):
            return current
        for name in _parts(rel):
            try:
                nxt = current.sub(name, create_mode=create_mode, set_mode=set_mode)
            finally:
                current.close()
            current = nxt
        return current

    def read(self, name: str, limit: int) -> bytes:
        """At most `limit` + 1 bytes of the regular file `name` (FileNotFoundError when missing)."""
        check_name(name)
        try:
            fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK, dir_fd=self.fd)
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                self._refuse_if_link(name, exc)
            raise
        with os.fdopen(fd, "rb") as f:
            if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
                raise UnsafePath(errno.EINVAL, "not a regular file", str(self.path / name))
            return f.read(limit + 1)

    def _new_file(self, name: str, data: bytes, mode: int, *, fsync: bool) -> None:
        """Create `name` (O_EXCL: never an existing entry, never through a symlink); on a failure
        after creating it, remove it again."""
        fd = os.open(name, _NEW_FILE_FLAGS, 0o600, dir_fd=self.fd)
        try:
            with os.fdopen(fd, "wb") as out:
                out.write(data)
                out.flush()
                os.fchmod(out.fileno(), mode)
                if fsync:
                    os.fsync(out.fileno())
        except BaseException:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(name, dir_fd=self.fd)
            raise

    def write_atomically(self, name: str, data: bytes, mode: int, *, fsync: bool = True) -> None:
        """Replace the file `name` with `data` at `mode`: a fresh randomly named file, renamed over
        it, so a reader sees the old content or the new, and a planted name is never opened."""
        check_name(name)
        tmp = f".{name}.{secrets.token_hex(8)}.tmp"
        self._new_file(tmp, data, mode, fsync=fsync)
        try:
            os.replace(tmp, name, src_dir_fd=self.fd, dst_dir_fd=self.fd)
        except BaseException:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp, dir_fd=self.fd)
            raise

    def create(self, name: str, data: bytes, mode: int) -> None:
        """Create `name` holding `data` at `mode`; FileExistsError when anything has that name."""
        self._new_file(check_name(name), data, mode, fsync=False)

    def unlink(self, name: str) -> bool:
        """Remove the entry `name` if it is not a directory (a symlink itself goes, its target
        stays); False when it was not there."""
        check_name(name)
        try:
            os.unlink(name, dir_fd=self.fd)
        except FileNotFoundError:
            return False
        return True

    def rmdir(self, name: str) -> bool:
        """Remove the empty directory `name`; False when it was not there."""
        check_name(name)
        try:
            os.rmdir(name, dir_fd=self.fd)
        except FileNotFoundError:
            return False
        return True

    def remove_tree(self, name: str) -> bool:
        """Remove the directory `name` and everything in it, descending by descriptor only (a
        symlink inside is removed, never followed). False when it was not there; UnsafePath when
        `name` itself is a symlink (nothing removed)."""
        try:
            child = self.sub(name)
        except FileNotFoundError:
            return False
        with child:
            for entry, is_dir in list(child.entries()):
                if is_dir:
                    child.remove_tree(entry)
                else:
                    child.unlink(entry)
        return self.rmdir(name)

    def entries(self) -> Iterator[tuple[str, bool]]:
        """Each entry's name and whether it is a directory (a symlink is not one)."""
        with os.scandir(self.fd) as it:
            for entry in it:
                yield entry.name, entry.is_dir(follow_symlinks=False)


def _split(rel: str | PurePosixPath) -> tuple[str, str]:
    parts = _parts(rel)
    return "/".join(parts[:-1]), parts[-1]


def write_file(root: Path, rel: str | PurePosixPath, data: bytes, mode: int, *,
               dir_mode: int | None = 0o755, fsync: bool = True) -> None:  # fmt: skip
    """Replace `<root>/<rel>` atomically (`HostDir.write_atomically`), making `root` and missing
    directories below it with `dir_mode` (None: they must exist)."""
    folder, name = _split(rel)
    with HostDir.root(root, create_mode=dir_mode) as top, top.walk(folder, create_mode=dir_mode) as d:
        d.write_atomically(name, data, mode, fsync=fsync)


def read_file(root: Path, rel: str | PurePosixPath, limit: int) -> bytes:
    """At most `limit` + 1 bytes of `<root>/<rel>`, reached without following a symlink below `root`."""
    folder, name = _split(rel)
    with HostDir.root(root) as top, top.walk(folder) as d:
        return d.read(name, limit)


def remove_file(root: Path, rel: str | PurePosixPath) -> bool:
    """Remove `<root>/<rel>` (not a directory) reached without following a symlink; False when it
    or its directory is not there."""
    folder, name = _split(rel)
    try:
        with HostDir.root(root) as top, top.walk(folder) as d:
            return d.unlink(name)
    except FileNotFoundError:
        return False


def join_under(root: Path, parts: Sequence[str]) -> Path:
    """`root` joined with checked single components: a path built from names that came from
    outside stays under its root (UnsafePath otherwise)."""
    return root.joinpath(*(check_name(p) for p in parts))
