"""How every verb calls the kube-apiserver: the official client's blocking calls in threads with
timeouts, raw JSON instead of the client's models, typed errors and bounded retries (the ApiClient
itself comes from `config`).

Why raw JSON: the client (37.x) validates every response into pydantic models, which for a
10,000-pod list costs hundreds of megabytes and seconds of CPU, and turns any field it does not
expect into a ValidationError after the write already happened. We ask for `_preload_content=False`
and keep only the fields we need.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Awaitable, Callable
from email.utils import parsedate_to_datetime
from time import time
from typing import Any, TypeVar

import urllib3
from kubernetes import client as k8s
from kubernetes.client import ApiClient as ApiClient  # re-exported: the type every helper here takes

from ascend_common.adapters.clients.backoff import Backoff

log = logging.getLogger(__name__)

T = TypeVar("T")

DEFAULT_TIMEOUT_S = 10.0
RETRYABLE_STATUSES = frozenset({409, 429})  # plus every 5xx


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

    The generated CoreV1Api brings about 290 modules (every model it could return, ~21 MB of a
    process's memory) to build requests we can spell in a line each, and we read every answer
    as raw JSON anyway. Each method takes the generated method's arguments and returns the raw
    response (the generated client's `_preload_content=False`); an error status raises the
    client's ApiException, as the generated method does.
    """

    def __init__(self, api: ApiClient) -> None:
        self.api = api

    def _request(
        self,
        method: str,
        path: str,
        *,
        body: Any = None,
        content_type: str = "application/json",
        _request_timeout: Any = None,
        _preload_content: bool = False,
        **query: Any,
    ) -> Any:
        if _preload_content:
            raise ValueError("CoreV1 answers raw responses only (_preload_content=False)")
        headers = {"Accept": "application/json"}
        if body is not None:
            headers["Content-Type"] = content_type
        method, url, header_params, data, post = self.api.param_serialize(
            method=method,
            resource_path=path,
            query_params=[(_query_name(k), v) for k, v in query.items() if v is not None],
            header_params=headers,
            body=body,
            auth_settings=["BearerToken"],
        )
        resp = self.api.call_api(method, url, header_params, data, post, _request_timeout=_request_timeout)
        if not 200 <= resp.status <= 299:
            resp.read()  # type: ignore[no-untyped-call]
            raise k8s.ApiException.from_response(http_resp=resp, body=None, data=None)
        return resp.response

    def read_node(self, name: str, **kw: Any) -> Any:
        return self._request("GET", f"/api/v1/nodes/{name}", **kw)

    def patch_node(self, name: str, body: Any, *, _content_type: str, **kw: Any) -> Any:
        return self._request("PATCH", f"/api/v1/nodes/{name}", body=body, content_type=_content_type, **kw)

    def patch_node_status(self, name: str, body: Any, *, _content_type: str, **kw: Any) -> Any:
        return self._request("PATCH", f"/api/v1/nodes/{name}/status", body=body, content_type=_content_type, **kw)

    def patch_namespaced_pod(self, name: str, namespace: str, body: Any, *, _content_type: str, **kw: Any) -> Any:
        path = f"/api/v1/namespaces/{namespace}/pods/{name}"
        return self._request("PATCH", path, body=body, content_type=_content_type, **kw)

    def list_pod_for_all_namespaces(self, **kw: Any) -> Any:
        return self._request("GET", "/api/v1/pods", **kw)

    def read_namespaced_config_map(self, name: str, namespace: str, **kw: Any) -> Any:
        return self._request("GET", f"/api/v1/namespaces/{namespace}/configmaps/{name}", **kw)

    def list_namespaced_config_map(self, namespace: str, **kw: Any) -> Any:
        return self._request("GET", f"/api/v1/namespaces/{namespace}/configmaps", **kw)

    def create_namespaced_config_map(self, namespace: str, body: Any, **kw: Any) -> Any:
        return self._request("POST", f"/api/v1/namespaces/{namespace}/configmaps", body=body, **kw)

    def replace_namespaced_config_map(self, name: str, namespace: str, body: Any, **kw: Any) -> Any:
        return self._request("PUT", f"/api/v1/namespaces/{namespace}/configmaps/{name}", body=body, **kw)

    def delete_namespaced_config_map(self, name: str, namespace: str, **kw: Any) -> Any:
        return self._request("DELETE", f"/api/v1/namespaces/{namespace}/configmaps/{name}", **kw)


