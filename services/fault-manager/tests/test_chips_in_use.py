"""ChipsInUse keeps the chips in use per pod event; it must equal a pass over the whole cache."""

from __future__ import annotations

import random
from types import MappingProxyType

from ascend_common.inuse import RUNNING, chips_in_use
from ascend_common.kube.pods import SlimPod
from fault_manager.app import ChipsInUse

PHASES = ("Pending", "Running", "Succeeded", "Failed")
CHIPS = [f"Ascend910-{i}" for i in range(4)]


def slim(uid: str, phase: str, chips: list[str], rv: int) -> SlimPod:
    annotations = {"huawei.com/kltDev": ",".join(chips)} if chips else {}
    return SlimPod(
        namespace="ml", name=f"pod-{uid}", uid=uid, phase=phase, node_name="node-a",
        annotations=MappingProxyType(annotations), labels=MappingProxyType({}), requests=MappingProxyType({}),
        deleting=False, created=0.0, resource_version=str(rv),
    )  # fmt: skip


def test_counts_follow_every_event_as_a_full_pass_would() -> None:
    in_use = ChipsInUse()
    cache: dict[str, SlimPod] = {}
    rng = random.Random(3)
    for rv in range(1, 600):
        uid = str(rng.randrange(12))
        if rng.random() < 0.2 and uid in cache:
            pod = cache.pop(uid)
            in_use.changed("DELETED", pod)
        else:
            pod = slim(uid, rng.choice(PHASES), rng.sample(CHIPS, rng.randrange(3)), rv)
            kind = "MODIFIED" if uid in cache else "ADDED"
            cache[uid] = pod
            in_use.changed(kind, pod)
        pods = list(cache.values())
        assert in_use.any_phase() == chips_in_use(pods)
        running = chips_in_use(pods, phases=(RUNNING,))
        assert {c for c in CHIPS if in_use.used_by_running_pod(c)} == running
