"""The pods of one node, as slim immutable records (ascend_common.pods), from one list+watch."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Mapping
from typing import Any

from ascend_common.adapters.kube.client import ApiClient, core_v1, json_of
from ascend_common.adapters.kube.pod_index import PodIndex
from ascend_common.adapters.kube.watch import Reflector
from ascend_common.pods import InvalidPod, SlimPod, raw_identity, slim_pod
from ascend_common.watching import WatchPolicy

log = logging.getLogger(__name__)

DEFAULT_MAX_PODS = 20_000


class PodCache(PodIndex):
    """One list+watch of a node's pods (fieldSelector spec.nodeName=<node>), kept as SlimPods by uid.

    One task on the event loop lists (in pages, read as raw JSON and slimmed page by page) and
    watches, so readers (`pods`, `get`, `by_uid`) and `on_change` callbacks need no lock. The
    watch runs as the adapter's Reflector runs every watch (5-10 minutes each, bookmarks, resumed
    from the last resourceVersion); after a 410 the cache re-lists and reports the difference as
    ADDED/MODIFIED/DELETED. `watch_timeout_s` fixes the watches' timeout (tests); by default each
    asks for one drawn from 5-10 minutes.
    """

    def __init__(
        self,
        api: ApiClient,
        node_name: str,
        *,
        max_pods: int = DEFAULT_MAX_PODS,
        watch_timeout_s: int | None = None,
        page_size: int = 500,
        request_timeout_s: float = 30.0,
        backoff_base_s: float = 0.8,
        backoff_max_s: float = 30.0,
        policy: WatchPolicy | None = None,
    ) -> None:
        super().__init__(node_name)
        self._api = api
        self._max_pods = max_pods
        if policy is None and watch_timeout_s is not None:
            policy = WatchPolicy.fixed(watch_timeout_s, backoff_base_s, backoff_max_s)
        elif policy is None:
            policy = WatchPolicy(backoff_base_s=backoff_base_s, backoff_max_s=backoff_max_s)
        self._page_size = page_size
        self._request_timeout_s = request_timeout_s
        self._resource_version = ""
        self._over_cap_logged_at = 0.0
        self.skipped_over_cap = 0
        self.skipped_invalid = 0
        self.lists = 0
        self._task: asyncio.Task[None] | None = None
        self._reflector = Reflector(
            "pod", core_v1(api).list_pod_for_all_namespaces, name=node_name, relist=self._list,
            on_event=self._event, policy=policy, fieldSelector=f"spec.nodeName={node_name}",
        )  # fmt: skip
        self._invalid_seen: dict[str, str] = {}  # uid or ns/name -> reason already logged

    # -- readers ---------------------------------------------------------------------------

    @property
    def resource_version(self) -> str:
        return self._resource_version

    @property
    def watches(self) -> int:
        """Watch requests made so far."""
        return self._reflector.watches

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
        return await self._wait_relisted(self._reflector.list_again, timeout)

    def _relist_pending(self) -> bool:
        return self._relist_requests > self._relist_served

    # -- the list+watch loop ---------------------------------------------------------------

    async def _run(self) -> None:
        await self._reflector.run()

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

    def _event(self, kind: str, obj: Mapping[str, Any]) -> None:
        rv = self._reflector.resource_version
        if kind == "DELETED":
            pod = self._slim(obj, deleted=True)
            self._apply_delete(pod.uid if pod is not None else raw_identity(obj)[2], rv)
            return
        pod = self._slim(obj)
        if pod is not None:
            self._apply_upsert(pod)
        else:
            # A cached pod that became invalid leaves the cache: stale data is no better.
            self._apply_delete(raw_identity(obj)[2], rv)

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

    def _apply_list(self, snapshot: dict[str, SlimPod], rv: str, skipped: int, serves: int) -> None:
        self._resource_version = rv
        self.lists += 1
        self.skipped_over_cap += skipped
        self._replace(snapshot)
        self._relisted(serves)

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
