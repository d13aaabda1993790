"""docs/configuration.md is what tools/config_doc.py writes from the settings classes: a setting
added or changed without regenerating the page fails here (two rows had drifted: a flag missing,
a description richer in the page than in the code)."""

from __future__ import annotations

from pathlib import Path

from tools.config_doc import render

PAGE = Path(__file__).resolve().parents[1] / "docs" / "configuration.md"


def test_the_configuration_page_is_regenerated() -> None:
    assert PAGE.read_text() == render(), "run: .venv/bin/python -m tools.config_doc > docs/configuration.md"
