"""The node's pods as the allocation paths and health read them: one view per pod and the counts
kept up to date one pod event at a time (a pass over every cached pod per event costs milliseconds
of the event loop on a 10,000-pod node, and Allocate waits behind it)."""

from __future__ import annotations

from collections import Counter
from collections.abc import KeysView, Mapping
from dataclasses import dataclass, field

from ascend_common.inuse import ALLOCATION_PHASES, KLT_DEV, health_share
from ascend_common.pods import SlimPod

from ascend_device_plugin.model.chip_pod import PodView
from ascend_device_plugin.volcano.annotations import may_serve


def pod_view(pod: SlimPod) -> PodView:
    return PodView(
        namespace=pod.namespace,
        name=pod.name,
        uid=pod.uid,
        phase=pod.phase,
        annotations=pod.annotations,
        requests=pod.requests,
        labels=pod.labels,
        deleting=pod.deleting,
        created=pod.created,
    )


@dataclass
class NodePods:
    _views: dict[str, PodView] = field(init=False, default_factory=dict)  # by pod uid, following the cache
    _list: list[PodView] | None = field(init=False, default=None)
    _health_chips: Counter[str] = field(init=False, default_factory=Counter)  # chip -> pods using it for health
    # Uids of the pods that hold what they were allocated: those in the phases whose allocations
    # ascend_common.inuse.chips_in_use_for_allocation counts, from Allocate on (before the pod's
    # kltDev/AscendReal lands, the predicate cannot name its chips yet, but its mappings must stay).
    _holding: set[str] = field(init=False, default_factory=set)
    _allocated: dict[str, PodView] = field(init=False, default_factory=dict)  # holders that carry kltDev (by uid)
    _servable: dict[str, PodView] = field(init=False, default_factory=dict)  # pods the Volcano path can choose (by uid)

    def apply(self, kind: str, pod: SlimPod) -> tuple[PodView | None, PodView | None]:
        """One watch event: (the pod's view before it, its view now; None once deleted)."""
        # Views are kept per pod, so an event costs one conversion, not one per cached pod.
        old = self._views.get(pod.uid)
        if old is not None:
            self._count(old, -1)
        view: PodView | None = None
        if kind == "DELETED":
            self._views.pop(pod.uid, None)
        else:
            view = pod_view(pod)
            self._views[pod.uid] = view
            self._count(view, 1)
        self._list = None
        return old, view

    def _count(self, view: PodView, step: int) -> None:
        """Add (step 1) or take away (step -1) one pod's share of the chips in use for health, of the
        holders and of the pods the Volcano path can choose."""
        if step > 0 and may_serve(view):
            self._servable[view.uid] = view
        elif step < 0:
            self._servable.pop(view.uid, None)
        if view.phase in ALLOCATION_PHASES:
            if step > 0:
                self._holding.add(view.uid)
                if KLT_DEV in view.annotations:
                    self._allocated[view.uid] = view
            else:
                self._holding.discard(view.uid)
                self._allocated.pop(view.uid, None)
        for chip in health_share(view):
            self._health_chips[chip] += step
            if self._health_chips[chip] <= 0:
                del self._health_chips[chip]

    def in_use_for_health(self) -> set[str]:
        """The chips in use for health (what chips_in_use_for_health(pods()) would say)."""
        return set(self._health_chips)

    def holding(self) -> set[str]:
        """Uids of the Pending and Running pods; read it, do not keep or change it."""
        return self._holding

    def allocated(self) -> Mapping[str, PodView]:
        """Pending and Running pods that carry an allocation's `kltDev` annotation, by uid."""
        return self._allocated

    def servable(self) -> list[PodView]:
        return list(self._servable.values())

    def uids(self) -> KeysView[str]:
        return self._views.keys()

    def pods(self) -> list[PodView]:
        if self._list is None:
            self._list = list(self._views.values())
        return self._list
