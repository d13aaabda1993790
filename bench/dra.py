"""DRA on the 8-chip node (910b-8): a chip fault -> the node's next ResourceSlice without the chip,
and its recovery -> the chip back in the slice (issue 27's Health target: 100 ms p99); the same
fault -> Unhealthy for the chip's claim on the kubelet's health stream (dra-health/v1alpha1, issue
33's target: 100 ms p99), and its recovery -> Healthy; where the apiserver keeps device taints
(1.36), fault -> the chip tainted in the slice and recovery -> the taint gone (issue 33, same target).

Real processes on real sockets: the sim exporter, the device-plugin with `--kubelet-api dra`
registered under the tests' fake DRA kubelet (in this process; it speaks v1 and follows the
health stream, as a 1.36 kubelet does, and has prepared a claim for the chip), optionally the fault-manager
whose verdicts the plugin then follows, and the tests' fake API server in a process of its own
serving resource.k8s.io v1 and v1beta1 (as 1.34 does; the driver writes v1). The slice is observed
as a scheduler would see it: a watch on resourceslices through the official asyncio client, each
event timed as it arrives here. The fault is injected on the event path (the simulator fires the
library's fault-event callback) on the chip whose phy id is 3.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

from ascend_common.adapters.kube.client import ApiClient, core_v1
from ascend_common.adapters.kube.config import build_api_client
from ascend_common.adapters.kube.watch import RawWatch
from kubernetes import client as k8s

from bench.apiserver import RemoteApiServer
from bench.figures import Figure, Section, timing
from bench.latency import FAULT_CODE, ROUND_TIMEOUT_S
from bench.pods import NODE
from bench.stack import EXPORTER_ARGS, READY_TIMEOUT_S, sim_fault
from tests.support.exporter import ExporterProc, start_exporter
from tests.support.fake_apiserver import write_kubeconfig
from tests.support.fake_dra_kubelet import FakeDraKubelet, allocated_claim, pod_using
from tests.support.fake_kubelet import short_tmp_dir
from tests.support.faultmanager import FaultManagerProc, start_fault_manager
from tests.support.faultmanager import wait_ready as wait_fm_ready
from tests.support.plugin import PluginProc, dra_args, start_plugin, wait_ready

DRIVER = "npu.huawei.com"
RESOURCE_VERSIONS = ("v1", "v1beta1")  # what a 1.34 apiserver serves; the driver picks v1
SLICES = "/apis/resource.k8s.io/v1/resourceslices"
PHY = 3  # the chip
DEVICE = f"ascend910-{PHY}"  # the DRA device name (dra.slice_devices.device_name)
TARGET_S = 0.1
WATCH_S = 300  # one watch request's server-side timeout; the watcher opens the next one from where it was
REFERENCE = "never: the reference's DRA driver publishes no health (a faulty chip stays in its slice)"
HEALTH_REFERENCE = "never: the reference's DRA driver serves no health stream (the kubelet shows Unknown)"
CLAIM = "bench-claim"
TAINT = "npu.huawei.com/unhealthy"  # the driver's taint of a chip that is not healthy (dra.slice_devices)


@dataclass(frozen=True)
class SliceSeen:
    """One watch event of the node's slice, as it arrived here."""

    at: float  # time.monotonic()
    devices: frozenset[str]
    tainted: frozenset[str] = frozenset()  # the devices carrying the driver's unhealthy taint


