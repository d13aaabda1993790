"""A pod as this stack keeps it: `SlimPod`, parsed from the apiserver's JSON, and the pod phases.

Both the device-plugin (Volcano allocation, contract section 4) and the fault-manager (which
chips are in use, contract section 8) need the node's pods; neither may hold full client
objects (10,000 pods must fit in a small service), so a pod is cut down to `SlimPod` the moment
it is parsed, and pods that could not come from a sane apiserver are refused with InvalidPod.
The informer that feeds them is ascend_common.adapters.kube.pod_watch.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from types import MappingProxyType
from typing import Any, Literal, Protocol

from ascend_common.chips import RESOURCE_PREFIX

# The phases the rules name (a pod's status.phase; Unknown and an empty phase exist too).
PENDING, RUNNING = "Pending", "Running"
# The reference's GetActivePodListCache drops exactly these two phases; Unknown and an empty
# phase stay active.
FINISHED_PHASES = frozenset({"Succeeded", "Failed"})

MAX_ANNOTATIONS = 256
MAX_ANNOTATION_BYTES = 256 * 1024  # the apiserver's own cap on the total size of annotations
MAX_LABELS = 256
MAX_LABEL_BYTES = 64 * 1024
MAX_REQUEST = 1 << 20  # no node has a million NPUs; larger numbers are garbage, not demand

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
    phase = _str_field(status.get("phase"), "status.phase", ns, name, PENDING) or PENDING
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


def raw_identity(obj: Any) -> tuple[str, str, str]:
    """Best-effort (namespace, name, uid) of an object slim_pod refused, for logs and removal."""
    meta = obj.get("metadata") if isinstance(obj, Mapping) else None
    if not isinstance(meta, Mapping):
        return ("", "", "")
    out = tuple(
        v[:260] if isinstance(v, str) else "" for v in (meta.get("namespace"), meta.get("name"), meta.get("uid"))
    )
    return (out[0], out[1], out[2])


class PodLike(Protocol):
    """What the in-use predicates read of a pod: SlimPod, or a service's own view of one."""

    @property
    def phase(self) -> str: ...

    @property
    def annotations(self) -> Mapping[str, str]: ...


PodChange = Literal["ADDED", "MODIFIED", "DELETED"]


def pod_changes(old: Mapping[str, SlimPod], new: Mapping[str, SlimPod]) -> list[tuple[PodChange, SlimPod]]:
    """What turns the pod list `old` into `new` (both by uid), as the watch would have said it.

    DELETED (with the last known state) for every uid that is gone, then ADDED for every new uid
    and MODIFIED for every uid whose resourceVersion or any field a SlimPod keeps differs (a
    kubelet's static pod carries no resourceVersion, so the fields decide). The order of `new`
    is kept, so a caller sees the same order as the list it read.
    """
    changes: list[tuple[PodChange, SlimPod]] = [("DELETED", pod) for uid, pod in old.items() if uid not in new]
    for uid, pod in new.items():
        before = old.get(uid)
        if before is None:
            changes.append(("ADDED", pod))
        elif before != pod:
            changes.append(("MODIFIED", pod))
    return changes
