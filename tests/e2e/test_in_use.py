"""Drill: "in use for health" (reference npuIsUsedNow) across the whole node. A chip that a Pending
pod names in its Volcano annotation (bound by Volcano, not yet allocated) keeps a PreSeparateNPU
fault from taking it away; the same fault on a chip no pod names makes it Unhealthy everywhere."""

from __future__ import annotations

from typing import Any

from tests.e2e.stack import R, Stack, node_stack
from tests.support.exporter import ExporterProc
from tests.support.fake_apiserver import FakeApiServer

PRE_SEPARATE = "8118043C"  # PreSeparateNPU in the reference table; not a network code, no escalation rule
POD = "train-0"


def bound_pod(api: FakeApiServer, chip: str) -> None:
    """A pod as Volcano leaves it once bound: Pending, its chips in the annotation, a predicate time."""
    api.add_pod(POD, "ml", phase="Pending", requests={R: 1}, annotations={R: chip, "predicate-time": "1000"})


def kubelet_ever_unhealthy(s: Stack, chip: str) -> bool:
    return any(chip in msg.unhealthy for msg in s.kubelet.streams.get(R, []))


async def test_a_pre_separate_chip_a_pending_volcano_pod_names_stays_healthy() -> None:
    named: list[str] = []

    async def schedule(api: FakeApiServer, exporter: ExporterProc) -> None:
        async with exporter.client() as client:
            chips = (await client.get("/v1/chips")).json()["chips"]
        named.append(sorted(c["name"] for c in chips)[0])
        bound_pod(api, named[0])  # listed by both services' pod caches at start

    async with node_stack(plugin_args=("--volcano-type",), prepare=schedule) as s:
        used = named[0]
        logic = {name: lg for lg, name in s.names.items()}
        idle = next(name for name in sorted(s.names.values()) if name != used)
        await s.fault(logic[used], PRE_SEPARATE)
        await s.fault(logic[idle], PRE_SEPARATE)
        await s.agree({idle})
        verdicts: dict[str, Any] = await s.verdicts()
        assert (verdicts[used]["fault_level"], verdicts[used]["schedulable"]) == ("PreSeparateNPU", True)
        assert (verdicts[idle]["fault_level"], verdicts[idle]["schedulable"]) == ("PreSeparateNPU", False)
        assert not kubelet_ever_unhealthy(s, used), "the pod's chip never left the kubelet"

        # The pod goes: nothing keeps the chip any more.
        s.api.remove("pods", POD, "ml")
        await s.agree({used, idle})

        # A pod bound to it again (a watch event this time): Healthy again for the kubelet.
        bound_pod(s.api, used)
        await s.agree({idle})
        assert s.kubelet.registration_count(R) == 1