def _query_name(arg: str) -> str:
    """The generated client's argument name -> the API's query parameter (field_selector ->
    fieldSelector; `_continue` is spelled so only because `continue` is a Python keyword)."""
    head, *rest = arg.lstrip("_").split("_")
    return head + "".join(word.capitalize() for word in rest)


def core_v1(api: ApiClient) -> CoreV1:
    return CoreV1(api)


# -- errors -----------------------------------------------------------------------------------


def status_of(exc: BaseException) -> int | None:
    """The HTTP status of a client error; None for transport errors and timeouts."""
    if isinstance(exc, k8s.ApiException):
        status = exc.status
        return status if isinstance(status, int) and status > 0 else None
    if isinstance(exc, KubeApiError):
        return exc.status
    return None


def retry_after_s(exc: BaseException) -> float | None:
    """Seconds the server asked us to wait (Retry-After, seconds or an HTTP date), if any."""
    headers = getattr(exc, "headers", None)
    if not isinstance(exc, k8s.ApiException) or not headers:
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
    if isinstance(exc, k8s.ApiException):
        status = status_of(exc)
        # status 0 is the client's own "could not even build/send the request" (e.g. TLS errors).
        return status is None or status in RETRYABLE_STATUSES or status >= 500
    return isinstance(exc, TimeoutError | urllib3.exceptions.HTTPError | ConnectionError | OSError)


def _message(exc: BaseException) -> str:
    if isinstance(exc, k8s.ApiException):
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


async def call(
    fn: Callable[..., T],
    *args: Any,
    timeout: float = DEFAULT_TIMEOUT_S,  # noqa: ASYNC109 - the bound travels into the thread too
    **kwargs: Any,
) -> T:
    """Run one blocking client API method in a thread, bounded twice.

    `_request_timeout` makes the thread itself give up (so it is not left hanging), and
    wait_for bounds the caller even if the thread is stuck somewhere the socket timeout misses.
    """
    kwargs.setdefault("_request_timeout", timeout)
    return await asyncio.wait_for(asyncio.to_thread(fn, *args, **kwargs), timeout + 1.0)


def read_json(resp: Any) -> Any:
    """Body of a `_preload_content=False` response as JSON; the connection goes back to the pool."""
    try:
        return json.loads(resp.data)
    finally:
        resp.release_conn()


def discard(resp: Any) -> None:
    """Read and drop a `_preload_content=False` body so the connection can be reused."""
    try:
        resp.drain_conn()
    finally:
        resp.release_conn()


def post_json(api: ApiClient, path: str, body: dict[str, Any], *, _request_timeout: float | None = None) -> Any:
    """POST `body` to `path` as it is, and return the answer's JSON; ApiException for an error status.

    For bodies the typed client would rewrite: its pydantic models turn a MicroTime such as an
    Event's eventTime into datetime.isoformat(), which drops the fraction when it is zero
    (".000000Z" becomes "+00:00"), and the apiserver then refuses the Event (400)."""
    method, url, headers, data, post = api.param_serialize(
        method="POST",
        resource_path=path,
        header_params={"Accept": "application/json", "Content-Type": "application/json"},
        body=body,
        auth_settings=["BearerToken"],
    )
    resp = api.call_api(method, url, headers, data, post, _request_timeout=_request_timeout)
    resp.read()  # type: ignore[no-untyped-call]
    if not 200 <= resp.status < 300:
        raise k8s.ApiException(http_resp=resp)
    return json.loads(resp.data) if resp.data else None


def get_json(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """Call a client API method without the client's model validation and return its JSON."""
    return read_json(fn(*args, _preload_content=False, **kwargs))


async def retrying(
    fn: Callable[[], Awaitable[T]],
    what: str,
    retries: int = 3,
    base_delay: float = 0.2,
    *,
    max_delay: float = 5.0,
    max_retry_after: float = 30.0,
) -> T:
    """Await `fn()`; on a transient failure try again up to `retries` more times.

    Backoff is exponential with jitter; a 429's Retry-After is honoured (bounded by
    `max_retry_after`). 404 raises KubeNotFound at once, other refusals (400, 403, 422)
    KubeRejected; after the last try KubeRetriesExhausted. `what` names the call in logs.
    """
    backoff = Backoff(base_delay, max_delay)
    attempt = 0
    while True:
        attempt += 1
        try:
            return await fn()
        except asyncio.CancelledError:
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
