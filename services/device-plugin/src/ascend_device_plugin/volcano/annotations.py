"""The Volcano path of Allocate (contract section 4).

Volcano's Ascend plugin chooses the real chips at scheduling time and writes them on the pod:
`huawei.com/<type>` = `Ascend910-0,Ascend910-1` (dynamic vNPU mode: `huawei.com/npu-core` =
`<phy>-<template>` or `0,1`) and `predicate-time` = a decimal uint64. The kubelet's Allocate
carries only anonymous IDs, so the plugin finds the pod it is serving: an active (not finished)
pod of the node that requests the resource, carries the annotation, is not being deleted, whose
annotated device count equals the request, and whose predicate-time is the smallest not yet
taken; a pod without a readable predicate-time ranks last, as the largest time.
Reference: pkg/server/plugin.go `doWithVolcanoSchedule`, `checkAnnotationAllocateValid`,
`getOldestPod`, `getPredicateTimeFromPodAnnotation`; pkg/common/common.go `FilterPods`.

Where we are stricter than the reference: a pod whose device annotation does not parse is
skipped and reported, instead of being used with a wrong device list.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from ascend_common import goconv
from ascend_common.chip_traits import IdScheme, traits
from ascend_common.chips import RESOURCE_PREFIX, ChipFamily, ResourceType
from ascend_common.inuse import ASCEND_REAL, KLT_DEV
from ascend_common.naming import NPU_CORE, chip_name, parse_device_id
from ascend_common.pods import FINISHED_PHASES
from ascend_common.softshare import AICORE_QUOTA, is_soft_share
from ascend_common.vnpu import TEMPLATES, template_allowed

from ascend_device_plugin.allocation.annotations import PREDICATE_TIME, TAKEN, UINT64_MAX
from ascend_device_plugin.model.chip_pod import PodView

MAX_ANNOTATED_DEVICES = 64
MAX_ANNOTATION_LENGTH = 1024 * 1024  # the reference's PodAnnotationMaxLength
MAX_PHY_ID = 100  # the reference's MaxDevicesNum bound on a dynamic vNPU's phy id (GetVNPUSegmentInfo)
NPU_CORE_RESOURCE = RESOURCE_PREFIX + NPU_CORE

# Matched whole and with ASCII digits: `$` takes a trailing newline, `\d` (and int()) other scripts' digits.
_DECIMAL = re.compile(r"0|[1-9][0-9]{0,3}")  # a canonical phy id: no sign, no leading zeros
_UINT = re.compile(r"[0-9]+")  # what Go's strconv.ParseUint(s, 10, 64) accepts, before the range check


def atoi(value: str, what: str) -> int:
    """Go's strconv.Atoi on a 64-bit build; ValueError naming `what` otherwise."""
    number = goconv.atoi(value)
    if number is None:
        raise ValueError(f"{what} {value[:40]!r} is not an integer (or is out of the int range)")
    return number


def aicore_quota(annotations: Mapping[str, str]) -> int | None:
    """The pod's AI-core quota as the candidate rule reads it (Atoi, any value); None when the pod
    carries no quota (not a soft-share pod); ValueError when it is not an integer."""
    value = annotations.get(AICORE_QUOTA)
    return None if value is None else atoi(value, AICORE_QUOTA)


def annotation_key(resource_type: str) -> str:
    """The pod annotation Volcano writes for a resource type: `huawei.com/<type>`."""
    return RESOURCE_PREFIX + resource_type


def parse_predicate_time(value: str) -> int:
    """Parse `predicate-time` as Go's strconv.ParseUint(value, 10, 64) would; ValueError otherwise."""
    if not _UINT.fullmatch(value):
        raise ValueError(f"predicate-time {value[:40]!r} is not a decimal uint64")
    digits = value.lstrip("0") or "0"  # Go takes any number of leading zeros; int() stops at 4300 digits
    if len(digits) > len(TAKEN):
        raise ValueError(f"predicate-time {value[:40]!r} is out of the uint64 range")
    number = int(digits)
    if number > UINT64_MAX:
        raise ValueError(f"predicate-time {value[:40]!r} is out of the uint64 range")
    return number


