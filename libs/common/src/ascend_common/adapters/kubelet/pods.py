"""The pods of one node from its kubelet's /pods, polled (the reference's getPodFromKubelet).

The kubelet answers GET /pods (port 10250, authenticated and authorized by the API server's
TokenReview/SubjectAccessReview webhooks) with a v1 PodList of the pods it runs, static ones
included; it has no watch. Every `period_s` the list is read and compared with the last good
one (ascend_common.pods.pod_changes) and the differences go to the same `on_change` callbacks
PodCache calls, so consumers cannot tell the two sources apart. A failed read (refused, dead
kubelet, a body too large or not a PodList) is logged with its reason and retried with backoff;
the last good list stays, so an outage never reads as every pod gone.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import ssl
from dataclasses import dataclass
from pathlib import Path

import httpx

from ascend_common.adapters.clients.backoff import Backoff
from ascend_common.adapters.kube.pod_index import PodIndex
from ascend_common.adapters.kubelet.source import KubeletSource
from ascend_common.pods import InvalidPod, SlimPod, raw_identity, slim_pod

log = logging.getLogger(__name__)

DEFAULT_MAX_PODS = 20_000
BACKOFF_CAP_S = 60.0
_WHY = {
    401: "the kubelet did not accept the token (is its webhook authentication on, "
    "--authentication-token-webhook? is the token file current?)",
    403: "the kubelet's authorizer refused (the service account needs get on nodes/proxy, "
    "or nodes/pods where KubeletFineGrainedAuthz is on)",
}


class KubeletPodError(Exception):
    """A read of /pods that gave no usable list; `status` is the HTTP status when there was one."""

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


@dataclass(frozen=True)
class _Parsed:
    pods: dict[str, SlimPod]
    invalid: list[tuple[str, str, str]]  # (namespace, name, reason)
    other_node: int
    over_cap: int


def parse_pod_list(body: bytes, node_name: str, max_pods: int) -> _Parsed:
    """A /pods body -> this node's SlimPods by uid (pure; run off the event loop, the body can be large).

    Raises KubeletPodError when the body is not a PodList; a single bad pod is skipped and named.
    """
    try:
        doc = json.loads(body)
    except ValueError as exc:
        raise KubeletPodError(f"the body is not JSON: {exc}") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("items", []), list):
        raise KubeletPodError("the body is not a PodList (no items list)")
    if doc.get("kind") not in (None, "PodList"):
        raise KubeletPodError(f"the body is a {str(doc.get('kind'))[:40]!r}, not a PodList")
    pods: dict[str, SlimPod] = {}
    invalid: list[tuple[str, str, str]] = []
    other = over = 0
    for item in doc.get("items") or []:
        try:
            pod = slim_pod(item)
        except InvalidPod as exc:
            ns, name, _ = raw_identity(item)
            invalid.append((ns or exc.namespace, name or exc.name, exc.reason))
            continue
        if pod.node_name and node_name and pod.node_name != node_name:
            other += 1  # the reference skips them too (kubelet_informer.go pollOnce)
            continue
        if len(pods) >= max_pods and pod.uid not in pods:
            over += 1
            continue
        pods[pod.uid] = pod
    return _Parsed(pods, invalid, other, over)


class KubeletPodSource(PodIndex):
    """A PodSource (ascend_common.adapters.pod_source) reading the kubelet's /pods every period."""

    def __init__(
        self,
        node_name: str,
        kubelet: KubeletSource,
        *,
        max_pods: int = DEFAULT_MAX_PODS,
        request_timeout_s: float = 10.0,
        backoff_cap_s: float = BACKOFF_CAP_S,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        super().__init__(node_name)
        self.kubelet = kubelet
        self._max_pods = max_pods
        self._timeout = request_timeout_s
        self._backoff = Backoff(kubelet.period_s, max(kubelet.period_s, backoff_cap_s))
        self._transport = transport
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._client: httpx.AsyncClient | None = None
        self._ca_stamp: tuple[int, int] | None = None
        self._token = ""
        self._token_stamp: tuple[int, int] | None = None
        self._invalid_seen: dict[str, str] = {}
        self._failing: str | None = None  # the reason of the current run of failures (one line per new reason)
        self.polls = 0  # successful reads
        self.failures = 0
        self.skipped_invalid = 0
        self.skipped_over_cap = 0
        self.last_error: str | None = None

    # -- readers (beyond the PodIndex) ----------------------------------------------------

    @property
    def resource_version(self) -> str:
        return ""  # the kubelet's list has none

    # -- lifecycle -----------------------------------------------------------------------------

    async def start(self) -> None:
        if self._task is not None:
            return
        k = self.kubelet
        if k.insecure_skip_verify:
            log.warning(
                "kubelet pod source: the kubelet's certificate is NOT verified; its token goes to whoever answers",
                extra={"url": k.url, "insecure_skip_verify": True},
            )
        log.info(
            "reading pods from the kubelet, no pod watch on the API server",
            extra={"node": self.node_name, "url": k.url, "period_s": k.period_s, "ca": str(k.ca_file or "")},
        )
        self._task = asyncio.create_task(self._run(), name=f"kubelet-pods-{self.node_name}")

    async def stop(self, timeout: float = 5.0) -> None:  # noqa: ASYNC109 - bounds the wait for the task
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            done, _ = await asyncio.wait({task}, timeout=timeout)
            if not done:
                log.warning("kubelet pod source did not stop in time", extra={"node": self.node_name})
        if self._client is not None:
            await self._client.aclose()
            self._client = None

    async def relist(self, timeout: float = 10.0) -> bool:  # noqa: ASYNC109 - a bounded wait is the API
        """Read /pods now and wait for it; False when no read succeeded within `timeout` s."""
        if self._task is None:
            raise RuntimeError("KubeletPodSource is not started")
        return await self._wait_relisted(self._wake.set, timeout)

    # -- the poll loop ---------------------------------------------------------------------

    async def _run(self) -> None:
        while True:
            serves = self._relist_requests
            self._wake.clear()
            delay = self.kubelet.period_s
            try:
                await self.poll_once()
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                delay = self._failed(exc)
            else:
                self._recovered()
                self._relisted(serves)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), delay)

    def _failed(self, exc: Exception) -> float:
        self.failures += 1
        status = exc.status if isinstance(exc, KubeletPodError) else None
        if isinstance(exc, KubeletPodError):
            reason = str(exc)
        elif isinstance(exc, httpx.HTTPError | OSError | ssl.SSLError):
            reason = f"{type(exc).__name__}: {exc}"[:300] or type(exc).__name__
        else:
            reason = f"{type(exc).__name__}: {exc}"[:300]
        self.last_error = reason
        delay = self._backoff.next()
        # A new reason is a warning; the same one again, once a minute of backoff has passed, is repeated.
        again = reason == self._failing
        self._failing = reason
        log.log(
            logging.INFO if again and self._backoff.attempts % 5 else logging.WARNING,
            "kubelet pod list failed; keeping the last good list, retrying",
            extra={
                "node": self.node_name,
                "url": self.kubelet.url,
                "status": status,
                "error": reason,
                "failures": self._backoff.attempts,
                "delay_s": round(delay, 3),
                "pods_kept": len(self._by_uid),
            },
        )
        return delay

    def _recovered(self) -> None:
        if self._failing is not None:
            log.info(
                "kubelet pod list read again",
                extra={"node": self.node_name, "after_failures": self._backoff.attempts, "pods": len(self._by_uid)},
            )
        self._failing = None
        self._backoff.reset()

    async def poll_once(self) -> None:
        """One read of /pods, applied; raises (and changes nothing) when the read gives no PodList."""
        client = await self._http()
        headers = {"Authorization": f"Bearer {self._token}", "Accept": "application/json"}
        cap = self.kubelet.max_body_bytes
        async with client.stream("GET", self.kubelet.url, headers=headers) as resp:
            if resp.status_code != 200:
                why = _WHY.get(resp.status_code, "")
                raise KubeletPodError(
                    f"HTTP {resp.status_code} from the kubelet" + (f": {why}" if why else ""), resp.status_code
                )
            declared = resp.headers.get("content-length")
            if declared is not None and declared.isdigit() and int(declared) > cap:
                raise KubeletPodError(f"the body ({declared} bytes) is over the {cap}-byte cap", 200)
            chunks: list[bytes] = []
            size = 0
            async for chunk in resp.aiter_bytes():
                size += len(chunk)
                if size > cap:
                    raise KubeletPodError(f"the body is over the {cap}-byte cap", 200)
                chunks.append(chunk)
        body = b"".join(chunks)
        del chunks
        parsed = await asyncio.to_thread(parse_pod_list, body, self.node_name, self._max_pods)
        del body
        self._report(parsed)
        self._apply(parsed.pods)

    async def _http(self) -> httpx.AsyncClient:
        """The client (rebuilt when the CA file changes) with the token read again if its file changed."""
        k = self.kubelet
        ca_stamp, token_stamp, token = await asyncio.to_thread(self._read_files)
        if token is not None:
            self._token = token
        if self._client is None or ca_stamp != self._ca_stamp:
            verify: ssl.SSLContext | bool = False
            if k.ca_file is not None and not k.insecure_skip_verify:
                verify = await asyncio.to_thread(_ssl_context, k.ca_file)
            if self._client is not None:
                await self._client.aclose()
                log.info("kubelet CA file changed; reconnecting", extra={"ca": str(k.ca_file)})
            self._client = httpx.AsyncClient(
                verify=verify, timeout=self._timeout, transport=self._transport, trust_env=False
            )
            self._ca_stamp = ca_stamp
        self._token_stamp = token_stamp
        return self._client

    def _read_files(self) -> tuple[tuple[int, int] | None, tuple[int, int], str | None]:
        """(the CA file's stamp, the token file's stamp, the token when its file changed); in a thread."""
        ca = self.kubelet.ca_file
        ca_stamp = _stamp(ca) if ca is not None and not self.kubelet.insecure_skip_verify else None
        try:
            token_stamp = _stamp(self.kubelet.token_file)
        except OSError as exc:
            raise KubeletPodError(f"cannot read the token file {self.kubelet.token_file}: {exc.strerror}") from None
        if token_stamp == self._token_stamp:
            return ca_stamp, token_stamp, None
        token = self.kubelet.token_file.read_text().strip()
        if not token:
            raise KubeletPodError(f"the token file {self.kubelet.token_file} is empty")
        return ca_stamp, token_stamp, token

    def _report(self, parsed: _Parsed) -> None:
        for ns, name, reason in parsed.invalid:
            ident = f"{ns}/{name}"
            if self._invalid_seen.get(ident) == reason:
                continue
            if len(self._invalid_seen) > 10 * self._max_pods:
                self._invalid_seen.clear()
            self._invalid_seen[ident] = reason
            self.skipped_invalid += 1
            log.warning("invalid pod skipped", extra={"node": self.node_name, "namespace": ns, "pod": name,
                                                      "reason": reason})  # fmt: skip
        if parsed.over_cap:
            self.skipped_over_cap += parsed.over_cap
            extra = {"node": self.node_name, "max_pods": self._max_pods, "skipped": parsed.over_cap}
            log.error("pod cache full, pods skipped", extra=extra)

    def _apply(self, snapshot: dict[str, SlimPod]) -> None:
        self.polls += 1
        self._replace(snapshot)


def _stamp(path: Path) -> tuple[int, int]:
    st = path.stat()
    return (st.st_mtime_ns, st.st_ino)


def _ssl_context(ca_file: Path) -> ssl.SSLContext:
    try:
        return ssl.create_default_context(cafile=str(ca_file))
    except (OSError, ssl.SSLError) as exc:
        raise KubeletPodError(f"cannot load the kubelet CA {ca_file}: {exc}") from None
