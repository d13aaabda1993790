"""Natural order of device ids: `Ascend910-2` before `Ascend910-10`.

Lists we show to people and pick from (preferred allocations, free cores) read best in natural
order; Go's `sort.Strings` order (plain code-point order) is used only where the reference's
output must be matched byte for byte.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

_DIGITS = re.compile(r"(\d+)")


def natural_key(text: str) -> tuple[tuple[int | str, ...], str]:
    """Sort key: digit runs compare as numbers; the text itself breaks ties (`01` vs `1`)."""
    parts = _DIGITS.split(text)
    # re.split with one capturing group puts digit runs at the odd positions, so every
    # position holds the same type in every key and tuples compare without TypeError.
    key = tuple(int(p) if i % 2 else p for i, p in enumerate(parts))
    return key, text


def natural_sorted(items: Iterable[str]) -> list[str]:
    return sorted(items, key=natural_key)
