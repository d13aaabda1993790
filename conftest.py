"""Hypothesis in CI: the same examples every run (`derandomize`), so that a red CI means a change
broke something, not that the fuzzer's dice found something new; local runs stay random."""

from __future__ import annotations

import os

import pytest
from hypothesis import settings

# `fake` (the fake API server) and `api` (an asyncio client of the official library on it), for the
# kube adapters' tests; a module that needs objects in the server first defines its own `fake`.
pytest_plugins = ("tests.support.kube_fixtures",)

settings.register_profile("ci", derandomize=True, database=None, print_blob=True)
if os.environ.get("CI"):
    settings.load_profile("ci")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The real-node tiers run last, after the unit and process tiers, so that a broken core
    fails fast, before minutes of set-up: compose under podman, then the cluster tier (whose
    cluster stays up until the session ends, its exporter on the host's port 8082)."""
    items.sort(key=_tier)  # stable: the order within a tier is kept


def _tier(item: pytest.Item) -> int:
    path = item.path.as_posix()
    if path.endswith("/tests/compose/test_podman.py"):
        return 1
    return 2 if "/tests/cluster/" in path else 0
