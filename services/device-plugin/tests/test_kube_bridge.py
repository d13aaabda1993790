"""KubeBridge keeps the chips in use for health and the holders per pod event; they must equal a full pass."""

from __future__ import annotations

import random
from types import MappingProxyType
from typing import Any, cast

from ascend_common.inuse import ALLOCATION_PHASES, chips_in_use_for_allocation, chips_in_use_for_health
from ascend_common.pods import SlimPod
from ascend_device_plugin.kube import KubeBridge

PHASES = ("Pending", "Running", "Succeeded", "Failed", "Unknown")
CHIPS = [f"Ascend910-{i}" for i in range(4)]


def slim(uid: str, phase: str, chips: list[str], rv: int, key: str = "huawei.com/AscendReal") -> SlimPod:
    annotations = {key: ",".join(chips)} if chips else {}
    return SlimPod(
        namespace="ml", name=f"pod-{uid}", uid=uid, phase=phase, node_name="node-a",
        annotations=MappingProxyType(annotations), labels=MappingProxyType({}), requests=MappingProxyType({}),
        deleting=False, created=0.0, resource_version=str(rv),
    )  # fmt: skip


def full_pass(bridge: KubeBridge) -> tuple[set[str], set[str]]:
    pods = bridge.pods()
    return chips_in_use_for_health(pods), {p.uid for p in pods if p.phase in ALLOCATION_PHASES}


async def test_counts_follow_every_event_as_a_full_pass_would() -> None:
    bridge = KubeBridge(cast(Any, None), "node-a", lambda: None)
    rng = random.Random(5)
    for rv in range(1, 600):
        uid = str(rng.randrange(12))
        if rng.random() < 0.2:
            bridge._pods_changed("DELETED", slim(uid, "Running", [], rv))
        else:
            chips = rng.sample(CHIPS, rng.randrange(3))
            key = rng.choice(("huawei.com/AscendReal", "huawei.com/kltDev", "huawei.com/Ascend910"))
            bridge._pods_changed("MODIFIED", slim(uid, rng.choice(PHASES), chips, rv, key))
        assert (bridge.in_use_for_health(), bridge.holding()) == full_pass(bridge)
        assert set(bridge.uids()) == {p.uid for p in bridge.pods()}
        # The holders are the pods whose allocations the free-list predicate counts.
        holders = [p for p in bridge.pods() if p.uid in bridge.holding()]
        assert chips_in_use_for_allocation(holders) == chips_in_use_for_allocation(bridge.pods())
    if bridge._pending is not None:
        bridge._pending.cancel()
