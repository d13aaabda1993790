"""Where the fault-manager's ConfigMaps go: the API server, or files (offline mode).

A small interface with two implementations, so the writers above it (device-info, reset
configs) are the same with and without a cluster. Optimistic concurrency is explicit: a
write names the resourceVersion it read, and a stale one raises Conflict.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, TypeVar

from ascend_common.adapters import hostfs
from ascend_common.adapters.kube.client import (
    ApiClient,
    KubeNotFound,
    core_v1,
    discard,
    json_of,
    retrying,
    status_of,
)
from ascend_common.adapters.kube.watch import WatchedObject, first_change
from ascend_common.watching import WatchPolicy

T = TypeVar("T")


class WatchUnavailable(Exception):
    """A watch could not be opened or broke: poll instead."""


class Conflict(Exception):
    """The object changed since it was read (HTTP 409): read it again and redo the change."""


@dataclass(frozen=True)
class ConfigMapState:
    data: dict[str, str]
    labels: dict[str, str]
    resource_version: str


class ConfigMaps(Protocol):
    async def get(self, namespace: str, name: str) -> ConfigMapState | None: ...

    async def put(
        self, namespace: str, name: str, data: dict[str, str], labels: dict[str, str], resource_version: str | None
    ) -> str:
        """Create (resource_version None) or update; returns the new resourceVersion."""

    async def delete(self, namespace: str, name: str) -> None: ...


class FollowedConfigMap(Protocol):
    """One ConfigMap as a watch keeps it (`ConfigMapWatch`): read it here, not from the server."""

    on_change: list[Callable[[], None]]

    @property
    def synced(self) -> bool:
        """The first list has landed: `state()` says what the server holds."""

    @property
    def version(self) -> int:
        """Changes seen so far."""

    def state(self) -> ConfigMapState | None: ...

    def start(self) -> None: ...

    async def stop(self) -> None: ...

    async def wait_synced(self, timeout: float) -> bool: ...  # noqa: ASYNC109 - a bounded wait is the API


def configmap_state(obj: Any) -> ConfigMapState | None:
    if not isinstance(obj, dict):
        return None
    meta = obj.get("metadata") or {}
    return ConfigMapState(
        dict(obj.get("data") or {}), dict(meta.get("labels") or {}), str(meta.get("resourceVersion") or "")
    )


class ConfigMapWatch:
    """One ConfigMap followed by name (watch.WatchedObject: list+watch, fieldSelector metadata.name)."""

    def __init__(self, watched: WatchedObject) -> None:
        self._watched = watched
        self.on_change = watched.on_change

    @property
    def synced(self) -> bool:
        return self._watched.synced

    @property
    def version(self) -> int:
        return self._watched.version

    def state(self) -> ConfigMapState | None:
        return configmap_state(self._watched.object)

    def start(self) -> None:
        self._watched.start()

    async def stop(self) -> None:
        await self._watched.stop()

    async def wait_synced(self, timeout: float) -> bool:  # noqa: ASYNC109 - a bounded wait is the API
        return await self._watched.wait_synced(timeout)


def _body(namespace: str, name: str, data: dict[str, str], labels: dict[str, str], rv: str | None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": namespace, "labels": labels}
    if rv is not None:
        meta["resourceVersion"] = rv
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta, "data": data}


class ApiConfigMaps:
    """ConfigMaps through the apiserver. Each call is retried on transient failures (429 after its
    Retry-After, 5xx, timeouts, connection errors) a few times with backoff and jitter, each attempt
    bounded by `timeout`; a 409 on a write is a Conflict at once (the caller re-reads)."""

    def __init__(
        self,
        api: ApiClient,
        timeout: float = 10.0,
        *,
        retries: int = 3,
        base_delay: float = 0.2,
        max_delay: float = 5.0,
    ) -> None:
        self._v1 = core_v1(api)
        self._timeout = timeout
        self._retries = retries
        self._base_delay = base_delay
        self._max_delay = max_delay

    async def _retrying(self, fn: Callable[[], Awaitable[T]], what: str) -> T:
        return await retrying(
            fn, what, self._retries, self._base_delay, max_delay=self._max_delay, passthrough=(Conflict,)
        )

    async def get(self, namespace: str, name: str) -> ConfigMapState | None:
        async def read() -> Any:
            return await json_of(await self._v1.read_namespaced_config_map(name, namespace, timeout=self._timeout))

        try:
            obj = await self._retrying(read, f"read configmap {namespace}/{name}")
        except KubeNotFound:
            return None
        return configmap_state(obj)

    async def put(
        self, namespace: str, name: str, data: dict[str, str], labels: dict[str, str], resource_version: str | None
    ) -> str:
        body = _body(namespace, name, data, labels, resource_version)

        async def write() -> Any:
            # A retry after a write that did land meets a 409 (the object exists, or its
            # resourceVersion moved): a Conflict, and the caller re-reads what is there.
            try:
                if resource_version is None:
                    resp = await self._v1.create_namespaced_config_map(namespace, body, timeout=self._timeout)
                else:
                    resp = await self._v1.replace_namespaced_config_map(name, namespace, body, timeout=self._timeout)
                return await json_of(resp)
            except Exception as exc:
                if status_of(exc) == 409:
                    raise Conflict(f"configmap {namespace}/{name} changed since it was read") from exc
                raise

        obj = await self._retrying(write, f"write configmap {namespace}/{name}")
        return str((obj.get("metadata") or {}).get("resourceVersion") or "")

    async def wait_change(self, namespace: str, name: str, within: float, resource_version: str | None) -> None:
        """Return when the ConfigMap is added, changed or deleted after `resource_version` (the one
        last read; None: it did not exist), or after about `within` seconds.

        A watch with a field selector on the name (watch.first_change: cancelling ends it at once).
        Errors end the wait early: the caller re-reads either way.
        """
        try:
            await first_change(
                self._v1.list_namespaced_config_map, namespace, timeout_seconds=max(1, int(within)),
                fieldSelector=f"metadata.name={name}", resourceVersion=resource_version or None,
            )  # fmt: skip
        except Exception as exc:  # the API may refuse watches: a plain poll takes over
            raise WatchUnavailable(str(exc)) from exc

    def watch(self, namespace: str, name: str, policy: WatchPolicy | None = None) -> ConfigMapWatch:
        """A watch of one ConfigMap by name, for a reader that would otherwise poll it (start it)."""
        list_fn = self._v1.list_namespaced_config_map
        return ConfigMapWatch(WatchedObject("configmap", list_fn, namespace, name=name, policy=policy or WatchPolicy()))

    async def delete(self, namespace: str, name: str) -> None:
        async def delete() -> None:
            await discard(await self._v1.delete_namespaced_config_map(name, namespace, timeout=self._timeout))

        with contextlib.suppress(KubeNotFound):  # gone already
            await self._retrying(delete, f"delete configmap {namespace}/{name}")


@dataclass
class OfflineConfigMaps:
    """Offline mode: objects kept in memory (served at /v1/kube/objects) and mirrored as files.

    The files are written on the event loop, without a thread: each is a few kilobytes to a
    local disk, written at most once per --write-interval (the writers' pace), which costs less
    than a thread hop and keeps a write and the next read of it in order without a lock.
    """

    root: Path
    objects: dict[tuple[str, str], ConfigMapState] = field(default_factory=dict)
    _rv: int = 0

    async def get(self, namespace: str, name: str) -> ConfigMapState | None:
        return self.objects.get((namespace, name))

    async def put(
        self, namespace: str, name: str, data: dict[str, str], labels: dict[str, str], resource_version: str | None
    ) -> str:
        current = self.objects.get((namespace, name))
        if (current is None) != (resource_version is None) or (
            current is not None and current.resource_version != resource_version
        ):
            raise Conflict(f"configmap {namespace}/{name} changed since it was read")
        self._rv += 1
        state = ConfigMapState(dict(data), dict(labels), str(self._rv))
        self.objects[(namespace, name)] = state
        self._write_file(namespace, name, state)
        return state.resource_version

    async def delete(self, namespace: str, name: str) -> None:
        self.objects.pop((namespace, name), None)
        hostfs.remove_file(self.root, f"configmaps/{namespace}/{name}.json")

    def _write_file(self, namespace: str, name: str, state: ConfigMapState) -> None:
        body = _body(namespace, name, state.data, state.labels, state.resource_version)
        hostfs.write_file(self.root, f"configmaps/{namespace}/{name}.json", json.dumps(body, indent=2).encode(),
                          0o644, fsync=False)  # fmt: skip

    nodes: dict[str, dict[str, str]] = field(default_factory=dict)  # node -> annotations we set

    async def node_annotations(self, node: str) -> dict[str, str] | None:
        """The annotations of the node as the last run left them (None: no such file)."""
        try:
            body = json.loads((self.root / "nodes" / f"{node}.json").read_text())
        except FileNotFoundError:
            return None
        annotations = {str(k): str(v) for k, v in (body.get("metadata", {}).get("annotations") or {}).items()}
        self.nodes[node] = {**annotations, **self.nodes.get(node, {})}
        return annotations

    async def annotate_node(self, node: str, annotations: dict[str, str]) -> None:
        self.nodes.setdefault(node, {}).update(annotations)
        body = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": node, "annotations": self.nodes[node]}}
        hostfs.write_file(self.root, f"nodes/{node}.json", json.dumps(body, indent=2).encode(), 0o644, fsync=False)

    def listing(self) -> list[dict[str, Any]]:
        objects = [
            _body(ns, name, s.data, s.labels, s.resource_version) for (ns, name), s in sorted(self.objects.items())
        ]
        objects += [
            {"apiVersion": "v1", "kind": "Node", "metadata": {"name": node, "annotations": annotations}}
            for node, annotations in sorted(self.nodes.items())
        ]
        return objects