@dataclass
class SliceWatch:
    """Every event of this node's slice, in order, with a wake-up for whoever waits on the next."""

    seen: list[SliceSeen] = field(default_factory=list)
    changed: asyncio.Event = field(default_factory=asyncio.Event)
    versions: set[str] = field(default_factory=set)  # the apiVersions the slice was written in

    def record(self, obj: dict[str, Any]) -> None:
        spec = obj.get("spec") or {}
        if spec.get("nodeName") != NODE or spec.get("driver") != DRIVER:
            return
        devices = [d for d in spec.get("devices") or [] if isinstance(d, dict)]
        names = frozenset(str(d.get("name")) for d in devices)
        tainted = frozenset(
            str(d.get("name")) for d in devices if any(t.get("key") == TAINT for t in d.get("taints") or [])
        )
        self.seen.append(SliceSeen(time.monotonic(), names, tainted))
        self.versions.add(str(obj.get("apiVersion")))
        self.changed.set()

    async def wait_for(self, reached: Callable[[frozenset[str]], bool], after: int, bound_s: float) -> SliceSeen:
        """The first event after the first `after` ones whose devices satisfy `reached`."""
        return await self.wait_event(lambda event: reached(event.devices), after, bound_s)

    async def wait_event(self, reached: Callable[[SliceSeen], bool], after: int, bound_s: float) -> SliceSeen:
        """The first event after the first `after` ones that satisfies `reached`."""
        async with asyncio.timeout(bound_s):
            while True:
                for event in self.seen[after:]:
                    if reached(event):
                        return event
                after = len(self.seen)
                self.changed.clear()
                await self.changed.wait()

    async def run(self, api: ApiClient) -> None:
        """Follow the slices from the beginning (resourceVersion 0: the current objects come first)."""
        list_slices = functools.partial(core_v1(api).request, "GET", SLICES)
        version = "0"
        while True:
            async with RawWatch(list_slices, timeout_seconds=WATCH_S, resourceVersion=version) as events:
                async for event in events:
                    obj = event.get("object") or {}
                    version = str((obj.get("metadata") or {}).get("resourceVersion") or version)
                    if event["type"] in ("ADDED", "MODIFIED"):
                        self.record(obj)


@dataclass
class DraStack:
    exporter: ExporterProc
    kubelet: FakeDraKubelet
    plugin: PluginProc
    fm: FaultManagerProc | None
    slices: SliceWatch


@dataclass
class Samples:
    """Seconds from each injection to what it was waited for, one of each per round."""

    fault_slice: list[float] = field(default_factory=list)
    recovery_slice: list[float] = field(default_factory=list)
    fault_health: list[float] = field(default_factory=list)
    recovery_health: list[float] = field(default_factory=list)


def kubelet_client(url: str) -> Any:
    """The fake kubelet's own client (kubernetes.client, as in the tests), for claims and slice wipes."""
    cfg = k8s.Configuration()
    cfg.host = url
    cfg.proxy = None
    return k8s.ApiClient(cfg)


async def prepare_claim(remote: RemoteApiServer, kubelet: FakeDraKubelet) -> None:
    """A pod's claim for the chip, allocated by the scheduler and prepared by the kubelet: only the
    devices of prepared claims are on the health stream."""
    pod = pod_using("bench-pod", [CLAIM], node=NODE)
    result = {"request": "npu", "driver": DRIVER, "pool": NODE, "device": DEVICE}
    remote.put_object("resourceclaims", allocated_claim(CLAIM, [result], pod))
    await kubelet.prepare(pod)
    await kubelet.wait_health(DRIVER, NODE, DEVICE, "Healthy", within=ROUND_TIMEOUT_S)


