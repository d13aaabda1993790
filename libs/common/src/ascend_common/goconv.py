"""Go's strconv as the reference's parsers use it, so that a value it takes or refuses is taken or refused here."""

from __future__ import annotations

import re

_GO_INT = re.compile(r"[+-]?[0-9]+")  # strconv.Atoi: ASCII digits, an optional sign, nothing else
_INT64 = range(-(1 << 63), 1 << 63)


def atoi(text: str) -> int | None:
    """Go's strconv.Atoi on a 64-bit platform, None where it errs (no spaces, `_` or non-ASCII digits).

    fullmatch, not match with `$`, which would take a trailing newline; the length check keeps int()
    off inputs of thousands of digits.
    """
    if len(text) > 20 or not _GO_INT.fullmatch(text):
        return None
    value = int(text)
    return value if value in _INT64 else None
