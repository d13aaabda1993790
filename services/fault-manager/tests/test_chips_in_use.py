"""ChipsInUse keeps a predicate's in-use set per pod event; it must equal the predicate over the whole cache."""

from __future__ import annotations

import random
from types import MappingProxyType

from ascend_common.inuse import chips_in_use_for_allocation, chips_in_use_for_health
from ascend_common.pods import SlimPod
from fault_manager.reactor.chips_in_use import ChipsInUse

PHASES = ("Pending", "Running", "Succeeded", "Failed", "Unknown")
CHIPS = [f"Ascend910-{i}" for i in range(4)]
KEYS = ("huawei.com/kltDev", "huawei.com/AscendReal", "huawei.com/Ascend910")


def slim(uid: str, phase: str, annotations: dict[str, str], rv: int = 1) -> SlimPod:
    return SlimPod(
        namespace="ml", name=f"pod-{uid}", uid=uid, phase=phase, node_name="node-a",
        annotations=MappingProxyType(annotations), labels=MappingProxyType({}), requests=MappingProxyType({}),
        deleting=False, created=0.0, resource_version=str(rv),
    )  # fmt: skip


def test_counts_follow_every_event_as_a_full_pass_would() -> None:
    allocation, health_use = ChipsInUse(chips_in_use_for_allocation), ChipsInUse(chips_in_use_for_health)
    cache: dict[str, SlimPod] = {}
    rng = random.Random(3)
    for rv in range(1, 800):
        uid = str(rng.randrange(12))
        if rng.random() < 0.2 and uid in cache:
            pod = cache.pop(uid)
            allocation.changed("DELETED", pod)
            health_use.changed("DELETED", pod)
        else:
            keys = rng.sample(KEYS, rng.randrange(len(KEYS) + 1))
            annotations = {key: ",".join(rng.sample(CHIPS, rng.randrange(3))) for key in keys}
            pod = slim(uid, rng.choice(PHASES), annotations, rv)
            kind = "MODIFIED" if uid in cache else "ADDED"
            cache[uid] = pod
            allocation.changed(kind, pod)
            health_use.changed(kind, pod)
        pods = list(cache.values())
        assert allocation.chips() == chips_in_use_for_allocation(pods)
        health = chips_in_use_for_health(pods)
        assert {c for c in CHIPS if c in health_use} == health


def test_a_pending_pod_volcano_bound_is_in_use_for_health_but_leaves_the_chip_free() -> None:
    allocation, health_use = ChipsInUse(chips_in_use_for_allocation), ChipsInUse(chips_in_use_for_health)
    for in_use in (allocation, health_use):
        in_use.changed("ADDED", slim("a", "Pending", {"huawei.com/Ascend910": "Ascend910-3", "predicate-time": "7"}))
    assert "Ascend910-3" in health_use and allocation.chips() == set()
    for in_use in (allocation, health_use):
        in_use.changed("MODIFIED", slim("a", "Succeeded", {"huawei.com/Ascend910": "Ascend910-3"}))
    assert "Ascend910-3" not in health_use
