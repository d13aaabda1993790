"""Request bodies on the Unix-socket APIs: the token is checked before a byte of the body is read,
and every body is bounded.

FastAPI reads and parses a route's body before it solves the route's dependencies, so a token
checked by a dependency comes after the body, however large. `RequestGuard` is a pure ASGI
middleware that finds the route as the router will (Starlette's own `Route.matches`), and answers
401/403 from the request's headers alone when the route declares `Bearer(scope)` among its
dependencies. The body bound is FastAPI's own: `FastAPI(max_body_size=MAX_BODY_BYTES)` for every
route, and `max_body_size=` on the one route that needs more, next to it; past it the answer is
413, by Content-Length before anything is read, else by counting the bytes of a chunked body.
A body that stalls is cut by the request deadline of `serving.DeadlineH11Protocol`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from starlette.requests import Request
from starlette.responses import JSONResponse
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


class RequestGuard:
    """`app.add_middleware(RequestGuard, routes=lambda: app.routes)`: routes are read at the first
    request, once every route is declared."""

    def __init__(self, app: ASGIApp, routes: Callable[[], list[BaseRoute]]) -> None:
        self.app = app
        self._routes = routes
        self._rules: list[tuple[BaseRoute, Bearer | None]] | None = None

    def rules(self) -> list[tuple[BaseRoute, Bearer | None]]:
        if self._rules is None:
            self._rules = [(route, _declared(route)) for route in self._routes()]
        return self._rules

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            scope[GUARDED] = True
            rule = self.rule_for(scope)
            if rule is not None and (answer := refusal(rule, bearer_token(scope))) is not None:
                await answer(scope, receive, send)
                return
        await self.app(scope, receive, send)

    def rule_for(self, scope: Scope) -> Bearer | None:
        """The declaration of the route the router will pick (the first full match), if any."""
        for route, rule in self.rules():
            match, _ = route.matches(scope)
            if match is Match.FULL:
                return rule
        return None


def _declared(route: BaseRoute) -> Bearer | None:
    for depends in getattr(route, "dependencies", ()):
        if isinstance(declared := getattr(depends, "dependency", None), Bearer):
            return declared
    return None
