"""No logging call of ours passes an `extra` key that collides with a LogRecord attribute (issue 32
item 5): logging raises KeyError ("Attempt to overwrite 'args' in LogRecord") for such a key, but only
when the record is made, i.e. at the level the call logs at, so a DEBUG line breaks its caller only
at DEBUG. The check walks the source of every shipped package, the tools and the bench, and reads
every `extra={...}` literal and `extra=dict(...)` call. Ruff's G101 says the same for loggers it
recognises by name; this check does not depend on the name (`self._log`, a logger passed in)."""

from __future__ import annotations

import ast
import logging
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
# LogRecord's own attributes, as this Python makes them, and the two the formatters add.
RESERVED = frozenset(vars(logging.LogRecord("n", logging.INFO, "p", 1, "m", None, None))) | {"message", "asctime"}


def sources() -> Iterator[Path]:
    for root in [*sorted((ROOT / "services").glob("*/src")), ROOT / "libs/common/src", ROOT / "tools", ROOT / "bench"]:
        yield from sorted(root.rglob("*.py"))


def extra_keys(node: ast.expr) -> Iterator[tuple[str, int]]:
    """The literal keys of an `extra=` value, with their line: a dict display's string keys (`**x`
    entries are other dicts, checked where they are built if they are literals) or `dict(k=...)`'s
    keywords."""
    if isinstance(node, ast.Dict):
        for key in node.keys:
            if isinstance(key, ast.Constant) and isinstance(key.value, str):
                yield key.value, key.lineno
    elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "dict":
        for keyword in node.keywords:
            if keyword.arg is not None:
                yield keyword.arg, node.lineno


def collisions(source: str, name: str) -> list[str]:
    """`<name>:<line>: '<key>'` for every `extra=` key of `source` that LogRecord already has."""
    found = []
    for node in ast.walk(ast.parse(source, name)):
        if not isinstance(node, ast.Call):
            continue
        for keyword in node.keywords:
            if keyword.arg == "extra":
                found += [f"{name}:{line}: {key!r}" for key, line in extra_keys(keyword.value) if key in RESERVED]
    return found


def test_no_extra_key_of_ours_collides_with_a_log_record_attribute() -> None:
    files = list(sources())
    assert len(files) > 100, "the walk found the source"
    found = [hit for path in files for hit in collisions(path.read_text(), str(path.relative_to(ROOT)))]
    assert not found, found


@pytest.mark.parametrize(
    ("source", "hits"),
    [
        # The line of issue 32: hccn.py's link read failure, which raised KeyError at DEBUG.
        ('log.debug("m", extra={"chip": c, "args": args, "error": e})', ["x.py:1: 'args'"]),
        ('self._log.info("m", extra=dict(name=n, ok=1))', ["x.py:1: 'name'"]),
        ('log.warning("m", extra={**fields, "message": m, "asctime": t})', ["x.py:1: 'message'", "x.py:1: 'asctime'"]),
        ('log.info("m", extra={"chip": c, "command": a, "error": e})', []),
        ('log.info("m", extra=fields)', []),  # not a literal: the dict is checked where it is a literal
    ],
)
def test_the_check_finds_a_colliding_key(source: str, hits: list[str]) -> None:
    assert collisions(source, "x.py") == hits


@pytest.mark.parametrize("key", ["args", "msg", "name", "levelname", "exc_info", "message", "asctime"])
def test_each_reserved_key_really_raises(key: str) -> None:
    logger = logging.getLogger("tests.log_extras")
    with pytest.raises(KeyError, match="Attempt to overwrite"):
        logger.makeRecord("n", logging.DEBUG, "p", 1, "m", (), None, extra={key: 1})
    assert key in RESERVED
