"""The node stack as real processes on real sockets: sim exporter, optional fault-manager,
device-plugin, and the tests' fake kubelet in the benchmark's event loop.

The exporter polls every 1 s (its default) rather than the tests' 0.2 s, so idle figures are
those of a deployed node; faults travel on the event path, not the poll. The fault-manager
runs with its default --write-interval (1 s), not the tests' 0.1 s, because the ConfigMap
write rate is one of the figures.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

import httpx
import psutil

from bench.figures import Usage
from tests.support.exporter import ExporterProc, auth, start_exporter
from tests.support.fake_apiserver import write_kubeconfig
from tests.support.fake_kubelet import FakeKubelet, StreamMessage, short_tmp_dir
from tests.support.faultmanager import FaultManagerProc, start_fault_manager
from tests.support.faultmanager import wait_ready as wait_fm_ready
from tests.support.plugin import PluginProc, start_plugin, wait_ready

R = "huawei.com/Ascend910"
EXPORTER_ARGS = ("--poll-period", "1.0", "--call-timeout", "2.0")
FM_DEFAULT_WRITE_INTERVAL = ("--write-interval", "1.0")  # the tests' starter passes 0.1
READY_TIMEOUT_S = 30.0  # generous: other jobs may share the machine
T = TypeVar("T")


@dataclass(frozen=True)
class StackConfig:
    profile: str = "910b-8"
    fault_manager: bool = False
    kube: str = "offline"  # the plugin's and the fault-manager's --kube
    plugin_args: tuple[str, ...] = ()
    fm_args: tuple[str, ...] = ()
    # Runs after the exporter is ready and before the plugin starts (e.g. creates vNPUs).
    prepare: Callable[[ExporterProc], Awaitable[None]] | None = None
    # Every resource the kubelet must have seen in full before the stack counts as up, besides
    # the physical one: resource -> number of devices.
    expect: dict[str, int] = field(default_factory=dict)
    # The physical resource lists every chip; False when every chip is cut into vNPUs (a chip
    # with vNPUs is offered only as its vNPUs).
    whole_chips: bool = True


@dataclass
class Stack:
    workdir: Path
    exporter: ExporterProc
    kubelet: FakeKubelet
    plugin: PluginProc
    fm: FaultManagerProc | None
    chips: set[str]  # the physical resource's device ids

    def processes(self) -> dict[str, psutil.Process]:
        procs = {"dcmi-exporter": self.exporter.proc.pid, "device-plugin": self.plugin.proc.pid}
        if self.fm is not None:
            procs["fault-manager"] = self.fm.proc.pid
        return {name: psutil.Process(pid) for name, pid in procs.items()}


async def chip_ids(exporter: ExporterProc) -> set[str]:
    """The physical resource's device ids (`Ascend910-<phy>`) of the exporter's chips."""
    async with exporter.client() as client:
        chips = (await client.get("/v1/chips")).json()["chips"]
    return {f"Ascend910-{c['phy_id']}" for c in chips}


async def create_vnpus(exporter: ExporterProc, template: str, per_chip: int) -> None:
    """Create `per_chip` vNPUs of `template` on every chip (the administrator's preset mode)."""
    async with exporter.client() as client:
        chips = (await client.get("/v1/chips")).json()["chips"]
        for chip in chips:
            for _ in range(per_chip):
                r = await client.post(
                    f"/v1/chips/{chip['logic_id']}/vnpus", json={"template": template}, headers=auth("vnpu")
                )
                if r.status_code != 201:
                    raise RuntimeError(f"vNPU {template} on chip {chip['logic_id']}: {r.status_code} {r.text}")


def start_fm(workdir: Path, exporter: ExporterProc, cfg: StackConfig, kubeconfig: Path | None) -> FaultManagerProc:
    args = [*FM_DEFAULT_WRITE_INTERVAL, *cfg.fm_args]
    if kubeconfig is not None:
        args += ["--kubeconfig", str(kubeconfig)]
    return start_fault_manager(workdir / "fm", exporter, *args, kube=cfg.kube)


def plugin_args(cfg: StackConfig, fm: FaultManagerProc | None, kubeconfig: Path | None) -> list[str]:
    args = list(cfg.plugin_args)
    if fm is not None:
        args += ["--fault-manager-socket", str(fm.socket)]
    if kubeconfig is not None:
        args += ["--kubeconfig", str(kubeconfig)]
    return args


async def wait_listed(kubelet: FakeKubelet, expect: dict[str, int], bound_s: float) -> None:
    """Every expected resource listed in full (any health) within `bound_s`."""
    deadline = time.monotonic() + bound_s
    for resource, count in expect.items():

        def full(m: StreamMessage, n: int = count) -> bool:
            return len(m.devices) == n

        await kubelet.wait_for(resource, full, timeout=max(0.1, deadline - time.monotonic()))


@contextlib.asynccontextmanager
async def stack(cfg: StackConfig, apiserver_url: str | None = None) -> AsyncIterator[Stack]:
    """The stack up and listed in full; everything stopped on the way out."""
    with short_tmp_dir("bench-") as workdir:
        kubeconfig = write_kubeconfig(workdir / "kubeconfig", apiserver_url) if apiserver_url else None
        exporter = start_exporter(workdir / "exporter", *EXPORTER_ARGS, profile=cfg.profile)
        fm: FaultManagerProc | None = None
        plugin: PluginProc | None = None
        kubelet = FakeKubelet(workdir / "dp", workdir / "podres")
        try:
            if cfg.prepare is not None:
                await cfg.prepare(exporter)
            chips = await chip_ids(exporter)
            await kubelet.start()
            if cfg.fault_manager:
                fm = start_fm(workdir, exporter, cfg, kubeconfig)
                await wait_fm_ready(fm, timeout=READY_TIMEOUT_S)
            plugin = start_plugin(workdir, exporter, workdir / "dp", *plugin_args(cfg, fm, kubeconfig), kube=cfg.kube)
            await wait_ready(plugin, timeout=READY_TIMEOUT_S)
            physical = {R: len(chips)} if cfg.whole_chips else {}
            await wait_listed(kubelet, {**physical, **cfg.expect}, READY_TIMEOUT_S)
            yield Stack(workdir, exporter, kubelet, plugin, fm, chips)
        finally:
            if plugin is not None:
                plugin.stop()
            await kubelet.stop()
            if fm is not None:
                fm.stop()
            exporter.stop()


async def sim_fault(client: httpx.AsyncClient, logic_id: int, code: str, assertion: str) -> None:
    r = await client.post(
        f"/v1/sim/chips/{logic_id}/faults", json={"code": code, "assertion": assertion}, headers=auth("sim")
    )
    r.raise_for_status()


async def usage_during(procs: dict[str, psutil.Process], work: Awaitable[T]) -> tuple[T, dict[str, Usage]]:
    """What `work` returns, and the CPU and resident memory of each process while it ran."""
    before = {name: p.cpu_times() for name, p in procs.items()}
    started = time.monotonic()
    result = await work
    seconds = time.monotonic() - started
    out = {}
    for name, p in procs.items():
        t0, t1 = before[name], p.cpu_times()
        cpu = (t1.user + t1.system - t0.user - t0.system) / seconds * 100
        out[name] = Usage(cpu, p.memory_info().rss / 2**20, seconds)
    return result, out


async def idle_usage(procs: dict[str, psutil.Process], seconds: float) -> dict[str, Usage]:
    """CPU and resident memory per process over a window where nothing happens."""
    _, usage = await usage_during(procs, asyncio.sleep(seconds))
    return usage
