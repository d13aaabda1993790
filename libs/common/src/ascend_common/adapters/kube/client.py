"""How every verb calls the kube-apiserver: the official asyncio client (`kubernetes.aio`, on
aiohttp), raw JSON instead of the client's models, typed errors and bounded retries (the ApiClient
itself comes from `config`).

Why raw JSON: the client (37.x) validates every response into pydantic models, which for a
10,000-pod list costs hundreds of megabytes and seconds of CPU, and turns any field it does not
expect into a ValidationError after the write already happened. `CoreV1` is the one place that
builds requests: it asks the ApiClient to serialize and send a request for a path
(`param_serialize` + `call_api`, as the client's own dynamic client does) and hands back the raw
answer, which the verbs read as JSON and keep only the fields they need.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Awaitable, Callable, Mapping
from email.utils import parsedate_to_datetime
from time import time
from typing import Any, TypeVar

import aiohttp
from kubernetes.aio.client import ApiClient as ApiClient  # re-exported: the type every helper here takes
from kubernetes.aio.client.exceptions import ApiException

from ascend_common.adapters.clients.backoff import Backoff

log = logging.getLogger(__name__)

T = TypeVar("T")

DEFAULT_TIMEOUT_S = 10.0
RETRYABLE_STATUSES = frozenset({409, 429})  # plus every 5xx
STRATEGIC_MERGE = "application/strategic-merge-patch+json"


class KubeApiError(Exception):
    """A call to the apiserver failed; `status` is the HTTP status, None for transport errors."""

    def __init__(self, what: str, status: int | None, message: str, attempts: int = 1) -> None:
        super().__init__(f"{what}: {message}" + (f" (after {attempts} attempts)" if attempts > 1 else ""))
        self.what = what
        self.status = status
        self.message = message
        self.attempts = attempts


class KubeNotFound(KubeApiError):
    """404: the object does not exist; retrying cannot help."""


class KubeRejected(KubeApiError):
    """The apiserver refused the request itself (400, 401, 403, 422, ...); retrying cannot help."""


class KubeRetriesExhausted(KubeApiError):
    """Transient failures (409, 429, 5xx, timeouts, connection errors) outlasted the retries."""


class CoreV1:
    """The few core/v1 calls the node makes, as raw REST through the official ApiClient.

    The generated CoreV1Api would validate each answer into models (and its arguments too: a
    body typed as a model is rebuilt from it before it is sent); we read every answer as raw
    JSON. `request` is the one place a request is built and sent; the named methods spell the
    paths. An error status raises the client's ApiException (NotFoundException for a 404, ...),
    as the generated methods do.
    """

    def __init__(self, api: ApiClient) -> None:
        self.api = api

    async def request(
        self,
        method: str,
        path: str,
        *,
        query: Mapping[str, Any] | None = None,
        body: Any = None,
        content_type: str = "application/json",
        timeout: aiohttp.ClientTimeout | float = DEFAULT_TIMEOUT_S,  # noqa: ASYNC109 - aiohttp's, the body's reading included
    ) -> aiohttp.ClientResponse:
        """Send one request; the answer's body is left unread (see `json_of`, `discard`, watch.RawWatch).

        `timeout` bounds the whole call, the body's reading included; a watch passes a
        ClientTimeout whose read timeout outlasts its server-side timeoutSeconds instead.
        `body` goes out as the JSON of what is given: a dict of JSON values is serialized as it is.
        """
        headers = {"Accept": "application/json", "Content-Type": content_type}
        method, url, header_params, data, post = await self.api.param_serialize(
            method=method,
            resource_path=path,
            query_params=[(k, v) for k, v in (query or {}).items() if v is not None],
            header_params=headers,
            body=body,
            auth_settings=["BearerToken"],
        )
        bound = timeout if isinstance(timeout, aiohttp.ClientTimeout) else aiohttp.ClientTimeout(total=timeout)
        resp = await self.api.call_api(method, url, header_params, data, post, _request_timeout=bound)
        if not 200 <= resp.status <= 299:
            await resp.read()  # type: ignore[no-untyped-call]  # the error's Status body, for the message
            ApiException.from_response(http_resp=resp, body=None, data=None)  # raises
        response: aiohttp.ClientResponse = resp.response
        return response

    async def list_node(self, **kw: Any) -> Any:
        return await self.request("GET", "/api/v1/nodes", **kw)

    async def read_node(self, name: str, **kw: Any) -> Any:
        return await self.request("GET", f"/api/v1/nodes/{name}", **kw)

    async def patch_node(self, name: str, body: Any, **kw: Any) -> Any:
        return await self.request("PATCH", f"/api/v1/nodes/{name}", body=body, content_type=STRATEGIC_MERGE, **kw)

    async def patch_node_status(self, name: str, body: Any, **kw: Any) -> Any:
        path = f"/api/v1/nodes/{name}/status"
        return await self.request("PATCH", path, body=body, content_type=STRATEGIC_MERGE, **kw)

    async def patch_namespaced_pod(self, name: str, namespace: str, body: Any, **kw: Any) -> Any:
        path = f"/api/v1/namespaces/{namespace}/pods/{name}"
        return await self.request("PATCH", path, body=body, content_type=STRATEGIC_MERGE, **kw)

    async def list_pod_for_all_namespaces(self, **kw: Any) -> Any:
        return await self.request("GET", "/api/v1/pods", **kw)

    async def read_namespaced_config_map(self, name: str, namespace: str, **kw: Any) -> Any:
        return await self.request("GET", f"/api/v1/namespaces/{namespace}/configmaps/{name}", **kw)

    async def list_namespaced_config_map(self, namespace: str, **kw: Any) -> Any:
        return await self.request("GET", f"/api/v1/namespaces/{namespace}/configmaps", **kw)

    async def create_namespaced_config_map(self, namespace: str, body: Any, **kw: Any) -> Any:
        return await self.request("POST", f"/api/v1/namespaces/{namespace}/configmaps", body=body, **kw)

    async def replace_namespaced_config_map(self, name: str, namespace: str, body: Any, **kw: Any) -> Any:
        return await self.request("PUT", f"/api/v1/namespaces/{namespace}/configmaps/{name}", body=body, **kw)

    async def delete_namespaced_config_map(self, name: str, namespace: str, **kw: Any) -> Any:
        return await self.request("DELETE", f"/api/v1/namespaces/{namespace}/configmaps/{name}", **kw)

    async def create_namespaced_event(self, namespace: str, body: Mapping[str, Any], **kw: Any) -> Any:
        return await self.request("POST", f"/api/v1/namespaces/{namespace}/events", body=body, **kw)


def core_v1(api: ApiClient) -> CoreV1:
    return CoreV1(api)


async def json_of(resp: aiohttp.ClientResponse) -> Any:
    """The body of an answer as JSON (None when empty); the connection goes back to the pool."""
    async with resp:
        data = await resp.read()
    return json.loads(data) if data else None


async def discard(resp: aiohttp.ClientResponse) -> None:
    """Read and drop an answer's body, so that its connection can be reused."""
    async with resp:
        await resp.read()


