"""Writes to pods and nodes: strategic-merge patches with bounded retries, and node reads.

A strategic-merge patch of metadata carries no resourceVersion, so it cannot lose a concurrent
edit of other keys; a 409 here is the apiserver's own transient conflict and is simply retried.
Read-modify-write callers (ConfigMaps) re-read on 409 themselves. The one write of a node's
status (`remove_node_resources`) is a patch of its `status` subresource, so it touches only the
keys it deletes and needs no more than `patch` on `nodes/status`.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from ascend_common.adapters.kube.client import (
    DEFAULT_TIMEOUT_S,
    ApiClient,
    KubeApiError,
    core_v1,
    discard,
    json_of,
    retrying,
)


@dataclass(frozen=True, slots=True)
class SlimNode:
    name: str
    uid: str
    labels: Mapping[str, str] = field(hash=False)
    annotations: Mapping[str, str] = field(hash=False)
    addresses: Mapping[str, str] = field(hash=False)  # address type -> first address of that type
    resource_version: str

    @property
    def internal_ip(self) -> str:
        return self.addresses.get("InternalIP", "")


def slim_node(obj: Mapping[str, Any]) -> SlimNode:
    meta = obj.get("metadata") or {}
    status = obj.get("status") or {}
    addresses: dict[str, str] = {}
    for entry in status.get("addresses") or []:
        if isinstance(entry, Mapping) and isinstance(entry.get("type"), str) and isinstance(entry.get("address"), str):
            addresses.setdefault(sys.intern(entry["type"]), entry["address"])
    return SlimNode(
        name=str(meta.get("name") or ""),
        uid=str(meta.get("uid") or ""),
        labels=MappingProxyType({str(k): str(v) for k, v in (meta.get("labels") or {}).items()}),
        annotations=MappingProxyType({str(k): str(v) for k, v in (meta.get("annotations") or {}).items()}),
        addresses=MappingProxyType(addresses),
        resource_version=str(meta.get("resourceVersion") or ""),
    )


def _metadata_patch(what: str, **maps: Mapping[str, str | None] | None) -> dict[str, Any]:
    """{"metadata": {...}} from the given maps; None as a value deletes that key."""
    meta: dict[str, Any] = {}
    for section, values in maps.items():
        if values is None:
            continue
        for key, value in values.items():
            if not isinstance(key, str) or not key or not (value is None or isinstance(value, str)):
                raise TypeError(f"{what}: {section} must map non-empty strings to strings or None")
        meta[section] = dict(values)
    if not meta:
        raise ValueError(f"{what}: nothing to patch")
    return {"metadata": meta}


async def patch_pod_annotations(
    api: ApiClient,
    namespace: str,
    name: str,
    annotations: Mapping[str, str | None],
    retries: int = 3,
    *,
    base_delay: float = 0.2,
    timeout: float = DEFAULT_TIMEOUT_S,  # noqa: ASYNC109 - per attempt, the body's reading included
) -> None:
    """Set (str) or delete (None) pod annotations with one strategic-merge patch.

    Transient failures (409, 429 honouring Retry-After, 5xx, timeouts) are retried up to
    `retries` more times; raises KubeNotFound (404, no retry), KubeRejected (e.g. 422, no
    retry) or KubeRetriesExhausted.
    """
    what = f"patch pod {namespace}/{name} annotations"
    body = _metadata_patch(what, annotations=annotations)
    v1 = core_v1(api)

    async def attempt() -> None:
        # The patched pod is not needed: the watch brings it to the cache.
        await discard(await v1.patch_namespaced_pod(name, namespace, body, timeout=timeout))

    await retrying(attempt, what, retries, base_delay)


async def patch_node(
    api: ApiClient,
    node: str,
    *,
    labels: Mapping[str, str | None] | None = None,
    annotations: Mapping[str, str | None] | None = None,
    retries: int = 3,
    base_delay: float = 0.2,
    timeout: float = DEFAULT_TIMEOUT_S,  # noqa: ASYNC109 - per attempt, the body's reading included
) -> SlimNode:
    """Set or delete (None) node labels and annotations in one strategic-merge patch; returns the node."""
    what = f"patch node {node}"
    body = _metadata_patch(what, labels=labels, annotations=annotations)
    v1 = core_v1(api)

    async def attempt() -> SlimNode:
        return slim_node(await json_of(await v1.patch_node(node, body, timeout=timeout)))

    return await retrying(attempt, what, retries, base_delay)


async def get_node(
    api: ApiClient,
    name: str,
    *,
    retries: int = 3,
    base_delay: float = 0.2,
    timeout: float = DEFAULT_TIMEOUT_S,  # noqa: ASYNC109 - per attempt, the body's reading included
) -> SlimNode:
    """Read a node (labels, annotations, addresses); KubeNotFound when it does not exist."""
    v1 = core_v1(api)

    async def attempt() -> SlimNode:
        return slim_node(await json_of(await v1.read_node(name, timeout=timeout)))

    return await retrying(attempt, f"get node {name}", retries, base_delay)


def resources_patch(capacity: Mapping[str, Any], resources: Iterable[str]) -> dict[str, Any] | None:
    """The status patch that deletes `resources` from a node's capacity and allocatable: the ones
    its capacity lists (the reference's RemoveOldResource looks at the capacity alone, and deletes
    from both); None when it lists none of them."""
    listed = [name for name in resources if name in capacity]
    if not listed:
        return None
    gone = dict.fromkeys(listed)
    return {"status": {"capacity": gone, "allocatable": dict(gone)}}


async def remove_node_resources(
    api: ApiClient,
    node: str,
    resources: Iterable[str],
    *,
    retries: int = 3,
    base_delay: float = 0.2,
    timeout: float = DEFAULT_TIMEOUT_S,  # noqa: ASYNC109 - per attempt, the body's reading included
) -> list[str]:
    """Delete extended resources the node no longer offers from its capacity and allocatable (a
    resource the kubelet stays aware of is never taken off them otherwise); returns the ones removed,
    [] when its capacity listed none. Raises KubeApiError when the node cannot be read or patched, or
    the patched node still lists one."""
    v1 = core_v1(api)

    async def read() -> Any:
        # resourceVersion 0: the apiserver's cache is fresh enough, as the reference reads it.
        return await json_of(await v1.read_node(node, query={"resourceVersion": "0"}, timeout=timeout))

    obj = await retrying(read, f"get node {node}", retries, base_delay)
    status = obj.get("status") if isinstance(obj, Mapping) else None
    capacity = status.get("capacity") if isinstance(status, Mapping) else None
    body = resources_patch(capacity if isinstance(capacity, Mapping) else {}, resources)
    if body is None:
        return []
    what = f"patch node {node} status"

    async def attempt() -> Any:
        return await json_of(await v1.patch_node_status(node, body, timeout=timeout))

    patched = (await retrying(attempt, what, retries, base_delay)).get("status") or {}
    removed = list(body["status"]["capacity"])
    if left := [r for r in removed if r in (patched.get("capacity") or {}) or r in (patched.get("allocatable") or {})]:
        raise KubeApiError(what, None, f"the node still lists {', '.join(left)}")
    return removed
