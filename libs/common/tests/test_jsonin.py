"""Bounded JSON (issue 32 item 3): every way outside input can break `json.loads` is one
`InputError` naming the input."""

from __future__ import annotations

from pathlib import Path
from typing import Any, cast

import httpx
import pytest
from ascend_common.adapters.inputs import BadInputs, read_bounded, read_json_file
from ascend_common.adapters.ops import ops_app
from ascend_common.jsonin import InputError, loads_bounded, nesting
from prometheus_client import CollectorRegistry


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ("[" * 50_000 + "]" * 50_000, "nested deeper than the limit of 64"),
        ('{"a":' * 50_000 + "1" + "}" * 50_000, "nested deeper than the limit of 64"),
        ("[" * 65 + "]" * 65, "nested 65 deep, over the limit of 64"),
        (b"\xff\xfe", "not UTF-8"),
        (b'{"a": "\xc3"}', "not UTF-8"),
        ("x" * ((1 << 20) + 1), "over the limit of 1048576"),
        ('{"a":', "not valid JSON"),
        ("1" * 5000, "not valid JSON"),  # an integer literal past Python's 4300 digits
        ("", "not valid JSON"),
    ],
)
def test_refused(data: bytes | str, message: str) -> None:
    with pytest.raises(InputError, match=message) as info:
        loads_bounded(data, what="hang.json")
    assert str(info.value).startswith("hang.json: ")
    assert isinstance(info.value, ValueError)


@pytest.mark.parametrize(
    ("data", "doc"),
    [
        ("[" * 64 + "]" * 64, eval("[" * 64 + "]" * 64)),
        ('{"a": "[[[{{{", "b": [1, {"c": null}]}', {"a": "[[[{{{", "b": [1, {"c": None}]}),
        (b'"\xc3\xa9"', "é"),
        ("3", 3),
    ],
)
def test_accepted(data: bytes | str, doc: object) -> None:
    assert loads_bounded(data, what="x") == doc


def test_limits_are_the_callers() -> None:
    with pytest.raises(InputError, match="over the limit of 4"):
        loads_bounded("[1, 2]", what="x", max_bytes=4)
    with pytest.raises(InputError, match="nested 2 deep, over the limit of 1"):
        loads_bounded("[[]]", what="x", max_depth=1)


@pytest.mark.parametrize(
    ("doc", "depth"),
    [(1, 0), ("s", 0), ([], 1), ({}, 1), ({"a": [1]}, 2), ([[], {"a": {"b": []}}], 4), ([1, [2, [3]], []], 3)],
)
def test_nesting(doc: object, depth: int) -> None:
    assert nesting(doc) == depth


def test_file_reader(tmp_path: Path) -> None:
    good = tmp_path / "good.json"
    good.write_text('{"a": 1}')
    link = tmp_path / "link.json"
    link.symlink_to(good)  # a mounted ConfigMap's key is a symlink
    assert read_json_file(link) == {"a": 1}
    big = tmp_path / "big.json"
    big.write_bytes(b" " * 11)
    with pytest.raises(InputError, match=f"{big}: over the limit of 10 bytes"):
        read_bounded(big, max_bytes=10)
    deep = tmp_path / "deep.json"
    deep.write_text("[" * 50_000 + "]" * 50_000)
    with pytest.raises(InputError, match=f"^{deep}: nested deeper"):
        read_json_file(deep)
    with pytest.raises(FileNotFoundError):
        read_json_file(tmp_path / "missing.json")


def test_bad_inputs_log_a_refusal_once_per_reason(caplog: pytest.LogCaptureFixture) -> None:
    bad = BadInputs()
    for _ in range(3):  # read at every request: one line, not three
        bad.refused("slow", "cm k: nested deeper than the limit of 64", "value refused", Path("/x"))
    bad.refused("slow", "cm k: not valid JSON", "value refused")
    assert [(r.getMessage(), getattr(r, "error", None)) for r in caplog.records if r.levelname == "ERROR"] == [
        ("value refused", "cm k: nested deeper than the limit of 64"),
        ("value refused", "cm k: not valid JSON"),
    ]
    assert getattr(caplog.records[0], "path", None) == "/x"
    assert bad.snapshot() == {"slow": "cm k: not valid JSON"}
    bad.accepted("slow")
    assert bad.snapshot() == {}


async def test_readyz_names_the_bad_inputs_and_stays_ready() -> None:
    bad = {"hang_config": "/h.json: nested deeper than the limit of 64"}
    app = ops_app(lambda: (True, {"chips": 8}), CollectorRegistry(), bad_inputs=lambda: bad)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=cast(Any, app)), base_url="http://ops") as client:
        ready = await client.get("/readyz")
        assert (ready.status_code, ready.json()) == (200, {"status": "ready", "chips": 8, "bad_inputs": bad})
        bad.clear()
        assert (await client.get("/readyz")).json() == {"status": "ready", "chips": 8}
