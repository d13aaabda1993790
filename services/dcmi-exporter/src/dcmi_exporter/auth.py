"""Bearer-token checks for mutating calls (token file of the architecture doc)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from ascend_common.tokens import Scope, TokenTable
from fastapi import HTTPException, Request, status
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

bearer = HTTPBearer(auto_error=False, description="A token from the exporter's token file")


def require(scope: Scope, tokens: Callable[[], TokenTable]) -> Callable[..., Awaitable[None]]:
    async def check(request: Request) -> None:
        creds: HTTPAuthorizationCredentials | None = await bearer(request)
        if creds is None:
            raise HTTPException(
                status.HTTP_401_UNAUTHORIZED,
                f"a bearer token with scope '{scope}' is required",
                headers={"WWW-Authenticate": "Bearer"},
            )
        scopes = tokens().scopes_of(creds.credentials)
        if scopes is None:
            raise HTTPException(status.HTTP_401_UNAUTHORIZED, "unknown token", headers={"WWW-Authenticate": "Bearer"})
        if scope not in scopes:
            raise HTTPException(status.HTTP_403_FORBIDDEN, f"the token lacks scope '{scope}'")

    return check
