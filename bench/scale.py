"""The scale target: 16 chips x 7 vNPUs (112 devices) without losing the other targets.

The simulator, like the chips, refuses a vNPU once a chip's AI cores are spent: an A3 chip has
24 and its smallest template (vir05_1c_16g) takes 5, so a3-16 holds at most 4 vNPUs a chip and
16 x 7 cannot be built. And a chip cut into vNPUs is offered only as its vNPUs, which have no
Volcano path (the reference's rule). Two stacks stand in for the target:

- 910a-8 with 14 x vir02 a chip (28 of its 32 cores): exactly 112 vNPU devices in one resource;
  the fault path to them and Allocate of one (plain path, the only one vNPUs have);
- a3-16 with its 16 chips whole: the fault path and the Volcano path on 16 chips.

Both run the whole stack on the fake API server (--kube api --volcano-type, the plugin
following the fault-manager).
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from ascend_common.vnpu import TEMPLATES

from bench.apiserver import RemoteApiServer
from bench.figures import Figure, Section, paced_timing, usage_figures
from bench.footprint import rss_target_mb, service_floor_mb
from bench.latency import fault_latency, paced_with_floor
from bench.node import fault_figures
from bench.pods import NODE, VolcanoQueue, vnpu_pods, wait_pod_caches
from bench.stack import R, Stack, StackConfig, create_vnpus, idle_usage, stack
from bench.volcano import CHIPS, PACED_GAP_S, TARGET_S, volcano_latency
from tests.support.exporter import ExporterProc

SERVICES = ("dcmi-exporter", "fault-manager", "device-plugin")


@dataclass(frozen=True)
class Vnpus:
    """Every chip of `profile` cut into `per_chip` vNPUs of `template`."""

    profile: str
    chips: int
    template: str
    per_chip: int

    @property
    def resource(self) -> str:
        return f"huawei.com/Ascend910-{TEMPLATES[self.template].suffix}"

    @property
    def devices(self) -> int:
        return self.chips * self.per_chip


DEVICES_112 = Vnpus("910a-8", 8, "vir02", 14)
WHOLE = StackConfig(profile="a3-16", fault_manager=True, kube="api", plugin_args=("--volcano-type",))


def vnpu_config(v: Vnpus) -> StackConfig:
    async def make_vnpus(exporter: ExporterProc) -> None:
        await create_vnpus(exporter, v.template, v.per_chip)

    return StackConfig(
        profile=v.profile,
        fault_manager=True,
        kube="api",
        plugin_args=("--volcano-type",),
        prepare=make_vnpus,
        expect={v.resource: v.devices},
        whole_chips=False,
    )


async def idle_figures(s: Stack, label: str, seconds: float) -> list[Figure]:
    usage = await idle_usage(s.processes(), seconds)
    figures: list[Figure] = []
    for name in SERVICES:
        figures += usage_figures(f"[{label}] {name}", usage[name], rss_target_mb(name), service_floor_mb(name))
    return figures


async def vnpu_node(v: Vnpus, fault_rounds: int, rounds: int, idle_s: float) -> list[Figure]:
    label = f"{v.devices} vNPUs"
    with RemoteApiServer() as api:
        api.add_node(NODE)
        pods = vnpu_pods(rounds, v.resource)
        api.add_pods(pods)
        async with stack(vnpu_config(v), api.url) as s:
            await wait_pod_caches(api, 2)
            faults = await fault_latency(s, fault_rounds, resource=v.resource)
            figures = fault_figures(f"[{label}] fault -> kubelet Unhealthy on the vNPU resource", faults)
            figures += await idle_figures(s, label, idle_s)
            one = sorted(s.kubelet.devices(v.resource))[:1]

            def kubelet_records(i: int) -> None:
                # The kubelet's PodResources names the pod that gets the devices, so the plugin's
                # lookup after the answer finds it at once and annotates it, as on a real node.
                pod = pods[i]
                s.kubelet.set_pod_resources([(pod["namespace"], pod["name"], "c0", v.resource, one)])

            plain, empty = await paced_with_floor(s, v.resource, one, rounds, PACED_GAP_S, kubelet_records)
            name = f"[{label}] Allocate 1 vNPU of {v.devices}, plain path, 20/s"
            figures.append(paced_timing(name, plain, empty, None))
    return figures


async def sixteen_chips(fault_rounds: int, rounds: int, idle_s: float) -> list[Figure]:
    label = "16 chips"
    with RemoteApiServer(history=rounds * 8 + 100) as api:
        api.add_node(NODE)
        queue = VolcanoQueue(api, CHIPS)
        queue.prime()
        async with stack(WHOLE, api.url) as s:
            await wait_pod_caches(api, 2)
            faults = await fault_latency(s, fault_rounds, resource=R)
            figures = fault_figures(f"[{label}] fault -> kubelet Unhealthy", faults)
            figures += await idle_figures(s, label, idle_s)
            volcano = await volcano_latency(s, "Ascend910", queue, rounds, PACED_GAP_S)
            figures.append(volcano.figure(f"[{label}] Allocate 8 of 16 chips, Volcano path, 20/s", TARGET_S))
    return figures


async def run(fault_rounds: int, rounds: int, idle_s: float) -> Section:
    started = time.monotonic()
    section = Section("Scale: 112 devices, 16 chips", "`.venv/bin/python -m bench.run --only scale`")
    section.figures += await vnpu_node(DEVICES_112, fault_rounds, rounds, idle_s)
    section.figures += await sixteen_chips(fault_rounds, rounds, idle_s)
    v = DEVICES_112
    section.notes += [
        f"[{v.devices} vNPUs] {v.profile}, every chip cut into {v.per_chip} x {v.template}: {v.devices} devices of"
        f" {v.resource}. The fault figure waits until every vNPU of the faulty chip shows Unhealthy.",
        "[16 chips] a3-16 with its chips whole; the Volcano pods name 8 of the 16.",
        "16 chips x 7 vNPUs cannot be built: the simulator refuses a vNPU once a chip's AI cores are spent, as"
        " the chip does (an A3 chip has 24 cores, its smallest template takes 5: 4 a chip at most). A chip cut"
        " into vNPUs is offered only as its vNPUs, and vNPU resources have no Volcano path (as in the"
        " reference), so there is no Volcano figure at 112 devices: the two stacks cover the two halves.",
    ]
    section.seconds = time.monotonic() - started
    return section