def predicate_time(value: str | None) -> int:
    """The rank of a pod by its `predicate-time`: the time, or the largest one when it is missing or
    unreadable (getPredicateTimeFromPodAnnotation), so such a pod is served last, not never."""
    if value is None:
        return UINT64_MAX
    try:
        return parse_predicate_time(value)
    except ValueError:
        return UINT64_MAX


def _is_taken(value: str | None) -> bool:
    try:
        return value is not None and parse_predicate_time(value) == UINT64_MAX
    except ValueError:
        return False


def _items(value: str, what: str) -> list[str]:
    if len(value) > MAX_ANNOTATION_LENGTH:
        raise ValueError(f"{what} annotation is longer than {MAX_ANNOTATION_LENGTH} characters")
    items = [item.strip() for item in value.split(",")]
    if len(items) > MAX_ANNOTATED_DEVICES:
        raise ValueError(f"{what} annotation names {len(items)} devices, more than {MAX_ANNOTATED_DEVICES}")
    seen: set[str] = set()
    for index, item in enumerate(items):
        if not item:
            raise ValueError(f"{what} annotation has an empty item at position {index}")
        if item in seen:
            raise ValueError(f"{what} annotation names {item!r} twice")
        seen.add(item)
    return items


def parse_real_devices(value: str, rtype: ResourceType) -> list[str]:
    """The chips of a `huawei.com/<type>` annotation, in annotation order.

    Cached by value: every Allocate looks at every pending pod, and their annotations do not
    change between calls.
    """
    return list(_parse_real_devices(value, rtype))


@functools.lru_cache(maxsize=8192)
def _parse_real_devices(value: str, rtype: ResourceType) -> tuple[str, ...]:
    """See parse_real_devices.

    Every item must be a physical chip id of `rtype` in canonical form (`Ascend910-3`, not
    `Ascend910-03`, a vNPU or a shared copy): these names go verbatim into annotations that
    ClusterD and the fault-manager match by string.
    """
    items = _items(value, annotation_key(rtype.value))
    for item in items:
        try:
            parsed = parse_device_id(item)
        except ValueError:
            raise ValueError(f"{item!r} is not a device id") from None
        if parsed.rtype is not rtype or parsed.share_index is not None or parsed.vnpu_suffix is not None:
            raise ValueError(f"{item!r} is not a {rtype.value} chip")
        if chip_name(rtype, parsed.phy_id) != item:
            raise ValueError(f"{item!r} is not in canonical form {chip_name(rtype, parsed.phy_id)!r}")
    return tuple(items)


def annotated_chips(real: Sequence[str], family: ChipFamily, name_by_logic: Mapping[int, str]) -> list[str]:
    """The node's chip names for the chips Volcano annotated, in annotation order.

    On the 950 Volcano annotates logic ids: its 950 plugin maps each chosen `npu-<phy>` to the
    `DeviceID` of the node's `baseDeviceInfos` entry, the logic id (ascend-for-volcano
    `SetNPUTopologyToPodFn`, `buildPhyIdToDeviceIdMap`), and the reference's plugin reads the
    annotation back as logic ids (`getDeviceListIP`, `convertLogicToPhyIDWithLog`). Naming the chips
    here once lets every later step (the check, health, the rank table, AscendReal) work on the
    chips the container really gets. ValueError names a logic id the node does not have. Every
    other family annotates the chip names themselves.
    """
    if traits(family).id_scheme is not IdScheme.LOGIC:
        return list(real)
    names: list[str] = []
    for item in real:
        logic = parse_device_id(item).phy_id  # the number of `npu-<N>`, a logic id here
        if logic not in name_by_logic:
            raise ValueError(f"Volcano chose logic id {logic} ({item}), which this node does not have")
        names.append(name_by_logic[logic])
    return names


