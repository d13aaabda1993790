"""Annotation repair: what to write back when a pod's allocation report was edited or lost.

Reference: pkg/server/manager.go `updatePodAnnotation` / `updateSpecTypePodAnnotation` and
pkg/device/ascendcommon.go `AddPodAnnotation`, run every ListAndWatch period (5 s): for each active
pod the kubelet's PodResources says holds the resource, it rewrites `huawei.com/kltDev`,
`huawei.com/AscendReal` and the device configuration annotation where they differ from what it
computes, but only for a pod that has lost AscendReal (one whose AscendReal exists is skipped).

Ours is event-driven: the plugin keeps the report it wrote per pod and compares it with each pod
event, so a lost or an edited value is written back on the pod's next event. Pure rules here; the
shell is allocation/repair.py.
"""

from __future__ import annotations

from collections.abc import Mapping

from ascend_common.inuse import ALLOCATION_PHASES, ASCEND_REAL, KLT_DEV

from ascend_device_plugin.allocation.annotations import CONFIG_910_KEY, CONFIG_NPU_KEY
from ascend_device_plugin.model.chip_pod import PodView

# The annotations of the report that others read to know which chips a pod holds (the scheduler,
# ClusterD, the fault-manager) and the job's rank table: the ones `AddPodAnnotation` corrects.
REPAIRED_KEYS: tuple[str, ...] = (KLT_DEV, ASCEND_REAL, CONFIG_910_KEY, CONFIG_NPU_KEY)


def kept(annotations: Mapping[str, str]) -> dict[str, str]:
    """The repaired annotations among those of a report (the rest, such as Volcano's mark, are not ours to keep)."""
    return {key: annotations[key] for key in REPAIRED_KEYS if key in annotations}


def adoptable(pod: PodView) -> dict[str, str] | None:
    """What a pod first seen after a restart is taken to have been written (its repaired annotations
    as they are), or None: only a Pending or Running pod, not being deleted, that carries the kltDev
    an allocation report writes is one of ours."""
    if pod.deleting or pod.phase not in ALLOCATION_PHASES or KLT_DEV not in pod.annotations:
        return None
    return kept(pod.annotations)


def repair_patch(written: Mapping[str, str], pod: PodView) -> dict[str, str]:
    """The annotations to write back: each written one the pod lost or holds with another value.
    Nothing for a pod that is being deleted or has finished (its devices are being freed: a write
    would only race its deletion)."""
    if pod.deleting or pod.phase not in ALLOCATION_PHASES:
        return {}
    current = pod.annotations
    return {key: value for key, value in written.items() if current.get(key) != value}
