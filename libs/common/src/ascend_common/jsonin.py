"""JSON from outside the process (a file on the host, a ConfigMap value, a checkpoint), parsed
within bounds: a size, a nesting depth, strict UTF-8.

Every failure is an `InputError` (a `ValueError`), so a reader has one exception to turn into its
refusal. `json.loads` alone raises `RecursionError` on deep nesting (a 50 KB file is enough),
`MemoryError` on a huge one and `UnicodeDecodeError` on bad bytes; a caller that caught only
`ValueError` crashed on the first of them.
"""

from __future__ import annotations

import json
from typing import Any

MAX_BYTES = 1 << 20
# Deeper than any format we read needs (the deepest, the fault policy, nests 5), far below the
# parser's own stack.
MAX_DEPTH = 64


class InputError(ValueError):
    """Input refused: what it is, and why."""


def loads_bounded(
    data: bytes | str,
    *,
    what: str,
    max_bytes: int = MAX_BYTES,
    max_depth: int = MAX_DEPTH,
) -> Any:
    """The parsed document, or `InputError` naming `what` (a path, a ConfigMap key)."""
    size = len(data.encode("utf-8", "surrogatepass") if isinstance(data, str) else data)
    if size > max_bytes:
        raise InputError(f"{what}: {size} bytes, over the limit of {max_bytes}")
    if isinstance(data, bytes):
        try:
            data = data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise InputError(f"{what}: not UTF-8 ({exc.reason} at byte {exc.start})") from None
    try:
        doc = json.loads(data)
    # ValueError: syntax, and an integer literal over 4300 digits; RecursionError: nesting deeper
    # than the parser's stack; MemoryError: caught so that no input can take a reader down.
    except (ValueError, RecursionError, MemoryError) as exc:
        if isinstance(exc, RecursionError):
            raise InputError(f"{what}: nested deeper than the limit of {max_depth}") from None
        raise InputError(f"{what}: not valid JSON: {exc}") from None
    depth = nesting(doc)
    if depth > max_depth:
        raise InputError(f"{what}: nested {depth} deep, over the limit of {max_depth}")
    return doc


def nesting(doc: Any) -> int:
    """How deep lists and objects nest in a parsed document (a scalar is 0), level by level
    rather than by recursion, which is what deep input exploits."""
    depth = 0
    level = [doc] if isinstance(doc, (dict, list)) else []
    while level:
        depth += 1
        children: list[Any] = []
        for node in level:
            children.extend(node.values() if isinstance(node, dict) else node)
        level = [child for child in children if isinstance(child, (dict, list))]
    return depth