@contextlib.asynccontextmanager
async def dra_stack(fault_manager: bool, *, device_taints: bool = False) -> AsyncIterator[DraStack]:
    """The node up: the plugin registered as the DRA driver and its slice seen with every chip.
    `device_taints`: the apiserver keeps them (1.36); else it drops them (1.34's default)."""
    remote_api = RemoteApiServer(resource_api_versions=RESOURCE_VERSIONS, device_taints=device_taints)
    with remote_api as remote, short_tmp_dir("bench-dra-") as workdir:
        remote.add_node(NODE)
        kubeconfig = write_kubeconfig(workdir / "kubeconfig", remote.url)
        exporter = start_exporter(workdir / "exporter", *EXPORTER_ARGS, profile="910b-8")
        client = kubelet_client(remote.url)
        kubelet = FakeDraKubelet(workdir / "k", api=client, node=NODE)
        fm: FaultManagerProc | None = None
        plugin: PluginProc | None = None
        api = await build_api_client(url=remote.url)
        slices = SliceWatch()
        watcher = asyncio.create_task(slices.run(api), name="bench-dra-slice-watch")
        try:
            await kubelet.start()
            args = dra_args(workdir, kubeconfig)
            if fault_manager:
                fm = start_fault_manager(workdir / "fm", exporter, "--kubeconfig", str(kubeconfig), kube="api")
                await wait_fm_ready(fm, timeout=READY_TIMEOUT_S)
                args += ["--fault-manager-socket", str(fm.socket)]
            (workdir / "dp").mkdir()
            plugin = start_plugin(workdir, exporter, workdir / "dp", *args, kube="api")
            await wait_ready(plugin, timeout=READY_TIMEOUT_S)  # ready: registered with the DRA kubelet
            await slices.wait_for(lambda names: len(names) == 8, 0, READY_TIMEOUT_S)
            await prepare_claim(remote, kubelet)
            yield DraStack(exporter, kubelet, plugin, fm, slices)
        finally:
            watcher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await watcher
            await api.close()  # type: ignore[no-untyped-call]
            if plugin is not None:
                plugin.stop()
            await kubelet.stop()
            await asyncio.to_thread(client.close)
            if fm is not None:
                fm.stop()
            exporter.stop()


def _removed(event: SliceSeen) -> bool:
    return DEVICE not in event.devices and len(event.devices) >= 7


def _back(event: SliceSeen) -> bool:
    return DEVICE in event.devices and DEVICE not in event.tainted and len(event.devices) >= 7


def _tainted(event: SliceSeen) -> bool:
    return DEVICE in event.tainted and len(event.devices) == 8


async def fault_to_slice(s: DraStack, rounds: int, faulty: Callable[[SliceSeen], bool] = _removed) -> Samples:
    """fault -> the slice event `faulty` accepts and -> Unhealthy on the health stream, recovery ->
    slice with the chip untainted again and -> Healthy, one of each per round; each round waits for
    both recoveries before the next fault."""
    out = Samples()
    async with s.exporter.client() as client:
        chips = (await client.get("/v1/chips")).json()["chips"]
        (logic_id,) = [int(c["logic_id"]) for c in chips if int(c["phy_id"]) == PHY]
        for _ in range(rounds):
            for assertion, slice_samples, health_samples, reached, health in (
                ("occur", out.fault_slice, out.fault_health, faulty, "Unhealthy"),
                ("recover", out.recovery_slice, out.recovery_health, _back, "Healthy"),
            ):
                seen = len(s.slices.seen)
                heard = len(s.kubelet.health_messages)
                started = time.monotonic()
                await sim_fault(client, logic_id, FAULT_CODE, assertion)
                event, message = await asyncio.gather(
                    s.slices.wait_event(reached, seen, ROUND_TIMEOUT_S),
                    s.kubelet.wait_health(DRIVER, NODE, DEVICE, health, after=heard, within=ROUND_TIMEOUT_S),
                )
                slice_samples.append(event.at - started)
                health_samples.append(message.at - started)
            await asyncio.sleep(0.02)
    return out


def rows(
    fault: str, recovery: str, faults: list[float], recoveries: list[float], reference: str, *, judge_recovery: bool
) -> list[Figure]:
    """p50 and p99 of `fault` (the p99 against the 100 ms target, beside the reference) and of
    `recovery` (its p99 against the target too where `judge_recovery`)."""
    out = []
    for p in (50, 99):
        figure = timing(fault, faults, p, TARGET_S if p == 99 else None)
        figure.reference = reference
        out.append(figure)
    for p in (50, 99):
        out.append(timing(recovery, recoveries, p, TARGET_S if p == 99 and judge_recovery else None))
    return out


