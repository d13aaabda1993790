"""The die id's text (dieid.format_die_id) against the reference's DcGetDieID formatting.

The table restates the rule (lower-case hex, "%08s", "-", upper case); the golden vectors
(tests/golden/die_id_vectors.go, run through a real Go) pin what Go's "%08s" does to a string, the
padding question of issue 23 (golang/go#56486): zeros, in the Go that wrote the vectors and in the
one the test re-runs.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from dcmi_exporter.backends.dieid import DIE_ID_WORDS, DieType, format_die_id

from tests.support.golang import go_version, run_go

GOLDEN = Path(__file__).resolve().parents[3] / "tests" / "golden"
PROGRAM = GOLDEN / "die_id_vectors.go"
VECTORS = GOLDEN / "die_id_vectors.jsonl"
GO_VERSION = GOLDEN / "die_id_vectors.goversion"

ALL: dict[str, dict[str, Any]] = {
    v["name"]: v for v in (json.loads(line) for line in VECTORS.read_text(encoding="utf-8").splitlines())
}
REFERENCE_VECTORS = sorted(name for name in ALL if name != "minus_flag")


@pytest.mark.parametrize(
    ("words", "text"),
    [
        ([0x1, 0xABCD, 0, 0, 0x12], "00000001-0000ABCD-00000000-00000000-00000012"),  # the example
        ([0, 0, 0, 0, 0], "00000000-00000000-00000000-00000000-00000000"),
        ([0xFFFFFFFF] * 5, "FFFFFFFF-FFFFFFFF-FFFFFFFF-FFFFFFFF-FFFFFFFF"),
        ([0xF, 0xFFF, 0xFFFFF, 0xFFFFFFF, 0x10000000], "0000000F-00000FFF-000FFFFF-0FFFFFFF-10000000"),
        ([0xDEADBEEF, 0xCAFE, 0xA, 0xB0B, 0x7FFFFFFF], "DEADBEEF-0000CAFE-0000000A-00000B0B-7FFFFFFF"),
        ((1, 2, 3, 4, 5), "00000001-00000002-00000003-00000004-00000005"),  # any sequence
    ],
)
def test_format_die_id(words: list[int], text: str) -> None:
    assert format_die_id(words) == text


@pytest.mark.parametrize(
    ("words", "message"),
    [
        ([1, 2, 3, 4], "has 5 words, got 4"),
        ([1, 2, 3, 4, 5, 6], "has 5 words, got 6"),
        ([], "has 5 words, got 0"),
        ([1, 2, 3, 4, -1], "-1 is not a uint32"),
        ([1, 2, 3, 4, 1 << 32], "4294967296 is not a uint32"),
        ([1, 2, 3, 4, True], "True is not a uint32"),
        ([1, 2, 3, 4, 5.0], "5.0 is not a uint32"),
    ],
)
def test_format_die_id_refuses_what_is_no_die_id(words: list[Any], message: str) -> None:
    with pytest.raises(ValueError, match=re.escape(message)):
        format_die_id(words)


def test_die_types_are_the_reference_enum() -> None:
    """dcmi.NDIE / VDIE / DDIE of constants.go and enum dcmi_die_type."""
    assert (DieType.NDIE, DieType.VDIE, DieType.DDIE) == (0, 1, 2) and DIE_ID_WORDS == 5


def test_vector_file_is_well_formed() -> None:
    assert len(ALL) == len(VECTORS.read_text(encoding="utf-8").splitlines()) == 6
    for vector in ALL.values():
        assert set(vector) == {"name", "words", "go_text"}
    assert re.match(r"go version go1\.\d+", GO_VERSION.read_text(encoding="utf-8"))


@pytest.mark.parametrize("name", REFERENCE_VECTORS)
def test_die_id_matches_go(name: str) -> None:
    assert format_die_id(ALL[name]["words"]) == ALL[name]["go_text"]


def test_go_pads_a_string_with_zeros_only_right_justified() -> None:
    """The reference's `%08s` gives zeros; the left-justified `%-08s` (not used) gives spaces."""
    assert ALL["issue_example"]["go_text"].split("-")[1] == "0000ABCD"
    assert ALL["minus_flag"]["go_text"] == "abcd    "


def test_committed_vectors_are_current(tmp_path: Path) -> None:
    """Re-run with the workspace's Go: proves the zero padding in this Go too (the reference's
    go.mod asks for 1.26; the committed vectors name the Go that wrote them)."""
    assert go_version(tmp_path) >= (1, 19)
    assert run_go(PROGRAM, tmp_path) == VECTORS.read_text(encoding="utf-8"), (
        "tests/golden/die_id_vectors.jsonl is stale: regenerate it with the command in die_id_vectors.go"
    )
