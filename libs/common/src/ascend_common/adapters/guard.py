"""Request bodies on the Unix-socket APIs: the token is checked before a byte of the body is read,
and every body is bounded.

FastAPI reads and parses a route's body before it solves the route's dependencies, so a token
checked by a dependency comes after the body, however large. `RequestGuard` is a pure ASGI
middleware that finds the route as the router will (Starlette's own `Route.matches`) and, from the
request's headers alone, before the route runs:

- answers 413 when the declared Content-Length passes the route's bound: `max_body_size` of the
  route when it declares one (next to it), else `MAX_BODY_BYTES`, which is also the app's
  `FastAPI(max_body_size=...)`;
- answers 401/403 when the route declares `Bearer(scope)` among its dependencies and the token
  is missing, unknown, or lacks the scope.

A chunked body (no Content-Length) is counted by FastAPI's own body limit as the route reads it,
413 past the bound. A body that stalls is cut by the request deadline of
`serving.DeadlineH11Protocol`. Starlette's limit alone would not do for a declared length: on a
route that reads no body it answers 413 only when the response starts, after the route has acted.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse
from starlette.routing import BaseRoute, Match
from starlette.types import ASGIApp, Receive, Scope, Send

from ascend_common.tokens import TokenTable

MAX_BODY_BYTES = 1 << 20  # every body unless its route says otherwise (FastAPI's max_body_size)
GUARDED = "ascend.guarded"  # set in the request scope by RequestGuard; Bearer checks it is there


class GuardMissing(RuntimeError):
    """A route declares a token but no RequestGuard stands in front of it."""


@dataclass(frozen=True)
class Bearer:
    """A route's declaration, among its `dependencies`: a bearer token with `scope` is needed.

    RequestGuard reads it and checks the token before the body; as a dependency it only makes
    sure the guard ran, so that a route never goes unguarded because an app forgot its middleware.
    """

    scope: str
    tokens: Callable[[], TokenTable]

    async def __call__(self, request: Request) -> None:
        if request.scope.get(GUARDED) is not True:
            raise GuardMissing(f"{request.url.path} needs a token but no RequestGuard checked it")


def bearer_token(scope: Scope) -> str | None:
    """The credentials of `Authorization: Bearer <token>`, as FastAPI's HTTPBearer reads them."""
    value: bytes | None = next((v for k, v in scope["headers"] if k == b"authorization"), None)
    if value is None:
        return None
    scheme, _, credentials = value.decode("latin-1").partition(" ")
    if scheme.lower() != "bearer" or not credentials:
        return None
    return credentials


def too_large(scope: Scope, limit: int) -> PlainTextResponse | None:
    """413 when the declared Content-Length passes `limit` (uvicorn's h11 has checked it is digits),
    in the words of Starlette's body limit, which stands outside this middleware and would put its
    own answer in place of any other for such a request."""
    value: bytes | None = next((v for k, v in scope["headers"] if k == b"content-length"), None)
    if value is None or (len(value) <= len(str(limit)) and int(value) <= limit):
        return None
    return PlainTextResponse("Content Too Large", 413)


def refusal(rule: Bearer, token: str | None) -> JSONResponse | None:
    """401 without a known token, 403 without the scope; None when the token may pass."""
    challenge = {"WWW-Authenticate": "Bearer"}
    if token is None:
        detail = f"a bearer token with scope '{rule.scope}' is required"
        return JSONResponse({"detail": detail}, 401, headers=challenge)
    scopes = rule.tokens().scopes_of(token)
    if scopes is None:
        return JSONResponse({"detail": "unknown token"}, 401, headers=challenge)
    if rule.scope not in scopes:
        return JSONResponse({"detail": f"the token lacks scope '{rule.scope}'"}, 403)
    return None


@dataclass(frozen=True)
class Rule:
    max_body: int
    bearer: Bearer | None


class RequestGuard:
    """`app.add_middleware(RequestGuard, routes=lambda: app.routes)`: routes are read at the first
    request, once every route is declared. `max_body`: the bound of a route that declares none (the
    app's `max_body_size`)."""

    def __init__(self, app: ASGIApp, routes: Callable[[], list[BaseRoute]], max_body: int = MAX_BODY_BYTES) -> None:
        self.app = app
        self._routes = routes
        self.max_body = max_body
        self._rules: list[tuple[BaseRoute, Rule]] | None = None

    def rules(self) -> list[tuple[BaseRoute, Rule]]:
        if self._rules is None:
            self._rules = [(route, self._declared(route)) for route in self._routes()]
        return self._rules

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            scope[GUARDED] = True
            rule = self.rule_for(scope)
            answer: JSONResponse | PlainTextResponse | None = too_large(scope, rule.max_body)
            if answer is None and rule.bearer is not None:
                answer = refusal(rule.bearer, bearer_token(scope))
            if answer is not None:
                await answer(scope, receive, send)
                return
        await self.app(scope, receive, send)

    def rule_for(self, scope: Scope) -> Rule:
        """The rule of the route the router will pick (the first full match); the default otherwise."""
        for route, rule in self.rules():
            match, _ = route.matches(scope)
            if match is Match.FULL:
                return rule
        return Rule(self.max_body, None)

    def _declared(self, route: BaseRoute) -> Rule:
        bearer = None
        for depends in getattr(route, "dependencies", ()):
            if isinstance(declared := getattr(depends, "dependency", None), Bearer):
                bearer = declared
        limit = getattr(route, "max_body_size", None)  # FastAPI's APIRoute: None when the app's applies
        return Rule(self.max_body if limit is None else limit, bearer)
