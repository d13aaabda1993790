"""The services' uvicorn servers: idle, they wake once a second (not ten times) and still refresh the
Date header; asked to exit, they do so at once, not at the next tick."""

from __future__ import annotations

import asyncio
from email.utils import parsedate_to_datetime
from time import time
from typing import Any

import pytest
from ascend_common.adapters import serving
from ascend_common.adapters.serving import TICK_S, server

from tests.support.waiting import until


async def app(scope: dict[str, object], receive: object, send: object) -> None:  # never called
    raise AssertionError("no request expected")


async def test_an_idle_server_ticks_once_a_second_and_keeps_its_date_header_fresh() -> None:
    srv = server(app, host="127.0.0.1", port=0)
    ticks = 0
    on_tick = srv.on_tick

    async def counted(counter: int) -> bool:
        nonlocal ticks
        ticks += 1
        return await on_tick(counter)

    srv.on_tick = counted  # type: ignore[method-assign]
    serving_task = asyncio.create_task(srv.serve())
    await asyncio.sleep(TICK_S * 1.5)
    assert srv.started
    assert ticks <= 3, ticks  # uvicorn's own loop: 15
    [date] = [v for k, v in srv.server_state.default_headers if k == b"date"]
    assert abs(parsedate_to_datetime(date.decode()).timestamp() - time()) <= 2 * TICK_S
    srv.should_exit = True
    await asyncio.wait_for(serving_task, timeout=5)


async def test_asked_to_exit_it_does_not_wait_for_its_next_tick(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(serving, "TICK_S", 3600.0)  # a tick it would otherwise sleep through
    srv = server(app, host="127.0.0.1", port=0)
    serving_task = asyncio.create_task(srv.serve())
    await until(lambda: srv.started, what="the server to start")
    srv.should_exit = True
    await asyncio.wait_for(serving_task, timeout=5)


async def test_a_request_must_arrive_whole_within_the_deadline_and_its_answer_may_take_longer(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """DeadlineH11Protocol: a connection that sent nothing, part of a request line, or a body that
    stalls is closed at the deadline; a request that arrived whole is answered however long it takes."""
    monkeypatch.setattr(serving, "REQUEST_S", 0.5)

    async def slow(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        await asyncio.sleep(1.5)  # three deadlines
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-length", b"2")]})
        await send({"type": "http.response.body", "body": b"ok"})

    sock = serving.bind_tcp_socket("127.0.0.1", 0)
    port = sock.getsockname()[1]
    srv = server(slow)
    serving_task = asyncio.create_task(srv.serve(sockets=[sock]))
    await until(lambda: srv.started, what="the server to start")
    try:

        async def closed_after(first: bytes) -> float:
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.write(first)
            started = time()
            assert await asyncio.wait_for(reader.read(), 5) == b""  # closed, nothing answered
            writer.close()
            return time() - started

        stalled = await asyncio.gather(
            closed_after(b""),
            closed_after(b"GET /x HT"),
            closed_after(b"POST /x HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\nabc"),
        )
        assert all(0.3 < s < 2.0 for s in stalled), stalled
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(b"GET /x HTTP/1.1\r\nHost: x\r\n\r\n")
        answer = await asyncio.wait_for(reader.readuntil(b"ok"), 5)
        assert answer.startswith(b"HTTP/1.1 200 OK")
        writer.close()
    finally:
        srv.should_exit = True
        await asyncio.wait_for(serving_task, timeout=5)
