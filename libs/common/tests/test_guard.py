"""RequestGuard and FastAPI's body bound, called as uvicorn calls an app: the token is checked before
any byte of the body is read (no `receive` at all), and every body is bounded, by its Content-Length
up front or by counting a chunked body, with a larger bound only where a route declares one."""

from __future__ import annotations

import json
from collections.abc import Mapping, MutableMapping
from dataclasses import dataclass
from typing import Any

import pytest
from ascend_common.adapters.guard import MAX_BODY_BYTES, Bearer, GuardMissing, RequestGuard
from ascend_common.tokens import parse_token_file
from fastapi import Depends, FastAPI, Request

SIM = "t-sim-" + "3" * 26
VNPU = "t-vnpu-" + "2" * 25
TOKENS = parse_token_file(f"{SIM} sim\n{VNPU} vnpu\n")
BIG_ROUTE_BYTES = 4 * MAX_BODY_BYTES
CHUNK = 64 * 1024


ACTED: list[str] = []  # what the bodiless route did


def make_app(*, guarded: bool = True) -> FastAPI:
    app = FastAPI(max_body_size=MAX_BODY_BYTES)
    if guarded:
        app.add_middleware(RequestGuard, routes=lambda: app.routes)
    sim = Depends(Bearer("sim", lambda: TOKENS))

    @app.post("/v1/sim/faults", dependencies=[sim])
    async def inject(body: dict[str, Any]) -> dict[str, int]:
        return {"keys": len(body)}

    @app.get("/v1/chips")
    async def chips() -> dict[str, str]:
        return {"chips": "all"}

    @app.post("/v1/chips/{chip}/separation")
    async def separate(chip: str) -> dict[str, str]:  # acts, and reads no body
        ACTED.append(chip)
        return {"chip": chip}

    @app.put("/v1/policy", max_body_size=BIG_ROUTE_BYTES)
    async def policy(request: Request) -> dict[str, int]:
        return {"size": len(await request.body())}

    return app


@dataclass
class Answer:
    status: int
    headers: dict[str, str]
    body: bytes
    reads: int  # how many times the app asked for the request body (uvicorn's receive)

    @property
    def detail(self) -> Any:
        return json.loads(self.body)["detail"]


def json_of_size(size: int) -> bytes:
    """A JSON object of exactly `size` bytes (padding is whitespace)."""
    head = b'{"a": 1'
    return head + b" " * (size - len(head) - 1) + b"}"


async def call(
    app: FastAPI,
    method: str,
    path: str,
    body: bytes = b"",
    *,
    token: str | None = None,
    scheme: str = "Bearer",
    chunked: bool = False,
    content_length: int | None = None,
) -> Answer:
    headers = [(b"host", b"test"), (b"content-type", b"application/json")]
    if token is not None:
        headers.append((b"authorization", f"{scheme} {token}".encode()))
    if chunked:
        headers.append((b"transfer-encoding", b"chunked"))
    elif body or content_length is not None:
        headers.append((b"content-length", str(len(body) if content_length is None else content_length).encode()))
    chunks = [body[i : i + CHUNK] for i in range(0, len(body), CHUNK)] or [b""]
    reads = 0

    async def receive() -> MutableMapping[str, Any]:
        nonlocal reads
        reads += 1
        if reads > len(chunks):
            return {"type": "http.disconnect"}
        return {"type": "http.request", "body": chunks[reads - 1], "more_body": reads < len(chunks)}

    sent: list[Mapping[str, Any]] = []

    async def send(message: Mapping[str, Any]) -> None:
        sent.append(message)

    scope = {
        "type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": method, "scheme": "http",
        "path": path, "raw_path": path.encode(), "query_string": b"", "root_path": "", "headers": headers,
        "client": ("127.0.0.1", 40000), "server": ("127.0.0.1", 80),
    }  # fmt: skip
    await app(scope, receive, send)
    start = sent[0]
    assert start["type"] == "http.response.start"
    answer_headers = {k.decode(): v.decode() for k, v in start["headers"]}
    return Answer(start["status"], answer_headers, b"".join(m.get("body", b"") for m in sent[1:]), reads)


@dataclass(frozen=True)
class Case:
    name: str
    method: str
    path: str
    body: bytes = b""
    token: str | None = None
    scheme: str = "Bearer"
    chunked: bool = False
    content_length: int | None = None
    status: int = 200
    detail: str | None = None
    reads_nothing: bool = False


