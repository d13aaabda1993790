"""Go's strconv.Atoi as the reference's parsers meet it (pod annotations, hccn_tool output)."""

from __future__ import annotations

import pytest
from ascend_common.goconv import atoi


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("30", 30), ("+30", 30), ("-5", -5), ("007", 7), ("0", 0),
        (str((1 << 63) - 1), (1 << 63) - 1), (str(-(1 << 63)), -(1 << 63)),
        (str(1 << 63), None),
        ("1" * 21, None),  # longer than any int64: refused before int() reads it  # out of range: Atoi errs
        ("", None), ("+", None), (" 30", None), ("30 ", None), ("3_0", None), ("0x1e", None), ("30.0", None),
        ("\u0663", None),  # a non-ASCII digit Python's int() takes
        ("1e3", None),
    ],
)  # fmt: skip
def test_atoi_takes_and_refuses_what_go_does(text: str, value: int | None) -> None:
    assert atoi(text) == value