def kubelet_map(annotations: Mapping[str, str], rtype: ResourceType) -> dict[str, str] | None:
    """The kubelet id -> real chip map a Volcano allocation wrote on its pod (`kltDev`,
    `AscendReal`), to rebuild after a plugin restart; None when the pod carries neither;
    ValueError when they are malformed or do not pair up one to one. None for a soft-share pod:
    its kubelet ids are anonymous (100 per chip, any of them for any pod of the chip), and each
    reports its own chip's health anyway."""
    if is_soft_share(annotations):
        return None
    klt, real = annotations.get(KLT_DEV), annotations.get(ASCEND_REAL)
    if klt is None and real is None:
        return None
    if klt is None or real is None:
        raise ValueError(f"{KLT_DEV} and {ASCEND_REAL} come together; the pod has only one")
    kubelet_ids, devices = parse_real_devices(klt, rtype), parse_real_devices(real, rtype)
    if len(kubelet_ids) != len(devices):
        raise ValueError(f"{KLT_DEV} names {len(kubelet_ids)} devices, {ASCEND_REAL} {len(devices)}")
    return dict(zip(kubelet_ids, devices, strict=True))


@dataclass(frozen=True)
class DynamicRequest:
    """A `huawei.com/npu-core` annotation: one vNPU to create, or whole chips."""

    phy_ids: tuple[int, ...]  # the chip of the vNPU, or the whole chips by phy id
    template: str | None = None  # DCMI template name (e.g. "vir02") for a vNPU

    @property
    def is_vnpu(self) -> bool:
        return self.template is not None

    def core_count(self, chip_aicore: int) -> int:
        """How many `npu-core-<n>` devices the kubelet must have allocated for this request.

        Reference: checkAnnotationAllocateValid - a vNPU takes its template's AI cores, whole
        chips take all their cores.
        """
        if self.template is not None:
            return TEMPLATES[self.template].aicore
        return len(self.phy_ids) * chip_aicore


def parse_npu_core(value: str, *, family: ChipFamily | None = None) -> DynamicRequest:
    """Parse `<phy>-<template>` (a vNPU) or `0,1` (whole chips by phy id); ValueError otherwise.

    With `family`, the template must also be one this chip family can create.
    """
    value = value.strip()
    if "-" in value:
        parts = value.split("-")
        if len(parts) != 2:
            raise ValueError(f"{NPU_CORE_RESOURCE} annotation {value[:60]!r} is not <phy>-<template>")
        phy_text, template = (p.strip() for p in parts)
        phy = _phy(phy_text)
        if template not in TEMPLATES:
            raise ValueError(f"unknown vNPU template {template!r}")
        if family is not None and not template_allowed(family, template):
            raise ValueError(f"vNPU template {template!r} is not allowed on {family.value}")
        return DynamicRequest((phy,), template)
    return DynamicRequest(tuple(_phy(item) for item in _items(value, NPU_CORE_RESOURCE)))


def _phy(text: str) -> int:
    if not _DECIMAL.fullmatch(text) or int(text) > MAX_PHY_ID:
        raise ValueError(f"{text!r} is not a phy id (0..{MAX_PHY_ID})")
    return int(text)


def may_serve(pod: PodView) -> bool:
    """Whether pick_pod could choose this pod, or report it as a reject, for some resource: it is not
    finished or being deleted, it requests a `huawei.com/` resource and carries that resource's
    annotation, and it is not marked taken. The plugin keeps the pods of its cache that pass as they
    change, so an Allocate looks at Volcano's few waiting pods, not at every pod of a 10,000-pod node."""
    if pod.phase in FINISHED_PHASES or pod.deleting or pod.annotations.get(PREDICATE_TIME) == TAKEN:
        return False
    return any(
        count > 0 and name.startswith(RESOURCE_PREFIX) and name in pod.annotations
        for name, count in pod.requests.items()
    )


@dataclass(frozen=True)
class Reject:
    pod: PodView
    reason: str