# -- errors -----------------------------------------------------------------------------------


def status_of(exc: BaseException) -> int | None:
    """The HTTP status of a client error; None for transport errors and timeouts."""
    if isinstance(exc, ApiException):
        status = exc.status
        return status if isinstance(status, int) and status > 0 else None
    if isinstance(exc, KubeApiError):
        return exc.status
    return None


def retry_after_s(exc: BaseException) -> float | None:
    """Seconds the server asked us to wait (Retry-After, seconds or an HTTP date), if any."""
    headers = getattr(exc, "headers", None)
    if not isinstance(exc, ApiException) or not headers:
        return None
    raw = headers.get("Retry-After")
    if raw is None:
        return None
    try:
        return max(0.0, float(raw))
    except ValueError:
        pass
    try:
        return max(0.0, parsedate_to_datetime(raw).timestamp() - time())
    except (TypeError, ValueError):
        return None


def is_transient(exc: BaseException) -> bool:
    """Worth another try: conflicts, throttling, server errors, timeouts and transport failures."""
    if isinstance(exc, ApiException):
        status = status_of(exc)
        # status 0 is the client's own "could not even build/send the request".
        return status is None or status in RETRYABLE_STATUSES or status >= 500
    return isinstance(exc, TimeoutError | aiohttp.ClientError | ConnectionError | OSError)


def _message(exc: BaseException) -> str:
    if isinstance(exc, ApiException):
        body = exc.body
        if isinstance(body, str | bytes):
            try:
                parsed = json.loads(body)
                if isinstance(parsed, dict) and parsed.get("message"):
                    return f"{exc.status} {parsed['message']}"
            except ValueError:
                pass
        return f"{exc.status} {exc.reason}"
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__


def typed_error(exc: BaseException, what: str, attempts: int = 1) -> KubeApiError:
    """Map a client exception to our error types."""
    if isinstance(exc, KubeApiError):
        return exc
    status = status_of(exc)
    if status == 404:
        return KubeNotFound(what, status, _message(exc), attempts)
    if is_transient(exc):
        return KubeRetriesExhausted(what, status, _message(exc), attempts)
    return KubeRejected(what, status, _message(exc), attempts)


# -- calls ------------------------------------------------------------------------------------


async def retrying(
    fn: Callable[[], Awaitable[T]],
    what: str,
    retries: int = 3,
    base_delay: float = 0.2,
    *,
    max_delay: float = 5.0,
    max_retry_after: float = 30.0,
    passthrough: tuple[type[Exception], ...] = (),
) -> T:
    """Await `fn()`; on a transient failure try again up to `retries` more times.

    Backoff is exponential with jitter; a 429's Retry-After is honoured (bounded by
    `max_retry_after`). 404 raises KubeNotFound at once, other refusals (400, 403, 422)
    KubeRejected; after the last try KubeRetriesExhausted. `what` names the call in logs.
    An exception of a `passthrough` type is raised as it is, at once (the caller's own answer
    to it, such as a re-read on a Conflict).
    """
    backoff = Backoff(base_delay, max_delay)
    attempt = 0
    while True:
        attempt += 1
        try:
            return await fn()
        except asyncio.CancelledError:
            raise
        except passthrough:
            raise
        except Exception as exc:
            if not is_transient(exc) or attempt > retries:
                err = typed_error(exc, what, attempt)
                log.warning(
                    "kube call failed",
                    extra={"what": what, "status": err.status, "attempts": attempt, "error": err.message},
                )
                raise err from exc
            delay = backoff.next()
            hint = retry_after_s(exc)
            if hint is not None:
                delay = min(max(delay, hint), max_retry_after)
            log.info(
                "kube call failed, retrying",
                extra={
                    "what": what,
                    "status": status_of(exc),
                    "attempt": attempt,
                    "delay_s": round(delay, 3),
                    "error": _message(exc),
                },
            )
            await asyncio.sleep(delay)
