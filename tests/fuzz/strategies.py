"""Hypothesis strategies shared by the fuzz tests: hostile text, JSON, and mutations of valid examples."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from hypothesis import strategies as st

# Characters that trip parsers: separators, whitespace a regex `$` or str.strip()
# treats specially, digits of other scripts that `\d` and int() accept, a lone surrogate, NUL.
NASTY_CHARS = (
    "\n", "\r", "\t", " ", "\x00", "\x0b", "\u00a0", "\u2028", ",", "-", "_", ".", "+", "0", "9",
    "\u0663", "\uff13", "\u00b2", "é", "\ud800", "\ufeff", "[", "]", "{", "}", '"', "\\",
)  # fmt: skip

_OTHER_DIGITS = [
    str.maketrans("0123456789", digits)
    for digits in (
        "".join(chr(0x660 + d) for d in range(10)),  # Arabic-Indic
        "".join(chr(0xFF10 + d) for d in range(10)),  # fullwidth
        "".join(chr(0x7C0 + d) for d in range(10)),  # NKo
    )
]

nasty_char = st.sampled_from(NASTY_CHARS)
any_text = st.text(st.characters() | nasty_char, max_size=120)

T = TypeVar("T")
KEYS = st.text(max_size=12)
json_leaf = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.integers(-(2**70), 2**70)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=20)
)
json_values = st.recursive(
    json_leaf,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner, max_size=4),
    max_leaves=12,
)


@dataclass(frozen=True)
class Outcome(Generic[T]):
    value: T | None
    error: Exception | None


def outcome(fn: Callable[..., T], *args: Any, errors: tuple[type[Exception], ...] = (ValueError,)) -> Outcome[T]:
    """Call `fn`; its result, or the exception if it is one of the documented `errors` (anything else propagates)."""
    try:
        return Outcome(fn(*args), None)
    except errors as exc:
        return Outcome(None, exc)


@st.composite
def mutated_text(draw: st.DrawFn, examples: Sequence[str], alphabet: st.SearchStrategy[str] = nasty_char) -> str:
    """A valid example with a few character-level edits: inserts, deletes, replacements, repeats."""
    text = draw(st.sampled_from(list(examples)))
    for _ in range(draw(st.integers(0, 4))):
        pos = draw(st.integers(0, len(text)))
        op = draw(st.sampled_from(("insert", "delete", "replace", "repeat", "cut", "script", "newline")))
        if op == "script":
            # Digits of another script: `\d` and int() take them, Go and the reference do not.
            end = draw(st.integers(pos, len(text)))
            text = text[:pos] + text[pos:end].translate(draw(st.sampled_from(_OTHER_DIGITS))) + text[end:]
        elif op == "newline":
            text += "\n"  # what a regex `$` quietly accepts
        elif op == "insert":
            text = text[:pos] + draw(alphabet | st.characters()) + text[pos:]
        elif op == "delete":
            text = text[:pos] + text[pos + 1 :]
        elif op == "replace":
            text = text[:pos] + draw(alphabet) + text[pos + 1 :]
        elif op == "repeat":
            end = draw(st.integers(pos, len(text)))
            text = text[:end] + text[pos:end] + text[end:]
        else:
            text = text[:pos]
    return text


def _paths(node: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [prefix]
    if isinstance(node, dict):
        for key, value in node.items():
            out.extend(_paths(value, (*prefix, key)))
    elif isinstance(node, list):
        for index, value in enumerate(node):
            out.extend(_paths(value, (*prefix, index)))
    return out


def _parent(doc: Any, path: tuple[Any, ...]) -> Any:
    for step in path[:-1]:
        doc = doc[step]
    return doc


@st.composite
def mutated_json(draw: st.DrawFn, doc: Any, values: st.SearchStrategy[Any], keys: st.SearchStrategy[str] = KEYS) -> Any:
    """`doc` with 1-3 structural edits anywhere in it: a key or item deleted, a value replaced by one of
    `values` (wrong types, bad numbers, bad codes), an item duplicated, an unknown key added."""
    doc = copy.deepcopy(doc)
    for _ in range(draw(st.integers(1, 3))):
        paths = _paths(doc)
        path = draw(st.sampled_from(paths))
        op = draw(st.sampled_from(("delete", "replace", "duplicate", "add_key")))
        if not path:
            if op == "replace":
                return draw(values)
            if op == "add_key" and isinstance(doc, dict):
                doc[draw(keys)] = draw(values)
            continue
        parent, last = _parent(doc, path), path[-1]
        if op == "delete":
            del parent[last]
        elif op == "replace":
            parent[last] = draw(values)
        elif op == "duplicate" and isinstance(parent, list):
            parent.insert(draw(st.integers(0, len(parent))), copy.deepcopy(parent[last]))
        elif op == "add_key" and isinstance(parent[last], dict):
            parent[last][draw(keys)] = draw(values)
        elif isinstance(parent, list):
            parent[last] = draw(values)
    return doc


@st.composite
def damaged_bytes(draw: st.DrawFn, doc: Any) -> bytes:
    """The JSON text of `doc`, then damaged at the byte level: truncated, a stray byte, another
    encoding, a BOM, nesting deeper than any parser's stack, a number too long to convert."""
    data = json.dumps(doc).encode()
    how = draw(
        st.sampled_from(("truncate", "byte", "utf16", "utf32", "bom", "deep_array", "deep_object", "long_int", "nan"))
    )
    if how == "truncate":
        return data[: draw(st.integers(0, max(0, len(data) - 1)))]
    if how == "byte":
        pos = draw(st.integers(0, len(data)))
        return data[:pos] + bytes([draw(st.integers(0, 255))]) + data[pos:]
    if how == "utf16":
        return json.dumps(doc).encode("utf-16")
    if how == "utf32":
        return json.dumps(doc).encode("utf-32-le")
    if how == "bom":
        return b"\xef\xbb\xbf" + data
    depth = draw(st.integers(500, 50_000))
    if how == "deep_array":
        return b"[" * depth + b"]" * depth
    if how == "deep_object":
        return b'{"a":' * depth + b"1" + b"}" * depth
    if how == "long_int":
        return b'{"x": ' + b"7" * draw(st.integers(4_000, 20_000)) + b"}"
    return b'{"x": NaN, "y": -Infinity}'
