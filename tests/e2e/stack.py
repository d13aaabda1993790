"""The whole node as real processes: sim exporter, fault-manager, device-plugin, the fake kubelet
and the fake API server, wired the way a cluster wires them (kube `api` mode on both services).

Drills act through the exporter's sim API and read every view the ecosystem reads: the kubelet's
ListAndWatch stream, the fault-manager's verdicts, the device-info ConfigMap in the API server,
and the fault events in SQLite. `agree` is the one place that says what "every view agrees" means.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import shutil
import signal
import sqlite3
import tempfile
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import psutil

from tests.support.exporter import TOKENS, ExporterProc, auth, event_stream, start_exporter
from tests.support.fake_apiserver import FakeApiServer, write_kubeconfig
from tests.support.fake_kubelet import FakeKubelet, short_tmp_dir
from tests.support.faultmanager import FaultManagerProc, start_fault_manager
from tests.support.faultmanager import wait_ready as fm_ready
from tests.support.plugin import PluginProc, start_plugin
from tests.support.plugin import wait_ready as plugin_ready
from tests.support.waiting import until

NODE = "node-a"
R = "huawei.com/Ascend910"
DEVICE_INFO = "mindx-dl-deviceinfo-node-a"
CM_PATH = "/api/v1/namespaces/kube-system/configmaps"
SCALE = 20.0  # policy time runs 20x: 60 s of idle period is 3 s, a 24 h window 72 min


@dataclass
class DeviceInfo:
    """The parts of `mindx-dl-deviceinfo-<node>` the scheduler and ClusterD act on."""

    healthy: set[str]
    unhealthy: set[str]
    network_unhealthy: set[str]
    faults: list[dict[str, Any]]
    manually_separated: set[str]
    raw: dict[str, str]

    @property
    def fault_chips(self) -> set[str]:
        return {f["npu_name"] for f in self.faults}


def _names(value: str) -> set[str]:
    return {n for n in value.split(",") if n}


@dataclass
class Usage:
    rss_mb: float
    fds: int


@dataclass
class Stack:
    workdir: Path
    api: FakeApiServer
    exporter: ExporterProc
    fm: FaultManagerProc
    kubelet: FakeKubelet
    plugin: PluginProc
    profile: str
    scale: float
    exporter_args: tuple[str, ...]
    fm_args: tuple[str, ...]
    plugin_args: tuple[str, ...]
    names: dict[int, str] = field(default_factory=dict)  # logic id -> chip name
    earlier_runs_events: int = 0  # fault events of exporter runs before the current one

    # -- acting --------------------------------------------------------------------------------

    async def sim(self, method: str, path: str, body: dict[str, Any]) -> httpx.Response:
        async with self.exporter.client() as client:
            r = await client.request(method, path, json=body, headers=auth("sim"))
        assert r.status_code in (200, 204), f"{method} {path}: {r.status_code} {r.text}"
        return r

    async def fault(self, logic_id: int, code: str, assertion: str = "occur") -> None:
        await self.sim("POST", f"/v1/sim/chips/{logic_id}/faults", {"code": code, "assertion": assertion})

    async def link(self, logic_id: int, up: bool) -> None:
        await self.sim("PUT", f"/v1/sim/chips/{logic_id}/network", {"healthy": up})

    async def processes(self, logic_id: int, pids: list[int]) -> None:
        await self.sim("PUT", f"/v1/sim/chips/{logic_id}/processes", {"processes": [{"pid": p} for p in pids]})

    async def chips(self) -> list[dict[str, Any]]:
        async with self.exporter.client() as client:
            return list((await client.get("/v1/chips")).json()["chips"])

    # -- views ---------------------------------------------------------------------------------

    async def verdicts(self) -> dict[str, dict[str, Any]]:
        async with self.fm.client() as client:
            body = (await client.get("/v1/verdicts")).json()
        return {v["chip"]: v for v in body["verdicts"]}

    def device_info(self, resource: str = R) -> DeviceInfo | None:
        cm = self.api.get_object("configmaps", DEVICE_INFO, "kube-system")
        if not cm or "DeviceInfoCfg" not in cm.get("data", {}):
            return None
        data = cm["data"]
        device_list = json.loads(data["DeviceInfoCfg"])["DeviceInfo"]["DeviceList"]
        return DeviceInfo(
            healthy=_names(device_list.get(resource, "")),
            unhealthy=_names(device_list.get(f"{resource}-Unhealthy", "")),
            network_unhealthy=_names(device_list.get(f"{resource}-NetworkUnhealthy", "")),
            faults=json.loads(device_list.get(f"{resource}-Fault") or "[]"),
            manually_separated=_names(data.get("ManuallySeparateNPU", "")),
            raw=dict(data),
        )

    def kubelet_unhealthy(self, resource: str = R) -> set[str] | None:
        stream = self.kubelet.streams.get(resource)
        return stream[-1].unhealthy if stream else None

    def event_count(self, where: str = "1") -> int:
        """Fault events in the fault-manager's SQLite file (read-only; WAL lets it run beside the writer)."""
        with contextlib.closing(sqlite3.connect(f"file:{self.fm.db}?mode=ro", uri=True, timeout=5)) as conn:
            return int(conn.execute(f"SELECT count(*) FROM fault_events WHERE {where}").fetchone()[0])

    def stored_events(self) -> int:
        """Events the exporter sent that are in SQLite (reconciled synthetic events left out)."""
        return self.event_count("source != 'reconcile'")

    async def exporter_events(self) -> int:
        """Fault events of the exporter's current run, replayed from its start (the buffer holds 16,384)."""
        async with self.exporter.client() as client:
            head = (await client.get("/v1/chips")).json()["last_event_id"]
            if head is None:
                return 0
            run = head.rpartition("-")[0]
            count = 0
            async with asyncio.timeout(30), event_stream(client, f"{run}-0") as messages:
                async for msg in messages:
                    assert msg.event != "gap", f"the exporter no longer holds its run's first events: {msg.data}"
                    count += msg.event == "fault"
                    if msg.id == head:
                        return count
        raise AssertionError("the event stream ended before its head")

    async def no_event_lost(self, timeout: float = 20.0) -> int:
        """Wait until SQLite holds exactly the fault events every exporter run sent; returns the count."""
        sent = self.earlier_runs_events + await self.exporter_events()
        await until(lambda: self.stored_events() >= sent, timeout, f"{sent} events in SQLite")
        await asyncio.sleep(0.3)  # an absence, so a time: nothing more arrives, none doubled
        assert self.stored_events() == sent, (self.stored_events(), sent)
        return sent

    def configmap_writes(self) -> int:
        return self.api.count("PUT", CM_PATH) + self.api.count("POST", CM_PATH)

    async def views(self, resource: str = R) -> dict[str, set[str] | None]:
        """The chips each view holds unusable; the verdict view is the fault-manager's unschedulable set."""
        verdicts = await self.verdicts()
        info = self.device_info(resource)
        return {
            "kubelet": self.kubelet_unhealthy(resource),
            "verdicts": {c for c, v in verdicts.items() if not v["schedulable"]},
            "configmap": info.unhealthy if info else None,
        }

    async def network_views(self, resource: str = R) -> dict[str, set[str] | None]:
        """The chips each view holds network-unhealthy (the kubelet has no such notion)."""
        verdicts = await self.verdicts()
        info = self.device_info(resource)
        return {
            "verdicts": {c for c, v in verdicts.items() if not v["network_healthy"]},
            "configmap": info.network_unhealthy if info else None,
        }

    async def agree(
        self, unusable: set[str], timeout: float = 10.0, resource: str = R, network: set[str] | None = None
    ) -> dict[str, set[str] | None]:
        """Wait until the kubelet, the verdicts and the ConfigMap all hold exactly `unusable` unusable
        (and, when `network` is given, the verdicts and `-NetworkUnhealthy` exactly `network`)."""
        want: dict[str, set[str] | None] = {"kubelet": unusable, "verdicts": unusable, "configmap": unusable}
        if network is not None:
            want |= {f"network {k}": network for k in ("verdicts", "configmap")}
        last: dict[str, set[str] | None] = {}

        async def same() -> bool:
            nonlocal last
            last = await self.views(resource)
            if network is not None:
                last |= {f"network {k}": v for k, v in (await self.network_views(resource)).items()}
            return last == want

        try:
            await until(same, timeout, "every view to agree")
        except AssertionError:
            raise AssertionError(f"views disagree: want {sorted(unusable)} everywhere, have {last}") from None
        return last

    def usage(self) -> dict[str, Usage]:
        procs = {"exporter": self.exporter.proc, "fault-manager": self.fm.proc, "plugin": self.plugin.proc}
        out = {}
        for name, proc in procs.items():
            p = psutil.Process(proc.pid)
            out[name] = Usage(p.memory_info().rss / 2**20, p.num_fds())
        return out

    # -- failures ------------------------------------------------------------------------------

    async def restart_exporter(self, sig: int = signal.SIGKILL) -> None:
        """Kill the exporter and start a new run; call once the old run's events are stored."""
        self.earlier_runs_events += await self.exporter_events()
        self.exporter.stop(sig)
        self.exporter = start_exporter(self.workdir / "exporter", *self.exporter_args, profile=self.profile)

    async def restart_fault_manager(self, sig: int = signal.SIGKILL) -> None:
        self.fm.stop(sig)
        self.fm = start_fault_manager(self.workdir / "fm", self.exporter, *self.fm_args, kube="api", db=self.fm.db)
        await fm_ready(self.fm, timeout=30)


