"""Structured files from outside the process, read within bounds (`ascend_common.jsonin`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ascend_common.jsonin import MAX_BYTES, MAX_DEPTH, InputError, loads_bounded


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
