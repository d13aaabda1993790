"""Structured files from outside the process, read within bounds (`ascend_common.jsonin`)."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from ascend_common.jsonin import MAX_BYTES, MAX_DEPTH, InputError, loads_bounded

log = logging.getLogger(__name__)


def read_bounded(path: Path, *, max_bytes: int = MAX_BYTES) -> bytes:
    """The file's bytes, never more than `max_bytes` read (`InputError` past them); `OSError` as
    `open` raises it. Symlinks are followed: a mounted ConfigMap is one."""
    with path.open("rb") as src:
        data = src.read(max_bytes + 1)
    if len(data) > max_bytes:
        raise InputError(f"{path}: over the limit of {max_bytes} bytes")
    return data


def read_json_file(path: Path, *, max_bytes: int = MAX_BYTES, max_depth: int = MAX_DEPTH) -> Any:
    """The parsed document; `InputError` (a `ValueError`) naming the path, or `OSError`."""
    return loads_bounded(
        read_bounded(path, max_bytes=max_bytes), what=str(path), max_bytes=max_bytes, max_depth=max_depth
    )


class BadInputs:
    """The optional inputs a service refused and runs without (/readyz `bad_inputs`): input name ->
    why. A refusal is logged when it is new or its reason changed, not at every read, so an input
    read at each request (a ConfigMap value) does not flood the log."""

    def __init__(self) -> None:
        self._bad: dict[str, str] = {}

    def refused(self, name: str, reason: str, message: str, path: Path | None = None) -> None:
        """`name` was refused for `reason`; `message` is the log line (what the service does instead)."""
        if self._bad.get(name) != reason:
            where = {} if path is None else {"path": str(path)}
            log.error(message, extra={"input": name, "error": reason, **where})
        self._bad[name] = reason

    def accepted(self, name: str) -> None:
        if self._bad.pop(name, None) is not None:
            log.info("input accepted again", extra={"input": name})

    def snapshot(self) -> dict[str, str]:
        return dict(self._bad)
