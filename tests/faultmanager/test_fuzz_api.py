"""Schemathesis against the fault-manager's OpenAPI: no input makes it answer 5xx (the verdict stream excluded)."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from hypothesis.errors import Unsatisfiable
from schemathesis import GenerationMode, checks

from tests.support.exporter import TOKENS, ExporterProc, start_exporter
from tests.support.faultmanager import FaultManagerProc, start_fault_manager


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
        spec = client.get("/openapi.json").json()
        schema = schemathesis.openapi.from_dict(spec).exclude(path="/v1/verdicts/events")
        tested = []
        ops = [r.ok() for r in schema.get_all_operations()]
        for op, mode in itertools.product(ops, (GenerationMode.POSITIVE, GenerationMode.NEGATIVE)):

            @given(case=op.as_strategy(generation_mode=mode))
            @settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck), database=None)
            def run(case: Any) -> None:
                kwargs = case.as_transport_kwargs(base_url="http://fm")
                if not kwargs.get("cookies"):
                    kwargs.pop("cookies", None)
                response = client.request(**kwargs)
                assert response.status_code < 500, f"{case.method} {case.path}: {response.status_code} {response.text}"
                case.validate_response(response, checks=[checks.not_a_server_error, checks.response_schema_conformance])

            try:
                run()
            except Unsatisfiable:
                assert mode is GenerationMode.NEGATIVE, f"no valid input for {op.method} {op.path}"
                continue
            tested.append(f"{mode.value} {op.method.upper()} {op.path}")
    assert sum(t.startswith("positive") for t in tested) >= 9, tested
