from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.exporter import ExporterProc, start_exporter


@pytest.fixture
def exporter(tmp_path: Path) -> Iterator[ExporterProc]:
    ep = start_exporter(tmp_path)
    yield ep
    assert ep.stop() == 0, ep.log_path.read_text()[-2000:]
    assert not ep.socket.exists(), "the exporter left its socket behind"
