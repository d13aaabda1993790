"""The chips the node's pods use, by one named predicate of ascend_common.inuse, kept one pod event at a time.

The event's pod takes its old share out and puts its new one in. A pass of the predicate over the
whole cache instead costs milliseconds of CPU on a 10,000-pod node, and every pod event (each
Volcano allocation patches one) asked for it. The fault-manager keeps one for each predicate:
in use for health (the verdicts) and in use for allocation (the free list and reset).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable

from ascend_common.pods import SlimPod

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