@dataclass(frozen=True)
class VolcanoChoice:
    """The pod an Allocate serves, its real devices, and the pods skipped for bad annotations."""

    pod: PodView | None
    devices: tuple[str, ...] = ()  # physical resources: the annotated chips, annotation order
    dynamic: DynamicRequest | None = None  # npu-core: what to create or hand out
    rejects: tuple[Reject, ...] = ()


def pick_pod(
    pods: Iterable[PodView],
    resource_name: str,
    count: int,
    *,
    chip_aicore: int | None = None,
    soft_share: bool = False,
) -> VolcanoChoice:
    """Choose the pod this Allocate of `count` devices of `resource_name` is for.

    `resource_name` is `huawei.com/<physical type>` or `huawei.com/npu-core` (then
    `chip_aicore` is needed to count cores). vNPU resources have no Volcano path: the reference
    allocates them by the kubelet's IDs (plugin.go `useVolcano`).
    Smallest predicate-time wins; ties by creation time, then namespace/name, so the choice
    does not depend on the order of the pod cache. Only pods that pass `may_serve` can be chosen,
    so callers may hand in just those.

    `soft_share` (a physical resource under soft share, `checkAnnotationAllocateValid`): only pods
    with an AI-core quota are candidates, and the quota (Atoi) is what must equal `count`, not the
    number of annotated chips; a quota Atoi rejects makes the pod a reject. That the pod names
    exactly one chip is for the caller to check, so the refusal can name the pod.
    """
    dynamic = resource_name == NPU_CORE_RESOURCE
    rtype: ResourceType | None = None
    if dynamic:
        if chip_aicore is None or chip_aicore <= 0:
            raise ValueError("the npu-core resource needs the AI core count of a chip")
    else:
        if not resource_name.startswith(RESOURCE_PREFIX):
            raise ValueError(f"{resource_name!r} is not a huawei.com resource")
        try:
            rtype = ResourceType(resource_name.removeprefix(RESOURCE_PREFIX))
        except ValueError:
            raise ValueError(f"{resource_name!r} has no Volcano path (physical types and npu-core only)") from None

    rejects: list[Reject] = []
    best: tuple[tuple[int, float, str, str], PodView, tuple[str, ...], DynamicRequest | None] | None = None
    for pod in pods:
        if pod.request(resource_name) <= 0 or pod.phase in FINISHED_PHASES or pod.deleting:
            continue
        annotation = pod.annotations.get(resource_name)
        if annotation is None:
            continue
        raw_time = pod.annotations.get(PREDICATE_TIME)
        if raw_time == TAKEN:
            continue  # handed out already; its annotation no longer matters
        if soft_share and not is_soft_share(pod.annotations):
            continue  # under soft share Volcano counts 100 per chip: only a quota can match a request
        devices: tuple[str, ...] = ()
        request: DynamicRequest | None = None
        try:
            if rtype is not None:
                devices = _parse_real_devices(annotation, rtype)
                annotated = len(devices)
                if soft_share:
                    try:
                        annotated = aicore_quota(pod.annotations) or 0
                    except ValueError as exc:
                        rejects.append(Reject(pod, f"annotation {AICORE_QUOTA}: {exc}"))
                        continue
            else:
                request = parse_npu_core(annotation)
                annotated = request.core_count(chip_aicore or 0)
        except ValueError as exc:
            rejects.append(Reject(pod, f"annotation {resource_name}: {exc}"))
            continue
        if annotated != count:
            continue  # a pod waiting for another Allocate
        if _is_taken(raw_time):
            continue  # taken, written in a non-canonical form (leading zeros)
        time = predicate_time(raw_time)
        rank = (time, pod.created, pod.namespace, pod.name)
        if best is None or rank < best[0]:
            best = (rank, pod, devices, request)
    if best is None:
        return VolcanoChoice(None, rejects=tuple(rejects))
    _, pod, devices, request = best
    return VolcanoChoice(pod, devices, request, tuple(rejects))
