"""Hypothesis in CI: the same examples every run (`derandomize`), so that a red CI means a change
broke something, not that the fuzzer's dice found something new; local runs stay random."""

from __future__ import annotations

import os

from hypothesis import settings

settings.register_profile("ci", derandomize=True, database=None, print_blob=True)
if os.environ.get("CI"):
    settings.load_profile("ci")
