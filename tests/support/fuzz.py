"""Schemathesis over a service's OpenAPI, driven through hypothesis directly.

Schemathesis' pytest plugin does not support this pytest version; its strategies and checks
do. Every operation is fuzzed with valid and invalid input; the response must not be a 5xx
and must match the documented schema.
"""

from __future__ import annotations

import itertools
from typing import Any

import httpx
import schemathesis
from hypothesis import HealthCheck, given, settings
from hypothesis.errors import Unsatisfiable
from schemathesis import GenerationMode, checks
from schemathesis.core.result import Err
from schemathesis.schemas import BaseSchema


def fuzz_openapi(
    client: httpx.Client, *, exclude: tuple[str, ...], headers: dict[str, str] | None = None, examples: int = 25
) -> list[str]:
    """Fuzz every operation but the `exclude` paths; returns "<mode> <METHOD> <path>" of those run."""
    spec = client.get("/openapi.json").json()
    schema: BaseSchema = schemathesis.openapi.from_dict(spec)
    for path in exclude:
        schema = schema.exclude(path=path)
    tested = []
    operations = []
    for result in schema.get_all_operations():
        if isinstance(result, Err):
            raise result.err()  # an operation the spec describes badly
        operations.append(result.ok())
    for op, mode in itertools.product(operations, (GenerationMode.POSITIVE, GenerationMode.NEGATIVE)):

        @given(case=op.as_strategy(generation_mode=mode))
        @settings(max_examples=examples, deadline=None, suppress_health_check=list(HealthCheck), database=None)
        def run(case: Any) -> None:
            kwargs = case.as_transport_kwargs(base_url=str(client.base_url), headers=headers)
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
    return tested
