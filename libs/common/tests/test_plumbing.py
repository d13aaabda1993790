"""Tokens, SSE, settings helpers, clock and JSON logs."""

from __future__ import annotations

import json
import logging

import httpx
import pytest
from ascend_common.adapters.clients.stream import data_events
from ascend_common.adapters.logs import JsonFormatter
from ascend_common.adapters.settings import load_settings, parse_host_port, service_config
from ascend_common.clock import ManualClock, policy_seconds, unix_ms
from ascend_common.tokens import Scope, TokenFileError, parse_token_file
from httpx_sse import aconnect_sse
from pydantic_settings import BaseSettings, CliImplicitFlag
from sse_starlette import ServerSentEvent

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


async def test_sse_round_trip() -> None:
    """The servers' frames (sse-starlette, pre-encoded as the ring buffers keep them, and a ping) read
    back as the clients read them (httpx-sse through data_events): multi-line data and ids survive,
    an id is sticky as the SSE spec says, and the ping after an id yields no event (httpx-sse alone
    would dispatch an empty one there: its issue #35)."""
    wire = (
        ServerSentEvent('{"a":1}\n{"b":2}', event="fault", id="run-7").encode()
        + ServerSentEvent("{}", event="hello").encode()
        + ServerSentEvent(comment="ping").encode()
    )

    def answer(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, headers={"content-type": "text/event-stream"}, content=wire)

    client = httpx.AsyncClient(transport=httpx.MockTransport(answer), base_url="http://x")
    async with client, aconnect_sse(client, "GET", "/events") as source:
        messages = [(m.event, m.data, m.id) async for m in data_events(source)]
    assert messages == [("fault", '{"a":1}\n{"b":2}', "run-7"), ("hello", "{}", "run-7")]


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
