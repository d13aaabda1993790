"""The monitoring tier: promtool and a real Prometheus (Debian's prometheus package)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.monitoring.component import binary


@pytest.fixture(scope="session")
def promtool() -> Path:
    return binary("promtool")


@pytest.fixture(scope="session")
def prometheus() -> Path:
    return binary("prometheus")
