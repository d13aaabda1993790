"""Tokens, SSE, settings helpers, clock and JSON logs."""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator

import pytest
from ascend_common import sse
from ascend_common.adapters.logs import JsonFormatter
from ascend_common.adapters.settings import load_settings, parse_host_port, service_config
from ascend_common.clock import ManualClock, policy_seconds, unix_ms
from ascend_common.tokens import Scope, TokenFileError, parse_token_file
from pydantic_settings import BaseSettings, CliImplicitFlag

TOKEN_A = "a" * 32
TOKEN_B = "b" * 32


def test_token_file_scopes() -> None:
    table = parse_token_file(f"# comment\n\n{TOKEN_A} reset,vnpu\n{TOKEN_B} sim\n")
    assert table.scopes_of(TOKEN_A) == frozenset({Scope.RESET, Scope.VNPU})
    assert table.scopes_of(TOKEN_B) == frozenset({Scope.SIM})
    assert table.scopes_of("c" * 32) is None


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (f"{TOKEN_A}", r"f:1: expected"),
        (f"{TOKEN_A} reset extra", r"f:1: expected"),
        ("short reset", r"f:1: token shorter than 16"),
        (f"\n{TOKEN_A} reboot", r"f:2: .*scopes are reset, vnpu, sim"),
    ],
)
def test_token_file_errors_name_the_line(text: str, message: str) -> None:
    with pytest.raises(TokenFileError, match=message):
        parse_token_file(text, "f")


async def _lines(text: str) -> AsyncIterator[str]:
    for line in text.split("\n"):
        yield line


async def test_sse_round_trip() -> None:
    wire = sse.encode("fault", '{"a":1}\n{"b":2}', "run-7") + sse.encode("hello", "{}") + b": keepalive\n\n"
    messages = [m async for m in sse.parse(_lines(wire.decode()))]
    assert messages == [
        sse.SseMessage("fault", '{"a":1}\n{"b":2}', "run-7"),
        sse.SseMessage("hello", "{}", None),
    ]


@pytest.mark.parametrize(
    ("addr", "expected"),
    [("127.0.0.1:8082", ("127.0.0.1", 8082)), (":9000", ("0.0.0.0", 9000)), ("[::1]:80", ("::1", 80))],
)
def test_parse_host_port(addr: str, expected: tuple[str, int]) -> None:
    assert parse_host_port(addr) == expected


@pytest.mark.parametrize("addr", ["localhost", "host:", "host:70000", "host:x"])
def test_parse_host_port_rejects(addr: str) -> None:
    with pytest.raises(ValueError, match="HOST:PORT"):
        parse_host_port(addr)


class DemoSettings(BaseSettings):
    model_config = service_config("DEMO_")
    metrics_addr: str = "0.0.0.0:1"
    poll_period: float = 1.0
    hot_reset: CliImplicitFlag[bool] = False
    preset: bool = True


def test_settings_flags_beat_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DEMO_POLL_PERIOD", "2.5")
    monkeypatch.setenv("DEMO_METRICS_ADDR", "1.2.3.4:5")
    s = load_settings(DemoSettings, ["--metrics-addr", "127.0.0.1:9", "--hot-reset", "--preset", "false"], prog="demo")
    assert (s.metrics_addr, s.poll_period, s.hot_reset, s.preset) == ("127.0.0.1:9", 2.5, True, False)
    assert load_settings(DemoSettings, None, prog="demo").metrics_addr == "1.2.3.4:5"


def test_manual_clock_and_policy_time() -> None:
    clock = ManualClock(wall=100.0, time_scale=10.0)
    clock.advance(1.5)
    assert clock.now() == 101.5
    assert unix_ms(clock) == 101_500
    assert policy_seconds(clock, 20) == 2.0
    with pytest.raises(ValueError, match="never goes back"):
        clock.advance(-1)


def test_json_log_line_carries_extra_fields() -> None:
    record = logging.LogRecord("x", logging.WARNING, __file__, 1, "chip did not answer", None, None)
    record.chip = "Ascend910-3"
    entry = json.loads(JsonFormatter("dcmi-exporter").format(record))
    assert entry["event"] == "chip did not answer"
    assert entry["chip"] == "Ascend910-3"
    assert entry["level"] == "warning"
    assert entry["service"] == "dcmi-exporter"
