"""JSON exactly as Go's encoding/json (Go >= 1.22) writes it.

Consumers such as ClusterD hash or compare these strings, so the bytes must match:
- no spaces; struct fields in declaration order (pass a dict in that order); map keys sorted
  by their UTF-8 bytes (pass `go_map(d)`); a nil slice or pointer is `null` (pass None);
- strings: `\\"` `\\\\` and the short forms `\\b \\f \\n \\r \\t` (short \\b and \\f since Go 1.22),
  other control characters as `\\u00XX` (lower-case hex), `<` `>` `&` as `\\u003c \\u003e \\u0026`
  (HTML-safe escaping, Go's default), U+2028 / U+2029 escaped, DEL and all other non-ASCII kept
  as UTF-8; a lone surrogate (invalid UTF-8 in Go) becomes `\\ufffd`;
- float64: shortest round-trip digits, fixed notation for 1e-6 <= |f| < 1e21, else exponent
  form with `e-07` shortened to `e-7` (encode.go floatEncoder); NaN and infinities are errors.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Final, TypeAlias

GoJSON: TypeAlias = "bool | int | float | str | Sequence[GoJSON] | Mapping[str, GoJSON] | None"

_SHORT = {'"': '\\"', "\\": "\\\\", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t"}
_NEEDS_ESCAPE = re.compile('[\x00-\x1f"\\\\<>&\u2028\u2029\ud800-\udfff]')


def _escape(match: re.Match[str]) -> str:
    ch = match.group()
    short = _SHORT.get(ch)
    if short is not None:
        return short
    if "\ud800" <= ch <= "\udfff":
        return "\\ufffd"
    return f"\\u{ord(ch):04x}"


def go_string(text: str) -> str:
    return '"' + _NEEDS_ESCAPE.sub(_escape, text) + '"'


def go_float(value: float) -> str:
    if math.isnan(value) or math.isinf(value):
        raise ValueError(f"json: unsupported value: {value!r}")
    magnitude = abs(value)
    if magnitude != 0 and (magnitude < 1e-6 or magnitude >= 1e21):
        text = repr(value)  # Python's repr is the shortest round-trip form, 'e' with >= 2 exponent digits
        if len(text) >= 4 and text[-4] == "e" and text[-3] == "-" and text[-2] == "0":
            text = text[:-2] + text[-1]
        return text
    fixed = format(Decimal(repr(value)), "f")  # shortest digits, fixed notation
    if "." in fixed:
        fixed = fixed.rstrip("0").rstrip(".")
    return fixed


def go_json(obj: GoJSON) -> str:
    """Encode `obj` as Go's json.Marshal would encode the equivalent Go value."""
    parts: list[str] = []
    _encode(obj, parts)
    return "".join(parts)


def _encode(obj: GoJSON, out: list[str]) -> None:
    if obj is None:
        out.append("null")
    elif obj is True:
        out.append("true")
    elif obj is False:
        out.append("false")
    elif isinstance(obj, int):
        out.append(str(int(obj)))  # int() drops an IntEnum's name
    elif isinstance(obj, float):
        out.append(go_float(obj))
    elif isinstance(obj, str):
        out.append(go_string(obj))
    elif isinstance(obj, Sequence) and not isinstance(obj, bytes | bytearray):  # Go writes []byte as base64
        out.append("[")
        for index, item in enumerate(obj):
            if index:
                out.append(",")
            _encode(item, out)
        out.append("]")
    elif isinstance(obj, Mapping):
        out.append("{")
        for index, (key, item) in enumerate(obj.items()):
            if not isinstance(key, str):
                raise TypeError(f"json: object keys must be strings, got {type(key).__name__}")
            if index:
                out.append(",")
            out.append(go_string(key))
            out.append(":")
            _encode(item, out)
        out.append("}")
    else:
        raise TypeError(f"json: unsupported type {type(obj).__name__}")


def go_map(mapping: Mapping[str, GoJSON]) -> dict[str, GoJSON]:
    """A Go map's key order: sorted by UTF-8 bytes, which for valid text is code-point order."""
    return {key: mapping[key] for key in sorted(mapping)}


# --- Go integer fields ---------------------------------------------------------------------------

INT32: Final = (-(2**31), 2**31 - 1)
INT64: Final = (-(2**63), 2**63 - 1)  # also Go's int on a 64-bit node
UINT64: Final = (0, 2**64 - 1)


def go_int_field(value: int, name: str, bounds: tuple[int, int]) -> int:
    """`value` for the Go integer field `name` whose range is `bounds` (INT32, INT64, UINT64).

    bool is an int in Python but a different JSON type in Go, and a Go integer field overflows
    outside its width, so such a value could never come out of the reference: TypeError, ValueError.
    """
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be an integer, got {value!r}")
    low, high = bounds
    if not low <= value <= high:
        raise ValueError(f"{name} {value} is out of range ({low}..{high})")
    return int(value)


# --- Reading JSON as Go's json.Unmarshal into a struct would -----------------------------------


class GoObject(list[tuple[str, object]]):
    """A JSON object as its key/value pairs in document order (Go walks them in that order)."""


@dataclass(frozen=True, slots=True)
class GoNumber:
    """A number literal, kept as its text: Go decides by the target type whether it fits, and a long
    literal must not trip Python's int-digits limit (Go has none)."""

    text: str


def go_loads(text: str) -> object:
    """The document with objects as GoObject and numbers as GoNumber; ValueError("invalid JSON: ...")
    where Go's decoder fails (NaN and Infinity included) or the nesting is too deep for Python."""

    def reject(name: str) -> object:
        raise ValueError(f"{name} is not a JSON value")

    try:
        return json.loads(
            text, object_pairs_hook=GoObject, parse_int=GoNumber, parse_float=GoNumber, parse_constant=reject
        )
    except RecursionError:
        raise ValueError("invalid JSON: nested too deeply") from None
    except ValueError as exc:
        raise ValueError(f"invalid JSON: {exc}") from None


def go_int(value: GoNumber, bits: int) -> int | None:
    """The integer a GoNumber is for a Go int of `bits` bits, or None when Go refuses it (a fraction,
    an exponent, out of range)."""
    if not re.fullmatch(r"-?[0-9]{1,20}", value.text):  # past 20 digits no Go int fits
        return None
    number = int(value.text)
    return number if -(2 ** (bits - 1)) <= number < 2 ** (bits - 1) else None


def go_field(key: str, names: Iterable[str]) -> str | None:
    """The struct field a JSON key decodes into: an exact match, else one equal ignoring case under
    Unicode simple folding, under which only the Kelvin sign and the long s fold onto ASCII letters
    (str.lower would fold more: U+0130 and others)."""
    candidates = list(names)
    if key in candidates:
        return key
    folded = "".join(_FOLD_TO_ASCII.get(ch, ch.lower() if ch.isascii() else ch) for ch in key)
    return next((name for name in candidates if name.lower() == folded), None)


_FOLD_TO_ASCII = {"\u212a": "k", "\u017f": "s"}


def go_kind(value: object) -> str:
    """The JSON kind of a go_loads value, for messages."""
    if isinstance(value, GoObject):
        return "object"
    if isinstance(value, list):
        return "array"
    if isinstance(value, GoNumber):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, bool):
        return "bool"
    return "null"
