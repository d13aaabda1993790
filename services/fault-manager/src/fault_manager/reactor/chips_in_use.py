"""The chips the node's pods use, by one named predicate of ascend_common.inuse, kept one pod event at a time.

The event's pod takes its old share out and puts its new one in. A pass of the predicate over the
whole cache instead costs milliseconds of CPU on a 10,000-pod node, and every pod event (each
Volcano allocation patches one) asked for it. The fault-manager keeps one for each predicate:
in use for health (the verdicts) and, for the free list, FreeListUse: the chips pods hold whole,
the chips soft-share pods hold, and the soft-share quotas summed per chip.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from ascend_common.inuse import (
    AICORE_QUOTA,
    ASCEND_REAL,
    HBM_QUOTA,
    SCHEDULING_POLICY,
    QuotaUse,
    allocation_share,
    chips_in_use_for_allocation,
    is_soft_share,
    quota_use,
)
from ascend_common.pods import SlimPod

log = logging.getLogger(__name__)

Predicate = Callable[[Iterable[SlimPod]], set[str]]


class ChipsInUse:
    def __init__(self, predicate: Predicate) -> None:
        self._predicate = predicate
        self._shares: dict[str, frozenset[str]] = {}  # uid -> the chips the predicate gives its pod
        self._pods: Counter[str] = Counter()  # chip -> pods using it

    def changed(self, kind: str, pod: SlimPod) -> None:
        old = self._shares.pop(pod.uid, None)
        if old is not None:
            self._count(old, -1)
        if kind == "DELETED":
            return
        share = frozenset(self._predicate([pod]))
        if share:
            self._shares[pod.uid] = share
            self._count(share, 1)

    def _count(self, share: frozenset[str], step: int) -> None:
        for chip in share:
            self._pods[chip] += step
            if self._pods[chip] <= 0:
                del self._pods[chip]

    def chips(self) -> frozenset[str]:
        """What the predicate over every pod of the cache would say."""
        return frozenset(self._pods)

    def __contains__(self, chip: object) -> bool:
        return chip in self._pods


@dataclass(frozen=True, slots=True)
class QuotaSum:
    """Σ of the quotas of the soft-share pods on one chip (reference `shareDevResourceQuota`)."""

    aicore: int = 0
    hbm_mb: int = 0


NO_QUOTA = QuotaSum()


@dataclass(frozen=True)
class PodUse:
    """What the free list needs of the node's pods; the rule itself is deviceinfo.reports `kept_from_free_list`."""

    whole: frozenset[str] = frozenset()  # chips a pod that is not soft-share holds
    shared: frozenset[str] = frozenset()  # chips soft-share pods hold
    quotas: Mapping[str, QuotaSum] = field(default_factory=dict)  # chip -> Σ over its summed soft-share pods


class FreeListUse:
    """The free list's view of the pods (PodUse), kept one pod event at a time as ChipsInUse is.

    A pod counts where chips_in_use_for_allocation counts it (its phase, AscendReal naming for
    soft share); a soft-share pod's quotas are summed on its chip when they parse (quota_use).
    """

    def __init__(self) -> None:
        self._whole = ChipsInUse(_whole_holders)
        self._shared = ChipsInUse(_soft_share_holders)
        self._quotas: dict[str, QuotaUse] = {}  # uid -> its summed quota
        self._sums: dict[str, tuple[int, int, int]] = {}  # chip -> (Σaicore, ΣHBM, pods summed)
        self._unparsed: set[str] = set()  # uids of held soft-share pods already logged as not summed

    def changed(self, kind: str, pod: SlimPod) -> None:
        self._whole.changed(kind, pod)
        self._shared.changed(kind, pod)
        old = self._quotas.pop(pod.uid, None)
        if old is not None:
            self._add(old, -1)
        if kind == "DELETED" or not allocation_share(pod) or not is_soft_share(pod):
            self._unparsed.discard(pod.uid)
            return
        use = quota_use(pod)
        if use is None:
            if pod.uid not in self._unparsed:
                self._unparsed.add(pod.uid)
                log.warning(
                    "soft-share pod's quotas not summed: AscendReal names no one chip, or a quota or the policy "
                    "does not parse",
                    extra={"pod": f"{pod.namespace}/{pod.name}", "annotations": _quota_annotations(pod)},
                )
            return
        self._unparsed.discard(pod.uid)
        self._quotas[pod.uid] = use
        self._add(use, 1)

    def _add(self, use: QuotaUse, step: int) -> None:
        aicore, hbm, pods = self._sums.get(use.chip, (0, 0, 0))
        pods += step
        if pods <= 0:
            del self._sums[use.chip]
        else:
            self._sums[use.chip] = (aicore + step * use.aicore, hbm + step * use.hbm_mb, pods)

    def use(self) -> PodUse:
        """What full passes of the predicates and quota_use over the cache would say."""
        quotas = {chip: QuotaSum(aicore, hbm) for chip, (aicore, hbm, _) in self._sums.items()}
        return PodUse(self._whole.chips(), self._shared.chips(), MappingProxyType(quotas))


def _whole_holders(pods: Iterable[SlimPod]) -> set[str]:
    return chips_in_use_for_allocation(p for p in pods if not is_soft_share(p))


def _soft_share_holders(pods: Iterable[SlimPod]) -> set[str]:
    return chips_in_use_for_allocation(p for p in pods if is_soft_share(p))


def _quota_annotations(pod: SlimPod) -> dict[str, str]:
    keys = (ASCEND_REAL, AICORE_QUOTA, HBM_QUOTA, SCHEDULING_POLICY)
    return {key: pod.annotations[key][:200] for key in keys if key in pod.annotations}
