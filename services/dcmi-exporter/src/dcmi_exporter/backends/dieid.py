"""A chip's die id as text, the way the reference writes it (pure; shared by the ctypes and sim backends).

The library answers `struct dcmi_die_id { unsigned int soc_die[5]; }` for one die type
(`dcmi_get_device_die_v2(card, dev, type, ...)`, v2: `dcmiv2_get_device_die_id(logic, type, ...)`).
The reference (ascend-common devmanager/dcmi `DcGetDieID`, v1 and v2 alike) turns each word into
lower-case hex with `strconv.FormatUint(w, 16)`, pads it with `fmt.Sprintf("%08s", ...)`, joins the
five with "-" and upper-cases the whole: `00000001-0000ABCD-00000000-00000000-00000012`.

`%08s` pads a string with zeros in the Go the reference builds with (go.mod: go 1.26) as in Go
1.19; tests/golden/die_id_vectors.go pins that against a real Go toolchain.
"""

from __future__ import annotations

from collections.abc import Sequence
from enum import IntEnum
from typing import Final

DIE_ID_WORDS: Final = 5  # the reference's DieIDCount, DIE_ID_COUNT of the header
_WORD_MAX: Final = 0xFFFFFFFF


class DieType(IntEnum):
    """enum dcmi_die_type (the reference's dcmi.DieType)."""

    NDIE = 0  # only the 910 has one
    VDIE = 1  # the chip's uuid: the npu-exporter's `vdie_id` label
    DDIE = 2  # the 950's uuid (v2 library only): the soft-share `shm-id` on that family


def format_die_id(words: Sequence[int]) -> str:
    """The reference's text of the five die-id words; ValueError for any other count or a non-uint32."""
    if len(words) != DIE_ID_WORDS:
        raise ValueError(f"a die id has {DIE_ID_WORDS} words, got {len(words)}")
    for word in words:
        # bool is an int subclass; a True here is a caller's mistake, not a word.
        if isinstance(word, bool) or not isinstance(word, int) or not 0 <= word <= _WORD_MAX:
            raise ValueError(f"die-id word {word!r} is not a uint32")
    return "-".join(f"{word:08X}" for word in words)
