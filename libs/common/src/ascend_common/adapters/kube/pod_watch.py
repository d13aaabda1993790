"""The pods of one node, as slim immutable records (ascend_common.pods), from one list+watch."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Mapping
from typing import Any, Literal

from ascend_common.adapters.clients.backoff import Backoff
from ascend_common.adapters.kube.client import ApiClient, core_v1, json_of, status_of
from ascend_common.adapters.kube.watch import RawWatch
from ascend_common.pods import InvalidPod, SlimPod, raw_identity, slim_pod

log = logging.getLogger(__name__)

DEFAULT_MAX_PODS = 20_000

ChangeKind = Literal["ADDED", "MODIFIED", "DELETED"]
OnChange = Callable[[str, "SlimPod"], None]


class PodCache:
    """One list+watch of a node's pods (fieldSelector spec.nodeName=<node>), kept as SlimPods by uid.

    One task on the event loop lists (in pages, read as raw JSON and slimmed page by page) and
    watches, so readers (`pods`, `get`, `by_uid`) and `on_change` callbacks need no lock. After a
    watch error or a 410 the cache re-lists (with backoff and jitter once failures repeat) and
    reports the difference as ADDED/MODIFIED/DELETED.
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
        self._task: asyncio.Task[None] | None = None
        self._watching: asyncio.Task[tuple[str, int]] | None = None  # the watch now open, cancelled by relist()
        self._invalid_seen: dict[str, str] = {}  # uid or ns/name -> reason already logged

    # -- readers ---------------------------------------------------------------------------

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
        if self._task is None:
            self._task = asyncio.create_task(self._run(), name=f"pod-cache-{self.node_name}")

    async def stop(self, timeout: float = 5.0) -> None:  # noqa: ASYNC109 - bounds the wait for the task
        """End the list+watch at once: its task is cancelled, and a live watch's connection closed with it."""
        task, self._task = self._task, None
        if task is None:
            return
        task.cancel()
        done, _ = await asyncio.wait({task}, timeout=timeout)
        if not done:
            log.warning("pod cache task did not stop in time", extra={"node": self.node_name, "timeout_s": timeout})
        elif not task.cancelled() and task.exception() is not None:
            log.error("pod cache task failed", extra={"node": self.node_name}, exc_info=task.exception())

    async def relist(self, timeout: float = 10.0) -> bool:  # noqa: ASYNC109 - a bounded wait is the API
        """Re-list now (a cold cache on the allocation path) and wait for it; False on timeout.

        Only a list that started after this call counts, so a pod created just before it is seen.
        """
        if self._task is None:
            raise RuntimeError("PodCache is not started")
        self._relist_requests += 1
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        entry = (self._relist_requests, waiter)
        self._relist_waiters.append(entry)
        if self._watching is not None:
            self._watching.cancel()  # the loop sees the request when the watch ends, and lists
        try:
            await asyncio.wait_for(asyncio.shield(waiter), timeout)
        except TimeoutError:
            return False
        finally:
            if entry in self._relist_waiters:
                self._relist_waiters.remove(entry)
        return True

    def _relist_pending(self) -> bool:
        return self._relist_requests > self._relist_served

    # -- the list+watch loop ---------------------------------------------------------------

    async def _run(self) -> None:
        backoff = Backoff(self._backoff_base_s, self._backoff_max_s)
        rv = ""
        need_list = True
        while True:
            try:
                while need_list or self._relist_pending():  # a relist() asked for during a list needs another
                    rv = await self._list()
                    need_list = False
                started = time.monotonic()
                self._watching = asyncio.create_task(self._watch(rv), name=f"pod-watch-{self.node_name}")
                try:
                    rv, events = await self._watching
                except asyncio.CancelledError:
                    current = asyncio.current_task()
                    if current is not None and current.cancelling():
                        raise  # stop(): this task itself is cancelled
                    need_list = True  # relist() ended the watch
                    continue
                finally:
                    self._watching = None
                if events or time.monotonic() - started >= self._watch_timeout_s / 2:
                    backoff.reset()  # a watch that delivered events or ran its course is a healthy one
                    continue
                # Ended early with nothing to say: a proxy or a sick server; do not spin on it.
                delay = backoff.next()
                log.info(
                    "pod watch ended early",
                    extra={"node": self.node_name, "failures": backoff.attempts, "delay_s": round(delay, 3)},
                )
                await asyncio.sleep(delay)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                need_list = True
                gone = status_of(exc) == 410
                delay = backoff.next()
                # A first 410 is routine (we were away too long): re-list at once. Anything else,
                # or 410s in a row, waits with backoff so that a sick apiserver is not hammered.
                first_gone = gone and backoff.attempts == 1
                if first_gone:
                    delay = 0.0
                log.log(
                    logging.INFO if first_gone else logging.WARNING,
                    "pod watch failed, re-listing",
                    extra={
                        "node": self.node_name,
                        "status": status_of(exc),
                        "error": f"{type(exc).__name__}: {exc}"[:300],
                        "failures": backoff.attempts,
                        "delay_s": round(delay, 3),
                    },
                )
                if delay:
                    await asyncio.sleep(delay)

    async def _list(self) -> str:
        v1 = core_v1(self._api)
        snapshot: dict[str, SlimPod] = {}
        over_cap: list[str] = []
        cont: str | None = None
        rv = ""
        serves = self._relist_requests  # read before the first page: this list is newer than those requests
        while True:
            # Pages keep the peak memory of a 10,000-pod list to one page of JSON at a time; each
            # page is slimmed at once, so the raw JSON of one page at most is alive.
            query: dict[str, Any] = {"limit": self._page_size}
            if cont:
                query["continue"] = cont
            else:
                query["fieldSelector"] = f"spec.nodeName={self.node_name}"
            page = await json_of(await v1.list_pod_for_all_namespaces(query=query, timeout=self._request_timeout_s))
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
            del page
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
        self._apply_list(snapshot, rv, len(over_cap), serves)
        return rv

    async def _watch(self, rv: str) -> tuple[str, int]:
        """Follow changes from `rv` until the server ends the watch; returns the last rv and the event count."""
        count = 0
        watch = RawWatch(
            core_v1(self._api).list_pod_for_all_namespaces,
            timeout_seconds=self._watch_timeout_s,
            fieldSelector=f"spec.nodeName={self.node_name}",
            resourceVersion=rv or None,
            allowWatchBookmarks="true",
        )
        async with watch as events:
            async for event in events:
                kind = event["type"]
                obj = event.get("object")
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
                    self._apply_delete(pod.uid if pod is not None else raw_identity(obj)[2], rv)
                else:
                    pod = self._slim(obj)
                    if pod is not None:
                        self._apply_upsert(pod)
                    else:
                        # A cached pod that became invalid leaves the cache: stale data is no better.
                        self._apply_delete(raw_identity(obj)[2], rv)
        return rv, count

    def _slim(self, obj: Any, *, deleted: bool = False) -> SlimPod | None:
        try:
            pod = slim_pod(obj)
        except InvalidPod as exc:
            ns, name, uid = raw_identity(obj)
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

    # -- state changes ---------------------------------------------------------------------

    def _notify(self, kind: ChangeKind, pod: SlimPod) -> None:
        for callback in list(self.on_change):
            try:
                callback(kind, pod)
            except Exception:
                log.exception("pod cache callback failed", extra={"namespace": pod.namespace, "pod": pod.name})

    def _apply_list(self, snapshot: dict[str, SlimPod], rv: str, skipped: int, serves: int) -> None:
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
        self._resource_version = rv or self._resource_version
        pod = self._by_uid.pop(uid, None)
        if pod is None:
            return
        if self._by_key.get(pod.key) is pod:
            del self._by_key[pod.key]
        self._notify("DELETED", pod)