BODY = json.dumps({"code": "80E01801"}).encode()
CASES = [
    Case("no token", "POST", "/v1/sim/faults", BODY, status=401,
         detail="a bearer token with scope 'sim' is required", reads_nothing=True),
    Case("not a bearer token", "POST", "/v1/sim/faults", BODY, token=SIM, scheme="Basic", status=401,
         detail="a bearer token with scope 'sim' is required", reads_nothing=True),
    Case("bad token", "POST", "/v1/sim/faults", BODY, token="t-nope-" + "9" * 25, status=401,
         detail="unknown token", reads_nothing=True),
    Case("wrong scope", "POST", "/v1/sim/faults", BODY, token=VNPU, status=403,
         detail="the token lacks scope 'sim'", reads_nothing=True),
    Case("no token, 300 MB declared", "POST", "/v1/sim/faults", token=None, content_length=300 << 20, status=413,
         reads_nothing=True),
    Case("a good token", "POST", "/v1/sim/faults", BODY, token=SIM),
    Case("too large by Content-Length", "POST", "/v1/sim/faults", json_of_size(MAX_BODY_BYTES + 1), token=SIM,
         status=413, reads_nothing=True),
    Case("too large by Content-Length, a route that reads no body", "POST", "/v1/chips/npu-0/separation",
         content_length=300 << 20, status=413, reads_nothing=True),
    Case("too large, chunked", "POST", "/v1/sim/faults", json_of_size(MAX_BODY_BYTES + 1), token=SIM, chunked=True,
         status=413, detail="Content Too Large"),
    Case("exactly at the bound", "POST", "/v1/sim/faults", json_of_size(MAX_BODY_BYTES), token=SIM),
    Case("exactly at the bound, chunked", "POST", "/v1/sim/faults", json_of_size(MAX_BODY_BYTES), token=SIM,
         chunked=True),
    Case("a GET needs no token", "GET", "/v1/chips"),
    Case("a GET with a body past the bound", "GET", "/v1/chips", content_length=MAX_BODY_BYTES + 1, status=413,
         reads_nothing=True),
    Case("a route with a larger bound", "PUT", "/v1/policy", b"x" * (2 * MAX_BODY_BYTES)),
    Case("a route with a larger bound, chunked", "PUT", "/v1/policy", b"x" * (2 * MAX_BODY_BYTES), chunked=True),
    Case("past a route's larger bound", "PUT", "/v1/policy", b"x" * (BIG_ROUTE_BYTES + 1), status=413,
         reads_nothing=True),
    Case("past a route's larger bound, chunked", "PUT", "/v1/policy", b"x" * (BIG_ROUTE_BYTES + 1), chunked=True,
         status=413, detail="Content Too Large"),
]  # fmt: skip


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
async def test_the_guard_and_the_body_bound(case: Case) -> None:
    ACTED.clear()
    answer = await call(
        make_app(), case.method, case.path, case.body, token=case.token, scheme=case.scheme,
        chunked=case.chunked, content_length=case.content_length,
    )  # fmt: skip
    assert answer.status == case.status, answer
    if case.detail is not None:
        assert answer.detail == case.detail
    if case.status == 401:
        assert answer.headers["www-authenticate"] == "Bearer"
    if case.status == 413 and not case.chunked:  # Starlette's words, whichever of the two refused it
        assert answer.body == b"Content Too Large"
    if case.reads_nothing:
        assert answer.reads == 0, "the body was read before the answer"
    if case.chunked and case.status == 413:
        # Counted, and refused as soon as the count passed the bound: not one chunk more.
        assert answer.reads * CHUNK <= len(case.body) + CHUNK
    if case.status == 200 and case.path == "/v1/policy":
        assert json.loads(answer.body) == {"size": len(case.body)}
    if case.status != 200:
        assert ACTED == [], "a refused request acted"


async def test_a_route_that_declares_a_token_refuses_to_run_without_the_guard() -> None:
    with pytest.raises(GuardMissing, match="no RequestGuard"):
        await call(make_app(guarded=False), "POST", "/v1/sim/faults", BODY, token=SIM)


async def test_a_route_the_router_does_not_know_passes_to_it() -> None:
    answer = await call(make_app(), "POST", "/v1/nope", BODY)
    assert (answer.status, answer.detail) == (404, "Not Found")
    # The method does not match: the router answers 405 without reading the body, no token asked.
    answer = await call(make_app(), "DELETE", "/v1/sim/faults", BODY)
    assert (answer.status, answer.reads) == (405, 0)
