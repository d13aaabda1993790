"""Which chips the node's pods use (contract section 8), as two named, pure predicates.

- In use for the free list and reset (`chips_in_use_for_allocation`): a Pending or Running pod
  names the chip, a vNPU on it (maybe with a `_<vfgID>` suffix) or a shared copy of it, in
  `huawei.com/AscendReal` or `huawei.com/kltDev` - what our plugin writes after Allocate. A
  soft-share pod (one carrying Volcano's `huawei.com/scheduler.softShareDev.aicoreQuota`) names
  its chip in AscendReal only: its kltDev ids `Ascend910-1-0..29` are anonymous slots of 100 per
  chip that name no chip (the reference's `GetPodsUsedNPUByKlt` reads AscendReal alone).
  Whether a chip soft-share pods hold is still free is the fault-manager's quota rule, from
  `quota_use`.
- In use for health (`chips_in_use_for_health`): the chip a PreSeparateNPU (or, with
  GraceToleranceOn, a FreeRestartNPU) fault leaves Healthy so the job on it is not disturbed.
  Reference pkg/device/ascendcommon.go `npuIsUsedNow`: an active pod (any phase but Succeeded or
  Failed, so a Pending pod Volcano bound counts) whose Volcano annotation `huawei.com/Ascend910`
  (`huawei.com/npu` on the A5 generation) names the chip exactly. Plus the allocation predicate
  over Running pods, as our health rule had it before: plain-path pods never carry the Volcano
  annotation, and a static vNPU pod carries only kltDev.

Shared by the device-plugin (its kubelet health without the fault-manager) and the fault-manager
(verdicts, free chips, reset preconditions). The one-pod functions let both keep the sets one pod
event at a time.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from ascend_common.chips import RESOURCE_PREFIX, ResourceType
from ascend_common.goconv import atoi
from ascend_common.naming import NPU_CORE, parse_device_id
from ascend_common.pods import FINISHED_PHASES, PENDING, RUNNING, PodLike
from ascend_common.softshare import (
    AICORE_QUOTA,
    HBM_QUOTA,
    SCHEDULING_POLICIES,
    SCHEDULING_POLICY,
    is_soft_share,
)

ASCEND_REAL = "huawei.com/AscendReal"
KLT_DEV = "huawei.com/kltDev"
ALLOCATION_PHASES = (PENDING, RUNNING)
# The Volcano annotation, `huawei.com/` + getAscend910Name(): Ascend910, or npu on A5. Both are
# read on every node: an entry must spell the chip's own name, which carries its type, so a key
# of the other generation can never match by accident.
VOLCANO_KEYS: tuple[str, ...] = tuple(RESOURCE_PREFIX + t.value for t in (ResourceType.ASCEND910, ResourceType.NPU))
# Reference common.PodAnnotationMaxLength: a longer value is skipped whole (Go counts bytes).
POD_ANNOTATION_MAX_LENGTH = 1024 * 1024


@functools.lru_cache(maxsize=8192)
def chips_named(value: str) -> frozenset[str]:
    """Chip names in an AscendReal/kltDev annotation value; cached: every pod change re-reads them all."""
    names: set[str] = set()
    for item in value.split(","):
        item = item.strip()
        if not item or item.startswith(NPU_CORE):
            continue
        try:
            names.add(parse_device_id(item).chip)
        except ValueError:
            continue  # another plugin's or a malformed entry: it names no chip of ours
    return frozenset(names)


def _too_long(value: str) -> bool:
    # Encoding a value that cannot be too long even at 4 bytes a character is wasted work.
    return len(value) * 4 > POD_ANNOTATION_MAX_LENGTH and len(value.encode()) > POD_ANNOTATION_MAX_LENGTH


@functools.lru_cache(maxsize=8192)
def _volcano_named(value: str) -> frozenset[str]:
    # The reference compares each comma-separated entry with the device name as it is (no
    # trimming), so only an entry that is a chip's exact name names it.
    names: set[str] = set()
    for item in value.split(","):
        try:
            parsed = parse_device_id(item)
        except ValueError:
            continue
        if parsed.chip == item:
            names.add(item)
    return frozenset(names)


def volcano_named(value: str) -> frozenset[str]:
    """Chip names a Volcano annotation value names exactly; none for a value over 1 MiB."""
    if not value or _too_long(value):
        return frozenset()
    return _volcano_named(value)


def annotation_int(annotations: Mapping[str, str], key: str) -> int | None:
    """Reference manager.go `parseAnnotationIntValue`: the annotation as an integer, the policy by its
    name; None when it is absent or does not parse."""
    value = annotations.get(key)
    if value is None:
        return None
    if key == SCHEDULING_POLICY:
        return SCHEDULING_POLICIES.get(value)
    return atoi(value)


@dataclass(frozen=True, slots=True)
class QuotaUse:
    """What one soft-share pod takes of its chip."""

    chip: str
    aicore: int
    hbm_mb: int
    policy: int  # 1 fixed-share, 2 elastic, 3 best-effort


def _is_chip_name(value: str) -> bool:
    try:
        return parse_device_id(value).chip == value
    except ValueError:
        return False


def quota_use(pod: PodLike) -> QuotaUse | None:
    """A soft-share pod's quota use (reference `calculateCardUsedResourceQuota`, one pod), or None.

    None when the pod has no AscendReal yet, or when its aicore, HBM or policy annotation does
    not parse: such a pod is not summed, as the reference skips it. Two deliberate differences,
    both leaving the pod out where the reference would sum it: AscendReal must be exactly one
    chip's name (the reference keys its sums by the whole value, so a value naming two chips, or
    a padded one, matches no chip and is never read: the same outcome, said outright), and a
    negative quota does not count (summed, it would make a full chip look free).
    """
    annotations = pod.annotations
    real = annotations.get(ASCEND_REAL)
    if real is None or not _is_chip_name(real):
        return None
    aicore, hbm = annotation_int(annotations, AICORE_QUOTA), annotation_int(annotations, HBM_QUOTA)
    policy = annotation_int(annotations, SCHEDULING_POLICY)
    if aicore is None or hbm is None or policy is None or aicore < 0 or hbm < 0:
        return None
    return QuotaUse(real, aicore, hbm, policy)


def allocation_share(pod: PodLike, phases: tuple[str, ...] = ALLOCATION_PHASES) -> frozenset[str]:
    """The chips one pod holds for the free list and reset, if its phase is in `phases`: its
    AscendReal/kltDev chips, a soft-share pod's AscendReal chips only."""
    if pod.phase not in phases:
        return frozenset()
    annotations = pod.annotations
    real, klt = annotations.get(ASCEND_REAL), annotations.get(KLT_DEV)
    if is_soft_share(annotations):
        return chips_named(real) if real is not None else frozenset()
    if klt is None:
        return chips_named(real) if real is not None else frozenset()
    return chips_named(klt) if real is None else chips_named(real) | chips_named(klt)


