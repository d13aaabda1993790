"""A stand-in for the fault-manager's verdict API until the fault-manager exists.

It runs as its own process (so "the fault-manager dies" is a real closed socket), serves
`GET /v1/verdicts` and the `/v1/verdicts/events` stream in the libs/common schema on a
Unix socket, and takes the verdicts to publish on `PUT /test/verdicts/{chip}`.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import secrets
import signal
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
from ascend_common.adapters.serving import bind_unix_socket, server
from ascend_common.schemas.verdict import VERDICT_EVENTS_PATH, VERDICTS_PATH, ChipVerdict, VerdictEvent, VerdictList
from fastapi import FastAPI, Header
from fastapi.responses import Response, StreamingResponse
from sse_starlette import ServerSentEvent

from tests.support.waiting import until_sync

ROOT = Path(__file__).resolve().parents[2]


def create_app() -> FastAPI:
    app = FastAPI()
    epoch = secrets.token_hex(4)
    verdicts: dict[str, ChipVerdict] = {}
    history: list[VerdictEvent] = []
    changed = asyncio.Event()

    @app.put("/test/verdicts/{chip}", status_code=204)
    async def put(chip: str, verdict: ChipVerdict) -> Response:
        verdicts[chip] = verdict
        history.append(VerdictEvent(epoch=epoch, revision=len(history) + 1, verdict=verdict))
        changed.set()
        return Response(status_code=204)

    @app.get(VERDICTS_PATH)
    async def listing() -> Response:
        body = VerdictList(epoch=epoch, revision=len(history), verdicts=list(verdicts.values()))
        return Response(body.model_dump_json(), media_type="application/json")

    async def stream(cursor: int) -> AsyncIterator[bytes]:
        nonlocal changed
        while True:
            for event in history[cursor:]:
                cursor = event.revision
                yield ServerSentEvent(
                    event.model_dump_json(), event="verdict", id=str(event.revision), sep="\n"
                ).encode()
            changed.clear()
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(1.0):
                    await changed.wait()

    @app.get(VERDICT_EVENTS_PATH)
    async def events(last_event_id: str | None = Header(None)) -> StreamingResponse:
        cursor = int(last_event_id) if last_event_id and last_event_id.isdigit() else len(history)
        return StreamingResponse(stream(cursor), media_type="text/event-stream")

    return app


class VerdictStandIn:
    """The test side: start the process, publish verdicts, kill it."""

    def __init__(self, socket: Path) -> None:
        self.socket = socket
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        proc = self.proc = subprocess.Popen(
            [sys.executable, "-m", "tests.support.verdict_standin", str(self.socket)], cwd=ROOT
        )

        def listening() -> bool:
            if proc.poll() is not None:
                raise RuntimeError(f"the verdict stand-in exited with {proc.returncode}")
            return self.socket.exists()

        until_sync(listening, what="the verdict stand-in's socket", interval=0.02)

    def set(self, verdict: ChipVerdict) -> None:
        with httpx.Client(transport=httpx.HTTPTransport(uds=str(self.socket)), base_url="http://fm") as client:
            client.put(f"/test/verdicts/{verdict.chip}", json=verdict.model_dump(mode="json")).raise_for_status()

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(5)
        with contextlib.suppress(FileNotFoundError):
            self.socket.unlink()


async def _main(socket: Path) -> None:
    srv = server(create_app())
    await srv.serve(sockets=[bind_unix_socket(socket)])


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("socket", type=Path)
    asyncio.run(_main(parser.parse_args().socket))
