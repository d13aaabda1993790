"""Schemathesis against the fault-manager's OpenAPI: no input makes it answer 5xx (the verdict stream excluded)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.support.exporter import TOKENS, ExporterProc, start_exporter
from tests.support.faultmanager import FaultManagerProc, start_fault_manager
from tests.support.fuzz import fuzz_openapi


@pytest.fixture(scope="module")
def processes(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ExporterProc, FaultManagerProc]]:
    import asyncio

    from tests.support.faultmanager import wait_ready

    root = tmp_path_factory.mktemp("fmfuzz")
    exporter = start_exporter(root / "exporter", "--time-scale", "50", "--reset-poll-period", "0.05")
    token = root / "token"
    token.write_text(f"{TOKENS['reset'][0]} reset\n")
    fm = start_fault_manager(root / "fm", exporter, "--hot-reset", "--token-file", str(token), "--time-scale", "50")
    asyncio.run(wait_ready(fm))
    yield exporter, fm
    assert fm.stop() == 0, Path(fm.log_path).read_text()[-2000:]
    exporter.stop()


def test_no_input_makes_a_5xx(processes: tuple[ExporterProc, FaultManagerProc]) -> None:
    _, fm = processes
    transport = httpx.HTTPTransport(uds=str(fm.socket))
    with httpx.Client(transport=transport, base_url="http://fm", timeout=10) as client:
        tested = fuzz_openapi(client, exclude=("/v1/verdicts/events",))
    assert sum(t.startswith("positive") for t in tested) >= 9, tested