def figures(label: str, faults: list[float], recoveries: list[float]) -> list[Figure]:
    """fault -> slice without the chip, recovery -> slice with it again."""
    fault = f"fault on chip {PHY} -> ResourceSlice without it, {label}"
    recovery = f"recovery -> ResourceSlice with chip {PHY} again, {label}"
    return rows(fault, recovery, faults, recoveries, REFERENCE, judge_recovery=False)


def health_figures(label: str, faults: list[float], recoveries: list[float]) -> list[Figure]:
    """fault -> Unhealthy on the health stream, recovery -> Healthy."""
    fault = f"fault on chip {PHY} -> Unhealthy on the kubelet's health stream, {label}"
    recovery = f"recovery -> Healthy on the kubelet's health stream, {label}"
    return rows(fault, recovery, faults, recoveries, HEALTH_REFERENCE, judge_recovery=False)


def taint_figures(label: str, faults: list[float], recoveries: list[float]) -> list[Figure]:
    """fault -> chip tainted, recovery -> taint gone (both judged: issue 33 sets a target for each)."""
    fault = f"fault on chip {PHY} -> ResourceSlice with it tainted, {label}"
    recovery = f"recovery -> chip {PHY}'s taint gone, {label}"
    return rows(fault, recovery, faults, recoveries, REFERENCE, judge_recovery=True)


async def taints(rounds: int) -> tuple[list[Figure], set[str]]:
    """The taint rows (issue 33): the apiserver keeps device taints, as 1.36 does by default."""
    async with dra_stack(fault_manager=False, device_taints=True) as s:
        samples = await fault_to_slice(s, rounds, _tainted)
        label = "taints kept (1.36), plugin alone (code policy)"
        return taint_figures(label, samples.fault_slice, samples.recovery_slice), s.slices.versions


def section_figures(label: str, samples: Samples) -> list[Figure]:
    return figures(label, samples.fault_slice, samples.recovery_slice) + health_figures(
        label, samples.fault_health, samples.recovery_health
    )


async def run(rounds: int, *, fault_manager: bool = True) -> Section:
    started = time.monotonic()
    # The title is the docs' anchor and what --splice finds; the section holds the health stream's figures too.
    section = Section("DRA: fault -> ResourceSlice (910b-8)", "`.venv/bin/python -m bench.run --only dra`")
    versions: set[str] = set()
    async with dra_stack(fault_manager=False) as s:
        section.figures += section_figures("plugin alone (code policy)", await fault_to_slice(s, rounds))
        versions |= s.slices.versions
    if fault_manager:
        async with dra_stack(fault_manager=True) as s:
            section.figures += section_figures("whole stack (fault-manager verdict)", await fault_to_slice(s, rounds))
            versions |= s.slices.versions
    tainted, taint_versions = await taints(rounds)
    section.figures += tainted
    versions |= taint_versions
    section.notes += [
        "Injection (the simulator's fault-event callback, on the chip with phy id 3) -> exporter event ->"
        " (fault-manager verdict ->) the plugin's resource manager -> its ResourceSlice publisher -> one PUT to the"
        " fake API server -> the watch event arriving in the benchmark process. The recovery of the same chip is"
        " timed the same way; each round waits for the chip to be back before the next fault.",
        f"The plugin runs with --kubelet-api dra, registered under the tests' fake DRA kubelet; the fake API server"
        f" serves resource.k8s.io {' and '.join(RESOURCE_VERSIONS)} and the slice was written as"
        f" {', '.join(sorted(versions)) or 'nothing'}.",
        "Health stream: the fake DRA kubelet prepared a claim for the chip and follows NodeWatchResources on the"
        " driver's socket; a sample ends when the message reporting the chip Unhealthy (Healthy) arrives in this"
        " process, timed from the same injection as the slice's.",
        "Without taints (the first rows) the fake API server drops device taints, as 1.34 and 1.35 do by default"
        " (DRADeviceTaints alpha, off): the faulty chip leaves the slice. With taints (the last rows) it keeps them,"
        f" as 1.36 does: the chip stays, tainted {TAINT}; the first tainted write costs one dry run more.",
    ]
    section.seconds = time.monotonic() - started
    return section
