"""Schemathesis against the exporter's OpenAPI: no input makes it answer 5xx.

The event stream is excluded (it never ends), and so is the sim `hang` call: a hung chip
legitimately answers 504 to the calls that reach the library, which is not a bug.
"""

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

from tests.support.exporter import ExporterProc, auth, start_exporter


@pytest.fixture(scope="module")
def fuzz_exporter(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ExporterProc]:
    ep = start_exporter(tmp_path_factory.mktemp("fuzz"), "--time-scale", "50", "--reset-poll-period", "0.05")
    yield ep
    assert ep.stop() == 0


@pytest.fixture(scope="module")
def api_schema(fuzz_exporter: ExporterProc) -> Any:
    with fuzz_exporter.sync_client() as client:
        spec = client.get("/openapi.json").json()
    return schemathesis.openapi.from_dict(spec).exclude(path="/v1/events").exclude(path="/v1/sim/chips/{logic_id}/hang")


def operations(schema: Any) -> list[Any]:
    return [result.ok() for result in schema.get_all_operations()]


def test_no_input_makes_a_5xx(api_schema: Any, fuzz_exporter: ExporterProc) -> None:
    # Driven through hypothesis directly: schemathesis' pytest plugin does not support this
    # pytest version, its strategies and checks do.
    transport = httpx.HTTPTransport(uds=str(fuzz_exporter.socket))
    tested = []
    with httpx.Client(transport=transport, timeout=5) as client:
        for op, mode in itertools.product(operations(api_schema), (GenerationMode.POSITIVE, GenerationMode.NEGATIVE)):

            @given(case=op.as_strategy(generation_mode=mode))
            @settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck), database=None)
            def run(case: Any) -> None:
                kwargs = case.as_transport_kwargs(base_url="http://exporter", headers=auth("all"))
                if not kwargs.get("cookies"):
                    kwargs.pop("cookies", None)
                response = client.request(**kwargs)
                assert response.status_code < 500, f"{case.method} {case.path}: {response.status_code} {response.text}"
                case.validate_response(response, checks=[checks.not_a_server_error, checks.response_schema_conformance])

            try:
                run()
            except Unsatisfiable:
                # An operation without parameters or body has no invalid input to generate.
                assert mode is GenerationMode.NEGATIVE, f"no valid input for {op.method} {op.path}"
                continue
            tested.append(f"{mode.value} {op.method.upper()} {op.path}")
    assert sum(t.startswith("positive") for t in tested) >= 14, tested
    assert sum(t.startswith("negative") for t in tested) >= 10, tested


def test_schema_excludes_only_the_unbounded_endpoints(api_schema: Any, fuzz_exporter: ExporterProc) -> None:
    with fuzz_exporter.sync_client() as client:
        burst = client.get("/openapi.json").json()["components"]["schemas"]["Burst"]["properties"]["count"]
    assert burst["maximum"] == 10_000, "burst sizes are bounded in the schema"
    assert Path(fuzz_exporter.socket).exists()
