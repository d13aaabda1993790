"""A small synchronous client for the services' HTTP-over-Unix-socket APIs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx


class CliError(Exception):
    """An error to show the operator as one line, then exit with `exit_code` (no traceback)."""

    def __init__(self, message: str, exit_code: int = 1) -> None:
        super().__init__(message)
        self.message = message
        self.exit_code = exit_code


class Unreachable(CliError):
    def __init__(self, service: str, socket: Path, why: str) -> None:
        super().__init__(f"{service} unreachable at {socket}: {why}", exit_code=2)


class ApiFailure(CliError):
    def __init__(self, service: str, status: int, detail: str) -> None:
        super().__init__(f"{service} answered {status}: {detail}", exit_code=1)
        self.status = status
        self.detail = detail


def _detail(resp: httpx.Response) -> str:
    try:
        body = resp.json()
    except ValueError:
        return resp.text.strip() or resp.reason_phrase
    if isinstance(body, dict) and "detail" in body:
        detail = body["detail"]
        return detail if isinstance(detail, str) else str(detail)
    return resp.text.strip()


class ServiceClient:
    """One service on one Unix socket."""

    def __init__(self, service: str, socket: Path, timeout: float = 10.0) -> None:
        self.service = service
        self.socket = socket
        self.timeout = timeout

    def request(
        self,
        method: str,
        path: str,
        *,
        params: dict[str, Any] | None = None,
        json: Any = None,
        headers: dict[str, str] | None = None,
    ) -> Any:
        """The response's JSON (None for an empty body); raises CliError on any failure."""
        if not self.socket.exists():
            raise Unreachable(self.service, self.socket, "no such socket (is the service running?)")
        transport = httpx.HTTPTransport(uds=str(self.socket))
        try:
            with httpx.Client(transport=transport, base_url="http://localhost", timeout=self.timeout) as client:
                resp = client.request(method, path, params=params, json=json, headers=headers)
        except httpx.TimeoutException:
            raise Unreachable(self.service, self.socket, f"no answer within {self.timeout:g}s") from None
        except httpx.TransportError as exc:
            raise Unreachable(self.service, self.socket, str(exc) or type(exc).__name__) from None
        if resp.status_code >= 400:
            raise ApiFailure(self.service, resp.status_code, _detail(resp))
        if not resp.content:
            return None
        try:
            return resp.json()
        except ValueError:
            raise CliError(f"{self.service} answered {resp.status_code} with a body that is not JSON") from None