def health_share(pod: PodLike, resource_annotation_keys: tuple[str, ...] = VOLCANO_KEYS) -> frozenset[str]:
    """The chips one pod keeps Healthy despite a PreSeparateNPU fault (see the module's docstring)."""
    if pod.phase in FINISHED_PHASES:
        return frozenset()
    shares = [volcano_named(pod.annotations[key]) for key in resource_annotation_keys if key in pod.annotations]
    if pod.phase == RUNNING:
        shares.append(allocation_share(pod, (RUNNING,)))
    return frozenset[str]().union(*shares)


def chips_in_use_for_allocation(pods: Iterable[PodLike], phases: tuple[str, ...] = ALLOCATION_PHASES) -> set[str]:
    """Chips neither free nor to be reset: named in AscendReal/kltDev by a pod in `phases`."""
    used: set[str] = set()
    for pod in pods:
        used |= allocation_share(pod, phases)
    return used


def chips_in_use_for_health(
    pods: Iterable[PodLike], resource_annotation_keys: tuple[str, ...] = VOLCANO_KEYS
) -> set[str]:
    """Chips in use for the health rule: an active pod's Volcano annotation, or a Running pod's allocation."""
    used: set[str] = set()
    for pod in pods:
        used |= health_share(pod, resource_annotation_keys)
    return used
