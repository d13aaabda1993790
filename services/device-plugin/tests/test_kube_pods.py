"""The node's pod index (kube.pods.NodePods, fed by kube.feed.PodFeed) keeps the chips in use for health,
the holders and the pods the Volcano path can choose per pod event; they must equal a full pass."""

from __future__ import annotations

import random
from types import MappingProxyType

from ascend_common.inuse import ALLOCATION_PHASES, chips_in_use_for_allocation, chips_in_use_for_health
from ascend_common.pods import SlimPod
from ascend_device_plugin.allocation.annotations import PREDICATE_TIME, TAKEN
from ascend_device_plugin.kube.feed import PodFeed
from ascend_device_plugin.kube.pods import NodePods
from ascend_device_plugin.volcano.annotations import may_serve

PHASES = ("Pending", "Running", "Succeeded", "Failed", "Unknown")
CHIPS = [f"Ascend910-{i}" for i in range(4)]


def slim(
    uid: str, phase: str, chips: list[str], rv: int, key: str = "huawei.com/AscendReal",
    *, time: str | None = None, request: int = 0, deleting: bool = False,
) -> SlimPod:  # fmt: skip
    annotations = {key: ",".join(chips)} if chips else {}
    if time is not None:
        annotations[PREDICATE_TIME] = time
    requests = {"huawei.com/Ascend910": request} if request else {}
    return SlimPod(
        namespace="ml", name=f"pod-{uid}", uid=uid, phase=phase, node_name="node-a",
        annotations=MappingProxyType(annotations), labels=MappingProxyType({}), requests=MappingProxyType(requests),
        deleting=deleting, created=0.0, resource_version=str(rv),
    )  # fmt: skip


def full_pass(index: NodePods) -> tuple[set[str], set[str]]:
    pods = index.pods()
    return chips_in_use_for_health(pods), {p.uid for p in pods if p.phase in ALLOCATION_PHASES}


async def test_counts_follow_every_event_as_a_full_pass_would() -> None:
    index = NodePods()
    feed = PodFeed(index, "node-a", lambda: None)
    rng = random.Random(5)
    for rv in range(1, 600):
        uid = str(rng.randrange(12))
        if rng.random() < 0.2:
            feed.pod_changed("DELETED", slim(uid, "Running", [], rv))
        else:
            chips = rng.sample(CHIPS, rng.randrange(3))
            key = rng.choice(("huawei.com/AscendReal", "huawei.com/kltDev", "huawei.com/Ascend910"))
            pod = slim(
                uid, rng.choice(PHASES), chips, rv, key,
                time=rng.choice((None, "5", TAKEN)), request=rng.choice((0, 2)), deleting=rng.random() < 0.1,
            )  # fmt: skip
            feed.pod_changed("MODIFIED", pod)
        assert (index.in_use_for_health(), index.holding()) == full_pass(index)
        assert {p.uid for p in index.servable()} == {p.uid for p in index.pods() if may_serve(p)}
        assert set(index.uids()) == {p.uid for p in index.pods()}
        # The holders are the pods whose allocations the free-list predicate counts.
        holders = [p for p in index.pods() if p.uid in index.holding()]
        assert chips_in_use_for_allocation(holders) == chips_in_use_for_allocation(index.pods())
    if feed._pending is not None:
        feed._pending.cancel()


async def test_on_pod_gone_is_told_of_a_deletion_and_of_a_first_finished_phase_once() -> None:
    gone: list[tuple[str, str]] = []
    feed = PodFeed(NodePods(), "node-a", lambda: None, on_pod_gone=lambda view: gone.append((view.uid, view.phase)))
    feed.pod_changed("ADDED", slim("a", "Running", [], 1))
    feed.pod_changed("ADDED", slim("b", "Pending", [], 2))
    assert gone == []
    feed.pod_changed("MODIFIED", slim("a", "Succeeded", [], 3))
    feed.pod_changed("MODIFIED", slim("a", "Succeeded", [], 4))  # still finished: told once
    feed.pod_changed("DELETED", slim("b", "Running", ["Ascend910-1"], 5))
    assert gone == [("a", "Succeeded"), ("b", "Running")]
    # A deleted pod's last state is what is handed on (soft share reads its directory from it).
    feed.pod_changed("DELETED", slim("a", "Succeeded", [], 6))
    assert gone[-1] == ("a", "Succeeded")
    if feed._pending is not None:
        feed._pending.cancel()