@contextlib.asynccontextmanager
async def node_stack(
    *,
    profile: str = "910b-8",
    scale: float = SCALE,
    hot_reset: bool = False,
    exporter_args: tuple[str, ...] = (),
    fm_args: tuple[str, ...] = (),
    plugin_args: tuple[str, ...] = (),
    prepare: Callable[[FakeApiServer, ExporterProc], Any] | None = None,
    every_chip_listed: bool = True,
    resource: str = R,
) -> AsyncIterator[Stack]:
    """Start the node and wait until the kubelet lists every chip (of the physical `resource`) and
    the ConfigMap is written.

    `prepare` runs after the exporter is up and before the two cluster-facing services start:
    the place to plant pods, ConfigMaps or vNPUs they must find at start. A node whose chips
    are cut into vNPUs lists only its whole chips as physical devices (`every_chip_listed=False`).
    """
    with short_tmp_dir("e2e-") as workdir, FakeApiServer() as api:
        api.add_node(NODE)
        kubeconfig = str(write_kubeconfig(workdir / "kubeconfig", api.url))
        ex_args = ("--time-scale", str(scale), "--reset-poll-period", "0.05", *exporter_args)
        exporter = start_exporter(workdir / "exporter", *ex_args, profile=profile)
        if prepare is not None:
            result = prepare(api, exporter)
            if asyncio.iscoroutine(result):
                await result
        token = workdir / "fm-token"
        token.write_text(f"{TOKENS['reset'][0]} reset\n")
        f_args = ("--kubeconfig", kubeconfig, "--time-scale", str(scale), "--token-file", str(token), *fm_args)
        if hot_reset:
            f_args = ("--hot-reset", "--reset-mirror-dir", str(workdir / "mirror"), *f_args)
        fm = start_fault_manager(workdir / "fm", exporter, *f_args, kube="api")
        plugin_dir = workdir / "dp"
        plugin_dir.mkdir()
        kubelet = FakeKubelet(plugin_dir, workdir / "podres")
        await kubelet.start()
        p_args = ("--kubeconfig", kubeconfig, "--fault-manager-socket", str(fm.socket), *plugin_args)
        plugin = start_plugin(workdir, exporter, plugin_dir, *p_args, kube="api")
        s = Stack(workdir, api, exporter, fm, kubelet, plugin, profile, scale, ex_args, f_args, p_args)
        ok = False
        try:
            await fm_ready(fm, timeout=30)
            await plugin_ready(plugin, timeout=30)
            s.names = {c["logic_id"]: c["name"] for c in await s.chips()}
            physical = set(s.names.values())
            await kubelet.wait_for(resource, lambda m: not every_chip_listed or set(m.devices) == physical, timeout=10)
            await until(lambda: s.device_info() is not None, 10, "the device-info ConfigMap")
            yield s
            ok = True
        finally:
            await _stop(s, keep_logs=not ok)


async def _stop(s: Stack, *, keep_logs: bool) -> None:
    codes = {"plugin": s.plugin.stop(), "fault-manager": s.fm.stop()}
    await s.kubelet.stop()
    codes["exporter"] = s.exporter.stop()
    if keep_logs:
        # The workdir goes away with the test; a failing drill leaves its logs where they can be read.
        dest = Path(tempfile.gettempdir()) / "e2e-last"
        shutil.rmtree(dest, ignore_errors=True)
        dest.mkdir()
        for log in (s.exporter.log_path, s.fm.log_path, s.plugin.log_path):
            if log.exists():
                shutil.copyfile(log, dest / log.name)
        return
    assert codes == {"plugin": 0, "fault-manager": 0, "exporter": 0}, codes
    doubled = {key: n for key, n in s.kubelet.registration_counts.items() if n != 1}
    assert not doubled, f"(kubelet instance, resource) registered other than once: {doubled}"
    assert not list((s.workdir / "dp").glob("Ascend*.sock")), "the plugin removes its sockets on shutdown"
    assert not (s.workdir / "dp" / "npu.sock").exists(), "the plugin removes its sockets on shutdown"
    assert not s.fm.socket.exists() and not s.exporter.socket.exists(), "the services remove their sockets"
