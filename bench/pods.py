"""The pods the benchmarks plant in the fake API server (all bound to node-a).

Volcano pods are Pending with Volcano's annotations (the chips it chose, a predicate-time); each
Allocate on the Volcano path serves the oldest of them. They flow as on a busy node: a queue keeps
a few dozen pending ahead of the calls and removes each served pod once the next is served (it
ran and finished; its chips went to the next). Served pods do not pile up as Pending, which no
node would show and which would make every call walk hundreds of them.

Filler pods make up a full node cache: Running, with the labels, annotations and requests of
ordinary workloads; one in ten holds a chip (an `AscendReal` annotation), so the in-use rules have
something to read.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from bench.apiserver import PodSpec
from bench.stack import R
from tests.support.fake_apiserver import FakeApiServer

NODE = "node-a"
VOLCANO_NAMESPACE = "ml"
# The Volcano pods' patches; a node's other writes (labels, ConfigMaps) have other paths.
VOLCANO_PATCHES = f"/api/v1/namespaces/{VOLCANO_NAMESPACE}/pods/"
PODS_PATH = "/api/v1/pods"  # the cluster-wide pod list and watch both caches use
SYNC_TIMEOUT_S = 120.0


def volcano_pods(count: int, chips: Sequence[str], first: int = 0) -> list[PodSpec]:
    """`count` Pending pods, each annotated with all of `chips`, oldest first."""
    annotation = ",".join(sorted(chips))
    return [
        {
            "name": f"volcano-{i:05d}",
            "namespace": VOLCANO_NAMESPACE,
            "phase": "Pending",
            "requests": {R: len(chips)},
            "annotations": {R: annotation, "predicate-time": str(1000 + i)},
        }
        for i in range(first, first + count)
    ]


class PodStore(Protocol):
    """Where pods are planted: the fake API server in its own process or in this one."""

    def add_pods(self, pods: Sequence[PodSpec]) -> None: ...

    def remove_pod(self, name: str, namespace: str) -> None: ...

    def patches(self, path_prefix: str) -> int: ...


@dataclass
class LocalPods:
    """PodStore over a FakeApiServer running in this process."""

    api: FakeApiServer

    def add_pods(self, pods: Sequence[PodSpec]) -> None:
        for spec in pods:
            self.api.add_pod(**spec)

    def remove_pod(self, name: str, namespace: str) -> None:
        self.api.remove("pods", name, namespace)

    def patches(self, path_prefix: str) -> int:
        return self.api.count("PATCH", path_prefix)


@dataclass
class VolcanoQueue:
    """Volcano's pending pods for the chips `chips`, kept `ahead` of the Allocate calls."""

    store: PodStore
    chips: Sequence[str]
    ahead: int = 50  # far enough ahead that the pod a call serves is in the plugin's cache
    served: int = 0  # the index of the pod the next call serves

    def prime(self) -> None:
        self.store.add_pods(volcano_pods(self.ahead, self.chips))

    def served_one(self) -> None:
        """After a call: the pod before the one just served has finished; one more is scheduled."""
        if self.served:
            previous = volcano_pods(1, self.chips, first=self.served - 1)[0]
            self.store.remove_pod(previous["name"], previous["namespace"])
        self.store.add_pods(volcano_pods(1, self.chips, first=self.served + self.ahead))
        self.served += 1


def vnpu_pods(count: int, resource: str) -> list[PodSpec]:
    """`count` Pending pods asking for one vNPU of `resource` (the plain path finds them through
    PodResources and annotates them)."""
    return [
        {"name": f"vnpu-{i:05d}", "namespace": "ml", "phase": "Pending", "requests": {resource: 1}}
        for i in range(count)
    ]


def filler_pods(count: int, chips: Sequence[str]) -> list[PodSpec]:
    """`count` Running pods of ordinary workloads; every tenth holds one of `chips`, served by Volcano."""
    ordered = sorted(chips)
    pods: list[PodSpec] = []
    for i in range(count):
        spec: dict[str, object] = {
            "name": f"app-{i:05d}",
            "namespace": f"team-{i % 50:02d}",
            "phase": "Running",
            "labels": {"app": f"svc-{i % 400}", "pod-template-hash": f"{i * 7919 % 10**10:010d}"},
            "annotations": {"kubectl.kubernetes.io/restartedAt": "2026-01-01T00:00:00Z"},
            "requests": {"cpu": "250m", "memory": "512Mi"},
        }
        if i % 10 == 0:
            chip = ordered[(i // 10) % len(ordered)]
            spec["requests"] = {R: 1}
            # As Volcano leaves its pods once served: the chip it chose, marked taken, and the plugin's report.
            spec["annotations"] = {
                R: chip, "predicate-time": str(2**64 - 1), "huawei.com/AscendReal": chip, "huawei.com/kltDev": chip,
            }  # fmt: skip
        pods.append(spec)
    return pods


class RequestLog(Protocol):
    """The request count of a fake API server, in this process or in its own."""

    def count(self, method: str | None = None, path_prefix: str | None = None, *, watch: bool | None = None) -> int: ...


async def wait_pod_caches(api: RequestLog, caches: int) -> None:
    """Until `caches` pod caches have listed in full: each opens its watch only after its list."""
    async with asyncio.timeout(SYNC_TIMEOUT_S):
        # Another process's request log has no event to wait on: poll it.
        while await asyncio.to_thread(api.count, "GET", PODS_PATH, watch=True) < caches:  # noqa: ASYNC110
            await asyncio.sleep(0.1)
    await asyncio.sleep(0.5)  # the caches' debounced recompute after the list
