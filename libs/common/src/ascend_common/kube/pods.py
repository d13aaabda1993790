"""The pods of one node, as slim immutable records, from one list+watch.

Both the device-plugin (Volcano allocation, contract section 4) and the fault-manager (which
chips are in use, contract section 8) need the node's pods; neither may hold full client
objects (10,000 pods must fit in a small service), so a pod is cut down to `SlimPod` the moment
it is parsed, and pods that could not come from a sane apiserver are refused with InvalidPod.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import re
import sys
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from types import MappingProxyType
from typing import Any, Literal

from ascend_common.kube.client import (
    ApiClient,
    WatchStream,
    backoff_s,
    core_v1,
    get_json,
    open_watch,
    status_of,
    watch_error,
)

log = logging.getLogger(__name__)

RESOURCE_PREFIX = "huawei.com/"
MAX_ANNOTATIONS = 256
MAX_ANNOTATION_BYTES = 256 * 1024  # the apiserver's own cap on the total size of annotations
MAX_LABELS = 256
MAX_LABEL_BYTES = 64 * 1024
MAX_REQUEST = 1 << 20  # no node has a million NPUs; larger numbers are garbage, not demand
DEFAULT_MAX_PODS = 20_000

# Matched with fullmatch: `$` alone would let a trailing newline through.
_DNS1123_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_DNS1123_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_QUANTITY = re.compile(r"^\+?([0-9]+)(k|M|G|T|P|E|Ki|Mi|Gi|Ti|Pi|Ei)?$")
_SUFFIX = {
    None: 1,
    "k": 10**3,
    "M": 10**6,
    "G": 10**9,
    "T": 10**12,
    "P": 10**15,
    "E": 10**18,
    "Ki": 2**10,
    "Mi": 2**20,
    "Gi": 2**30,
    "Ti": 2**40,
    "Pi": 2**50,
    "Ei": 2**60,
}
_EMPTY: Mapping[str, Any] = MappingProxyType({})

ChangeKind = Literal["ADDED", "MODIFIED", "DELETED"]
OnChange = Callable[[str, "SlimPod"], None]


class InvalidPod(ValueError):
    """A pod object we refuse to cache; `reason` says why, namespace/name say which (when known)."""

    def __init__(self, reason: str, namespace: str = "", name: str = "") -> None:
        super().__init__(f"{namespace}/{name}: {reason}" if name else reason)
        self.reason = reason
        self.namespace = namespace
        self.name = name


@dataclass(frozen=True, slots=True)
class SlimPod:
    namespace: str
    name: str
    uid: str
    phase: str
    node_name: str
    # Read-only views: a cached record must not change under a reader's feet.
    annotations: Mapping[str, str] = field(hash=False)
    labels: Mapping[str, str] = field(hash=False)
    requests: Mapping[str, int] = field(hash=False)  # huawei.com/* only, summed over containers
    deleting: bool
    created: float  # unix seconds
    resource_version: str

    @property
    def key(self) -> tuple[str, str]:
        return (self.namespace, self.name)


def _as_mapping(value: Any, what: str, ns: str = "", name: str = "") -> Mapping[str, Any]:
    if value is None:
        return _EMPTY
    if not isinstance(value, Mapping):
        raise InvalidPod(f"{what} is not an object", ns, name)
    return value


def _utf8_len(s: str) -> int:
    # surrogatepass: JSON may carry lone surrogates (\ud800); they count, they do not crash us.
    return len(s.encode("utf-8", "surrogatepass"))


def _string_map(value: Any, what: str, max_keys: int, max_bytes: int, ns: str, name: str) -> Mapping[str, str]:
    raw = _as_mapping(value, what, ns, name)
    if not raw:
        return _EMPTY
    if len(raw) > max_keys:
        raise InvalidPod(f"{len(raw)} {what}, more than {max_keys}", ns, name)
    out: dict[str, str] = {}
    size = 0
    for key, val in raw.items():
        if not isinstance(key, str) or not isinstance(val, str):
            raise InvalidPod(f"{what} must map strings to strings", ns, name)
        size += _utf8_len(key) + _utf8_len(val)
        if size > max_bytes:
            raise InvalidPod(f"{what} larger than {max_bytes} bytes", ns, name)
        # Keys repeat across thousands of pods; interning keeps one copy of each.
        out[sys.intern(key)] = val
    return MappingProxyType(out)


def _quantity(value: Any, resource: str, ns: str, name: str) -> int:
    if isinstance(value, bool):
        raise InvalidPod(f"quantity of {resource} is not a number", ns, name)
    if isinstance(value, int):
        n = value
    elif isinstance(value, str):
        m = _QUANTITY.fullmatch(value)
        if not m:
            raise InvalidPod(f"quantity {value[:32]!r} of {resource} is not a whole number", ns, name)
        digits = m.group(1).lstrip("0") or "0"
        if len(digits) > len(str(MAX_REQUEST)):  # out of range whatever the suffix; int() stops at 4300 digits
            raise InvalidPod(f"quantity {value[:32]!r} of {resource} is out of range", ns, name)
        n = int(digits) * _SUFFIX[m.group(2)]
    else:
        raise InvalidPod(f"quantity of {resource} is not a number", ns, name)
    if n < 0 or n > MAX_REQUEST:
        raise InvalidPod(f"quantity {n} of {resource} is out of range", ns, name)
    return n


def _requests(spec: Mapping[str, Any], ns: str, name: str) -> Mapping[str, int]:
    containers = spec.get("containers")
    if containers is None:
        return _EMPTY
    if not isinstance(containers, list):
        raise InvalidPod("spec.containers is not a list", ns, name)
    totals: dict[str, int] = {}
    for container in containers:
        resources = _as_mapping(_as_mapping(container, "container", ns, name).get("resources"), "resources", ns, name)
        limits = _as_mapping(resources.get("limits"), "limits", ns, name)
        requests = _as_mapping(resources.get("requests"), "requests", ns, name)
        # Extended resources must have limits == requests; the limit wins when both are given
        # (the reference plugin reads limits), the request covers hand-written pods.
        for resource in {**requests, **limits}:
            if not isinstance(resource, str) or not resource.startswith(RESOURCE_PREFIX):
                continue
            value = limits[resource] if resource in limits else requests[resource]
            totals[sys.intern(resource)] = totals.get(resource, 0) + _quantity(value, resource, ns, name)
    return MappingProxyType(totals) if totals else _EMPTY


def _timestamp(value: Any, ns: str, name: str) -> float:
    if value is None or value == "":
        return 0.0
    if isinstance(value, datetime):
        return value.timestamp()
    if not isinstance(value, str):
        raise InvalidPod("creationTimestamp is not a string", ns, name)
    try:
        parsed = datetime.fromisoformat(value)
        # RFC 3339 always has a zone; a naive stamp is read as UTC rather than local time.
        return (parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)).timestamp()
    except (ValueError, OverflowError, OSError) as exc:
        raise InvalidPod(f"creationTimestamp {value[:40]!r} is not RFC 3339", ns, name) from exc


def _str_field(value: Any, what: str, ns: str, name: str, default: str = "") -> str:
    if value is None:
        return default
    if not isinstance(value, str):
        raise InvalidPod(f"{what} is not a string", ns, name)
    return value


def slim_pod(obj: Any) -> SlimPod:
    """Cut a pod (JSON dict from the wire, or the client's V1Pod) down to a SlimPod.

    Raises InvalidPod, and nothing else, for anything that is not a well-formed pod.
    """
    if not isinstance(obj, Mapping):
        to_json = getattr(obj, "to_json", None)
        if not callable(to_json):
            raise InvalidPod(f"not a pod object: {type(obj).__name__}")
        try:
            obj = json.loads(to_json())
        except Exception as exc:  # whatever a foreign model's serialiser throws, the pod is unusable
            raise InvalidPod(f"cannot serialise {type(obj).__name__}: {exc}") from exc
        if not isinstance(obj, Mapping):
            raise InvalidPod("not a pod object")
    meta = _as_mapping(obj.get("metadata"), "metadata")
    name, ns = meta.get("name"), meta.get("namespace")
    if not isinstance(name, str) or not isinstance(ns, str):
        raise InvalidPod("metadata.name and metadata.namespace must be strings")
    if len(ns) > 63 or not _DNS1123_LABEL.fullmatch(ns):
        raise InvalidPod(f"namespace {ns[:70]!r} is not a DNS-1123 label", ns[:70], name[:260])
    if len(name) > 253 or not _DNS1123_SUBDOMAIN.fullmatch(name):
        raise InvalidPod(f"name {name[:260]!r} is not a DNS-1123 subdomain", ns, name[:260])
    uid = meta.get("uid")
    if not isinstance(uid, str) or not uid or len(uid) > 128:
        raise InvalidPod("metadata.uid is missing or malformed", ns, name)
    annotations = _string_map(meta.get("annotations"), "annotations", MAX_ANNOTATIONS, MAX_ANNOTATION_BYTES, ns, name)
    labels = _string_map(meta.get("labels"), "labels", MAX_LABELS, MAX_LABEL_BYTES, ns, name)
    spec = _as_mapping(obj.get("spec"), "spec", ns, name)
    status = _as_mapping(obj.get("status"), "status", ns, name)
    # The apiserver sets Pending on create; an absent phase only appears in hand-made objects,
    # and Pending is the safe reading (a Pending pod counts as using its chips).
    phase = _str_field(status.get("phase"), "status.phase", ns, name, "Pending") or "Pending"
    return SlimPod(
        namespace=sys.intern(ns),
        name=name,
        uid=uid,
        phase=sys.intern(phase[:32]),
        node_name=sys.intern(_str_field(spec.get("nodeName"), "spec.nodeName", ns, name)),
        annotations=annotations,
        labels=labels,
        requests=_requests(spec, ns, name),
        deleting=meta.get("deletionTimestamp") is not None,
        created=_timestamp(meta.get("creationTimestamp"), ns, name),
        resource_version=_str_field(meta.get("resourceVersion"), "metadata.resourceVersion", ns, name),
    )


def _raw_identity(obj: Any) -> tuple[str, str, str]:
    """Best-effort (namespace, name, uid) of an object slim_pod refused, for logs and removal."""
    meta = obj.get("metadata") if isinstance(obj, Mapping) else None
    if not isinstance(meta, Mapping):
        return ("", "", "")
    out = tuple(
        v[:260] if isinstance(v, str) else "" for v in (meta.get("namespace"), meta.get("name"), meta.get("uid"))
    )
    return (out[0], out[1], out[2])


class _RelistRequested(Exception):
    pass


class PodCache:
    """One list+watch of a node's pods (fieldSelector spec.nodeName=<node>), kept as SlimPods by uid.

    The blocking list and watch run in one thread that parses and slims; the records are
    applied on the event loop, so readers (`pods`, `get`, `by_uid`) and `on_change` callbacks
    run on the loop and need no lock. After a watch error or a 410 the cache re-lists (with
    backoff and jitter once failures repeat) and reports the difference as ADDED/MODIFIED/DELETED.
    """

    def __init__(
        self,
        api: ApiClient,
        node_name: str,
        *,
        max_pods: int = DEFAULT_MAX_PODS,
        watch_timeout_s: int = 5,
        page_size: int = 500,
        request_timeout_s: float = 30.0,
        backoff_base_s: float = 0.5,
        backoff_max_s: float = 30.0,
    ) -> None:
        self._api = api
        self.node_name = node_name
        self._max_pods = max_pods
        self._watch_timeout_s = max(1, int(watch_timeout_s))
        self._page_size = page_size
        self._request_timeout_s = request_timeout_s
        self._backoff_base_s = backoff_base_s
        self._backoff_max_s = backoff_max_s
        self.on_change: list[OnChange] = []
        # State owned by the event loop.
        self._by_uid: dict[str, SlimPod] = {}
        self._by_key: dict[tuple[str, str], SlimPod] = {}
        self._resource_version = ""
        self._synced = asyncio.Event()
        # relist(): request n is served by the first list that started after it was made.
        self._relist_requests = 0
        self._relist_served = 0
        self._relist_waiters: list[tuple[int, asyncio.Future[None]]] = []
        self._over_cap_logged_at = 0.0
        self.skipped_over_cap = 0
        self.skipped_invalid = 0
        self.lists = 0
        # Shared with the watching thread.
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()
        self._stream: WatchStream | None = None
        self._relist_served_by_thread = 0  # thread-only: the newest request its current list serves
        self._invalid_seen: dict[str, str] = {}  # thread-only: uid or ns/name -> reason already logged

    # -- readers (event loop) --------------------------------------------------------------

    @property
    def synced(self) -> bool:
        return self._synced.is_set()

    @property
    def resource_version(self) -> str:
        return self._resource_version

    def pods(self) -> list[SlimPod]:
        return list(self._by_uid.values())

    def get(self, namespace: str, name: str) -> SlimPod | None:
        return self._by_key.get((namespace, name))

    def by_uid(self, uid: str) -> SlimPod | None:
        return self._by_uid.get(uid)

    def __len__(self) -> int:
        return len(self._by_uid)

    async def wait_synced(self, timeout: float) -> bool:  # noqa: ASYNC109 - a bounded wait is the API
        """True once the first list has landed; False if that did not happen within `timeout` s."""
        try:
            await asyncio.wait_for(self._synced.wait(), timeout)
        except TimeoutError:
            return False
        return True

    # -- lifecycle -------------------------------------------------------------------------

    async def start(self) -> None:
        if self._thread is not None:
            return
        self._loop = asyncio.get_running_loop()
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, name=f"pod-cache-{self.node_name}", daemon=True)
        self._thread.start()

    async def stop(self, timeout: float = 5.0) -> None:  # noqa: ASYNC109 - bounds a thread join
        """End the watch promptly: the socket of a live watch is shut down, not waited out."""
        thread, self._thread = self._thread, None
        if thread is None:
            return
        self._stop.set()
        stream = self._stream
        if stream is not None:
            stream.close()
        await asyncio.to_thread(thread.join, timeout)
        if thread.is_alive():
            # Only a request stuck before its own timeout gets here; the daemon thread ends with it.
            log.warning("pod cache thread did not stop in time", extra={"node": self.node_name, "timeout_s": timeout})
        self._loop = None

    async def relist(self, timeout: float = 10.0) -> bool:  # noqa: ASYNC109 - a bounded wait is the API
        """Re-list now (a cold cache on the allocation path) and wait for it; False on timeout.

        Only a list that started after this call counts, so a pod created just before it is seen.
        """
        if self._thread is None:
            raise RuntimeError("PodCache is not started")
        self._relist_requests += 1
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        entry = (self._relist_requests, waiter)
        self._relist_waiters.append(entry)
        stream = self._stream
        if stream is not None:
            stream.close()  # the thread sees the request when its read fails, and lists
        try:
            await asyncio.wait_for(asyncio.shield(waiter), timeout)
        except TimeoutError:
            return False
        finally:
            if entry in self._relist_waiters:
                self._relist_waiters.remove(entry)
        return True

    def _relist_pending(self) -> bool:
        return self._relist_requests > self._relist_served_by_thread

    # -- the watching thread ---------------------------------------------------------------

    def _post(self, fn: Callable[..., None], *args: Any) -> None:
        loop = self._loop
        if loop is None or self._stop.is_set():
            return
        with contextlib.suppress(RuntimeError):  # loop closed under us: we are shutting down
            loop.call_soon_threadsafe(fn, *args)

    def _run(self) -> None:
        failures = 0
        rv = ""
        need_list = True
        while not self._stop.is_set():
            try:
                if need_list or self._relist_pending():
                    rv = self._list()
                    need_list = False
                started = time.monotonic()
                rv, events = self._watch(rv)
                if self._stop.is_set():
                    break
                if events or time.monotonic() - started >= self._watch_timeout_s / 2:
                    failures = 0  # a watch that delivered events or ran its course is a healthy one
                    continue
                # Ended early with nothing to say: a proxy or a sick server; do not spin on it.
                failures += 1
                delay = backoff_s(failures, self._backoff_base_s, self._backoff_max_s)
                log.info(
                    "pod watch ended early",
                    extra={"node": self.node_name, "failures": failures, "delay_s": round(delay, 3)},
                )
                self._stop.wait(delay)
            except _RelistRequested:
                need_list = True
            except Exception as exc:
                if self._stop.is_set():
                    break
                need_list = True
                gone = status_of(exc) == 410
                failures += 1
                # A first 410 is routine (we were away too long): re-list at once. Anything else,
                # or 410s in a row, waits with backoff so that a sick apiserver is not hammered.
                first_gone = gone and failures == 1
                delay = 0.0 if first_gone else backoff_s(failures, self._backoff_base_s, self._backoff_max_s)
                log.log(
                    logging.INFO if first_gone else logging.WARNING,
                    "pod watch failed, re-listing",
                    extra={
                        "node": self.node_name,
                        "status": status_of(exc),
                        "error": f"{type(exc).__name__}: {exc}"[:300],
                        "failures": failures,
                        "delay_s": round(delay, 3),
                    },
                )
                if delay:
                    self._stop.wait(delay)

    def _list(self) -> str:
        v1 = core_v1(self._api)
        snapshot: dict[str, SlimPod] = {}
        over_cap: list[str] = []
        cont: str | None = None
        rv = ""
        serves = self._relist_requests  # read before the first page: this list is newer than those requests
        self._relist_served_by_thread = serves
        while True:
            # Pages keep the peak memory of a 10,000-pod list to one page of JSON at a time.
            kwargs: dict[str, Any] = {"limit": self._page_size, "_request_timeout": self._request_timeout_s}
            if cont:
                kwargs["_continue"] = cont
            else:
                kwargs["field_selector"] = f"spec.nodeName={self.node_name}"
            page = get_json(v1.list_pod_for_all_namespaces, **kwargs)
            if self._stop.is_set():
                raise _RelistRequested()
            meta = page.get("metadata") or {}
            if not cont:
                rv = str(meta.get("resourceVersion") or "")
            for item in page.get("items") or []:
                pod = self._slim(item)
                if pod is None:
                    continue
                if len(snapshot) >= self._max_pods and pod.uid not in snapshot:
                    over_cap.append(f"{pod.namespace}/{pod.name}")
                    continue
                snapshot[pod.uid] = pod
            cont = meta.get("continue") or None
            if not cont:
                break
        if over_cap:
            log.error(
                "pod cache full, pods skipped",
                extra={
                    "node": self.node_name,
                    "max_pods": self._max_pods,
                    "skipped": len(over_cap),
                    "sample": over_cap[:5],
                },
            )
        self._post(self._apply_list, snapshot, rv, len(over_cap), serves)
        return rv

    def _watch(self, rv: str) -> tuple[str, int]:
        """Follow changes from `rv` until the server ends the watch; returns the last rv and the event count."""
        v1 = core_v1(self._api)
        stream = open_watch(
            v1.list_pod_for_all_namespaces,
            field_selector=f"spec.nodeName={self.node_name}",
            resource_version=rv or None,
            allow_watch_bookmarks=True,
            timeout_seconds=self._watch_timeout_s,
        )
        self._stream = stream
        count = 0
        try:
            # stop() or relist() may have run before the stream was published.
            if self._stop.is_set():
                return rv, count
            if self._relist_pending():
                raise _RelistRequested()
            for event in stream:
                kind = event.get("type")
                obj = event.get("object")
                if kind == "ERROR":
                    raise watch_error(obj)
                meta = obj.get("metadata") if isinstance(obj, Mapping) else None
                if isinstance(meta, Mapping) and isinstance(meta.get("resourceVersion"), str):
                    rv = meta["resourceVersion"]
                if kind == "BOOKMARK":
                    continue
                if kind not in ("ADDED", "MODIFIED", "DELETED"):
                    log.warning("unknown watch event type", extra={"node": self.node_name, "type": str(kind)[:40]})
                    continue
                count += 1
                if kind == "DELETED":
                    pod = self._slim(obj, deleted=True)
                    uid = pod.uid if pod is not None else _raw_identity(obj)[2]
                    self._post(self._apply_delete, uid, rv)
                else:
                    pod = self._slim(obj)
                    if pod is not None:
                        self._post(self._apply_upsert, pod)
                    else:
                        # A cached pod that became invalid leaves the cache: stale data is no better.
                        self._post(self._apply_delete, _raw_identity(obj)[2], rv)
                if self._stop.is_set():
                    break
        except _RelistRequested:
            raise
        except Exception:
            if self._stop.is_set():
                return rv, count
            if self._relist_pending():  # our own close() from relist() broke the read
                raise _RelistRequested() from None
            raise
        finally:
            self._stream = None
            stream.close()
        if self._relist_pending():
            raise _RelistRequested()
        return rv, count

    def _slim(self, obj: Any, *, deleted: bool = False) -> SlimPod | None:
        try:
            pod = slim_pod(obj)
        except InvalidPod as exc:
            ns, name, uid = _raw_identity(obj)
            ident = uid or f"{ns}/{name}"
            if deleted:
                self._invalid_seen.pop(ident, None)
                return None
            if self._invalid_seen.get(ident) != exc.reason:
                if len(self._invalid_seen) > 10 * self._max_pods:
                    self._invalid_seen.clear()
                self._invalid_seen[ident] = exc.reason
                self.skipped_invalid += 1
                log.warning(
                    "invalid pod skipped",
                    extra={
                        "node": self.node_name,
                        "namespace": ns or exc.namespace,
                        "pod": name or exc.name,
                        "reason": exc.reason,
                    },
                )
            return None
        if deleted:
            self._invalid_seen.pop(pod.uid, None)
        return pod

    # -- state changes (event loop) --------------------------------------------------------

    def _notify(self, kind: ChangeKind, pod: SlimPod) -> None:
        for callback in list(self.on_change):
            try:
                callback(kind, pod)
            except Exception:
                log.exception("pod cache callback failed", extra={"namespace": pod.namespace, "pod": pod.name})

    def _apply_list(self, snapshot: dict[str, SlimPod], rv: str, skipped: int, serves: int) -> None:
        if self._stop.is_set():
            return
        old = self._by_uid
        self._by_uid = snapshot
        self._by_key = {pod.key: pod for pod in snapshot.values()}
        self._resource_version = rv
        self.lists += 1
        self.skipped_over_cap += skipped
        for uid, pod in old.items():
            if uid not in snapshot:
                self._notify("DELETED", pod)
        for uid, pod in snapshot.items():
            before = old.get(uid)
            if before is None:
                self._notify("ADDED", pod)
            elif before.resource_version != pod.resource_version:
                self._notify("MODIFIED", pod)
        self._synced.set()
        self._relist_served = max(self._relist_served, serves)
        for request, waiter in self._relist_waiters:
            if request <= self._relist_served and not waiter.done():
                waiter.set_result(None)

    def _apply_upsert(self, pod: SlimPod) -> None:
        if self._stop.is_set():
            return
        before = self._by_uid.get(pod.uid)
        if before is None and len(self._by_uid) >= self._max_pods:
            self.skipped_over_cap += 1
            now = time.monotonic()
            if now - self._over_cap_logged_at > 60:  # one line a minute, not one per pod
                self._over_cap_logged_at = now
                log.error(
                    "pod cache full, pod skipped",
                    extra={
                        "node": self.node_name,
                        "namespace": pod.namespace,
                        "pod": pod.name,
                        "max_pods": self._max_pods,
                        "skipped_total": self.skipped_over_cap,
                    },
                )
            return
        self._resource_version = pod.resource_version or self._resource_version
        if before is not None and before.resource_version == pod.resource_version:
            return  # a replay after a re-watch: nothing changed
        self._by_uid[pod.uid] = pod
        self._by_key[pod.key] = pod
        self._notify("ADDED" if before is None else "MODIFIED", pod)

    def _apply_delete(self, uid: str, rv: str) -> None:
        if self._stop.is_set():
            return
        self._resource_version = rv or self._resource_version
        pod = self._by_uid.pop(uid, None)
        if pod is None:
            return
        if self._by_key.get(pod.key) is pod:
            del self._by_key[pod.key]
        self._notify("DELETED", pod)
