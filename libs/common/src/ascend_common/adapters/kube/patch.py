"""Writes to pods and nodes: strategic-merge patches with bounded retries, and node reads.

A strategic-merge patch of metadata carries no resourceVersion, so it cannot lose a concurrent
edit of other keys; a 409 here is the apiserver's own transient conflict and is simply retried.
Read-modify-write callers (ConfigMaps) re-read on 409 themselves.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from ascend_common.adapters.kube.client import DEFAULT_TIMEOUT_S, ApiClient, call, core_v1, discard, read_json, retrying

STRATEGIC_MERGE = "application/strategic-merge-patch+json"


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
    timeout: float = DEFAULT_TIMEOUT_S,  # noqa: ASYNC109 - per attempt, enforced in the worker thread too
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
        resp = await call(
            v1.patch_namespaced_pod,
            name,
            namespace,
            body,
            _content_type=STRATEGIC_MERGE,
            _preload_content=False,
            timeout=timeout,
        )
        discard(resp)  # the patched pod is not needed: the watch brings it to the cache

    await retrying(attempt, what, retries, base_delay)


async def patch_node(
    api: ApiClient,
    node: str,
    *,
    labels: Mapping[str, str | None] | None = None,
    annotations: Mapping[str, str | None] | None = None,
    retries: int = 3,
    base_delay: float = 0.2,
    timeout: float = DEFAULT_TIMEOUT_S,  # noqa: ASYNC109 - per attempt, enforced in the worker thread too
) -> SlimNode:
    """Set or delete (None) node labels and annotations in one strategic-merge patch; returns the node."""
    what = f"patch node {node}"
    body = _metadata_patch(what, labels=labels, annotations=annotations)
    v1 = core_v1(api)

    async def attempt() -> SlimNode:
        resp = await call(
            v1.patch_node, node, body, _content_type=STRATEGIC_MERGE, _preload_content=False, timeout=timeout
        )
        return slim_node(read_json(resp))

    return await retrying(attempt, what, retries, base_delay)


async def get_node(
    api: ApiClient,
    name: str,
    *,
    retries: int = 3,
    base_delay: float = 0.2,
    timeout: float = DEFAULT_TIMEOUT_S,  # noqa: ASYNC109 - per attempt, enforced in the worker thread too
) -> SlimNode:
    """Read a node (labels, annotations, addresses); KubeNotFound when it does not exist."""
    v1 = core_v1(api)

    async def attempt() -> SlimNode:
        resp = await call(v1.read_node, name, _preload_content=False, timeout=timeout)
        return slim_node(read_json(resp))

    return await retrying(attempt, f"get node {name}", retries, base_delay)
