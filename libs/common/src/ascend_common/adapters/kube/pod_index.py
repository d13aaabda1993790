"""What every source of a node's pods gives its readers: the pods by uid and by (namespace, name),
the `on_change` callbacks, and whether the first list has landed. The API server's list+watch
(`pod_watch.PodCache`) and the kubelet's `/pods` (`adapters.kubelet.pods.KubeletPodSource`) fill it."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping

from ascend_common.pods import PodChange, SlimPod, pod_changes

log = logging.getLogger(__name__)

ChangeKind = PodChange
OnChange = Callable[[str, SlimPod], None]


class PodIndex:
    """The node's pods as SlimPods. One task on the event loop changes it, so readers and callbacks
    need no lock."""

    def __init__(self, node_name: str) -> None:
        self.node_name = node_name
        self.on_change: list[OnChange] = []
        self._by_uid: dict[str, SlimPod] = {}
        self._by_key: dict[tuple[str, str], SlimPod] = {}
        self._synced = asyncio.Event()
        # relist(): request n is served by the first whole list read after it was made.
        self._relist_requests = 0
        self._relist_served = 0
        self._relist_waiters: list[tuple[int, asyncio.Future[None]]] = []

    @property
    def synced(self) -> bool:
        return self._synced.is_set()

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

    async def _wait_relisted(self, kick: Callable[[], None], timeout: float) -> bool:  # noqa: ASYNC109
        """Ask for a new whole list (`kick` wakes the reader) and wait until one read after this
        request has landed; False on timeout."""
        self._relist_requests += 1
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        entry = (self._relist_requests, waiter)
        self._relist_waiters.append(entry)
        kick()
        try:
            await asyncio.wait_for(asyncio.shield(waiter), timeout)
        except TimeoutError:
            return False
        finally:
            if entry in self._relist_waiters:
                self._relist_waiters.remove(entry)
        return True

    def _relisted(self, serves: int) -> None:
        """A whole list landed that was started after the first `serves` relist requests."""
        self._relist_served = max(self._relist_served, serves)
        for request, waiter in self._relist_waiters:
            if request <= self._relist_served and not waiter.done():
                waiter.set_result(None)

    def _notify(self, kind: ChangeKind, pod: SlimPod) -> None:
        for callback in list(self.on_change):
            try:
                callback(kind, pod)
            except Exception:
                log.exception("pod cache callback failed", extra={"namespace": pod.namespace, "pod": pod.name})

    def _replace(self, snapshot: Mapping[str, SlimPod]) -> None:
        """A whole new list: kept, told to the callbacks as the changes a watch would have given."""
        changes = pod_changes(self._by_uid, snapshot)
        self._by_uid = dict(snapshot)
        self._by_key = {pod.key: pod for pod in snapshot.values()}
        for kind, pod in changes:
            self._notify(kind, pod)
        self._synced.set()
