"""The services' uvicorn servers: idle, they wake once a second (not ten times); asked to exit,
they do so at once."""

from __future__ import annotations

import asyncio
import time

from ascend_common.adapters.serving import TICK_S, server


async def app(scope: dict[str, object], receive: object, send: object) -> None:  # never called
    raise AssertionError("no request expected")


async def test_an_idle_server_ticks_once_a_second_and_exits_when_asked() -> None:
    srv = server(app, host="127.0.0.1", port=0)
    ticks = 0
    on_tick = srv.on_tick

    async def counted(counter: int) -> bool:
        nonlocal ticks
        ticks += 1
        return await on_tick(counter)

    srv.on_tick = counted  # type: ignore[method-assign]
    serving = asyncio.create_task(srv.serve())
    await asyncio.sleep(TICK_S * 1.5)
    assert srv.started
    assert ticks <= 3, ticks  # uvicorn's own loop: 15
    asked = time.monotonic()
    srv.should_exit = True
    await asyncio.wait_for(serving, timeout=TICK_S * 3)
    # uvicorn's shutdown itself pauses 0.1 s; the main loop must not add up to a tick to that.
    assert time.monotonic() - asked < TICK_S / 2
