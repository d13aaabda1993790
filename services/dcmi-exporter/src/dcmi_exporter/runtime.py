"""Wires one exporter together: backend, call pool, poller, event log, reset jobs."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

from ascend_common.adapters.inputs import BadInputs, read_bounded
from ascend_common.adapters.lifecycle import Lifecycle
from ascend_common.chips import ChipAddress
from ascend_common.clock import Clock, SystemClock
from ascend_common.jsonin import InputError
from ascend_common.tokens import TokenTable, load_token_file

from dcmi_exporter.backends.base import Backend, ChipTelemetry, HangProbe, NetStatsProbe, RoceLinkProbe, UbPortsProbe
from dcmi_exporter.jobs import ResetJobs
from dcmi_exporter.metrics.holders import ContainerMap
from dcmi_exporter.node.calls import CallGuard
from dcmi_exporter.node.events import EventLog
from dcmi_exporter.node.poller import ChipPoller
from dcmi_exporter.settings import ExporterSettings
from dcmi_exporter.tasks.die_policy import apply_die_policy
from dcmi_exporter.tasks.hang import HangTask
from dcmi_exporter.tasks.hang_rule import REFUSED, HangConfig
from dcmi_exporter.tasks.nics import NicAddressTask, host_addresses
from dcmi_exporter.tasks.periodic import round_deadline
from dcmi_exporter.tasks.roce import RoceLinkTask
from dcmi_exporter.tasks.switch import SwitchFaultTask
from dcmi_exporter.tasks.telemetry import TelemetryTask
from dcmi_exporter.tasks.ub import UbCodesTask

log = logging.getLogger(__name__)
MAX_CHIPS = 64


def make_backend(settings: ExporterSettings, clock: Clock) -> Backend:
    if settings.backend == "sim":
        from dcmi_exporter.backends.sim import SimBackend

        return SimBackend(settings.profile, clock=clock, seed=settings.seed)
    from dcmi_exporter.backends.dcmi import DcmiBackend

    return DcmiBackend(settings.library)


class Probes(NamedTuple):
    """The readers that run `hccn_tool` on the dcmi backend (the simulator's own on sim)."""

    hang: HangProbe
    ub: UbPortsProbe
    roce: RoceLinkProbe
    net_stats: NetStatsProbe


def make_probes(settings: ExporterSettings, backend: Backend) -> Probes:
    """Hung-job detection's, the UB codes', the RoCE link's and the RoCE counters' readers; on the
    dcmi backend they share one `hccn_tool` runner, so one timeout and one limit on concurrent runs
    hold for all of them (the reference serialises its runs behind one mutex)."""
    if settings.backend == "sim":
        from dcmi_exporter.backends.sim.backend import SimBackend
        from dcmi_exporter.backends.sim.hang_probe import SimHangProbe, SimNetStats, SimRoceLinkProbe, SimUbPortsProbe

        assert isinstance(backend, SimBackend)
        return Probes(SimHangProbe(backend), SimUbPortsProbe(backend), SimRoceLinkProbe(backend), SimNetStats(backend))
    from dcmi_exporter.backends.dcmi.hang_probe import DcmiHangProbe
    from dcmi_exporter.backends.dcmi.hccn import HccnNetStats, HccnRoceLink, HccnTool, HccnUbPorts

    tool = HccnTool(settings.hccn_tool, timeout_s=settings.hccn_timeout)
    hang = DcmiHangProbe(settings.hccn_tool, settings.host_proc, tool=tool)
    return Probes(hang, HccnUbPorts(tool), HccnRoceLink(tool), HccnNetStats(tool))


def telemetry_reader(backend: Backend) -> Callable[[ChipAddress], ChipTelemetry] | None:
    """The backend's `read_telemetry`; a backend without one serves no extra chip families."""
    read: Callable[[ChipAddress], ChipTelemetry] | None = getattr(backend, "read_telemetry", None)
    return read


def load_hang_config(path: Path | None, bad_inputs: BadInputs | None = None) -> HangConfig:
    """Read once at start, as the reference does; an unreadable or refused file gives the defaults
    (detection on, as without a file) and is named in `bad_inputs`."""
    if path is None:
        return HangConfig()
    bad = bad_inputs or BadInputs()
    try:
        config = HangConfig.parse(read_bounded(path), str(path))
    except OSError as exc:
        bad.refused(
            "hang_config",
            f"{path}: {exc.strerror or exc}",
            "hang detection config unreadable; using the defaults",
            path,
        )
        return HangConfig()
    except InputError as exc:
        bad.refused("hang_config", str(exc), REFUSED, path)
        return HangConfig()
    bad.accepted("hang_config")
    return config


def _host_addresses_of(settings: ExporterSettings, backend: Backend) -> Callable[[], dict[str, list[str]]]:
    """The simulator's host NICs under the sim backend, the real host's otherwise."""
    if settings.backend != "sim":
        return host_addresses
    from dcmi_exporter.backends.sim.backend import SimBackend

    assert isinstance(backend, SimBackend)
    return backend.host_addresses


def _load_scenario(settings: ExporterSettings) -> Any:
    if settings.backend != "sim":
        raise ValueError("--scenario needs the sim backend")
    from dcmi_exporter.backends.sim.scenario import load_scenario

    assert settings.scenario is not None
    return load_scenario(settings.scenario)


@dataclass
class Exporter:
    settings: ExporterSettings
    backend: Backend
    clock: Clock
    tokens: TokenTable
    lifecycle: Lifecycle = field(default_factory=Lifecycle)
    events: EventLog = field(init=False)
    guard: CallGuard = field(init=False)
    poller: ChipPoller = field(init=False)
    jobs: ResetJobs = field(init=False)
    hang: HangTask | None = None
    nics: NicAddressTask | None = None
    ub: UbCodesTask | None = None
    switch: SwitchFaultTask | None = None
    telemetry: TelemetryTask | None = None
    roce: RoceLinkTask | None = None
    stream_clients: int = 0
    bad_inputs: BadInputs = field(default_factory=BadInputs)  # /readyz names them

    def __post_init__(self) -> None:
        self.events = EventLog(self.settings.event_buffer)
        self.containers = ContainerMap(self.settings.containers_ttl, self.clock.monotonic)
        # Keys: every chip, the node, the switch library and the die policy (one abandoned call each).
        self.guard = CallGuard(keys=MAX_CHIPS + 3, timeout_s=self.settings.call_timeout)
        self.poller = ChipPoller(
            self.backend, self.guard, self.events, self.clock, self.settings.poll_period, self.lifecycle.scope("poller")
        )
        self.jobs = ResetJobs(
            self.backend,
            self.guard,
            self.poller,
            self.clock,
            timeout_s=self.settings.reset_timeout,
            poll_period_s=self.settings.reset_poll_period,
        )
        self._scenario: object | None = None
        self._scenario_plan: Any = None
        self._scenario_task: asyncio.Task[None] | None = None
        self._setup_scope = self.lifecycle.scope("setup")

    @classmethod
    def from_settings(cls, settings: ExporterSettings, clock: Clock | None = None) -> Exporter:
        clock = clock or SystemClock(time_scale=settings.time_scale)
        tokens = load_token_file(settings.token_file) if settings.token_file else TokenTable()
        backend = make_backend(settings, clock)
        exporter = cls(settings, backend, clock, tokens)
        probes = make_probes(settings, backend)
        exporter.hang = HangTask(
            exporter.poller,
            probes.hang,
            load_hang_config(settings.hang_config, exporter.bad_inputs),
            settings.hang_interval,
            clock,
            exporter.lifecycle.scope("hang"),
            round_deadline(settings.hang_interval, settings.hccn_timeout),
        )
        if settings.npu_nic_mapping is not None:
            exporter.nics = NicAddressTask(
                settings.npu_nic_mapping,
                exporter.poller,
                exporter.lifecycle.scope("nics"),
                period=settings.nic_refresh,
                read_host=_host_addresses_of(settings, backend),
                bad_inputs=exporter.bad_inputs,
            )
        exporter.ub = UbCodesTask(
            exporter.poller,
            probes.ub,
            settings.poll_period,
            clock,
            exporter.lifecycle.scope("ub"),
            round_deadline(settings.poll_period, settings.hccn_timeout),
        )
        exporter.roce = RoceLinkTask(
            exporter.poller,
            probes.roce,
            settings.poll_period,
            clock,
            exporter.lifecycle.scope("roce"),
            round_deadline(settings.poll_period, settings.hccn_timeout),
        )
        exporter.telemetry = TelemetryTask(
            exporter.poller,
            telemetry_reader(backend),
            probes.net_stats,
            # A pool of its own: a hung telemetry call never takes a thread or a chip key of the poller's.
            CallGuard(keys=MAX_CHIPS, timeout_s=settings.call_timeout),
            settings.telemetry_period,
            settings.net_stats_period,
            exporter.lifecycle.scope("telemetry"),
            chip_deadline_s=round_deadline(settings.telemetry_period, settings.call_timeout),
            net_deadline_s=round_deadline(settings.net_stats_period, settings.hccn_timeout),
        )
        if settings.scenario is not None:
            exporter._scenario_plan = _load_scenario(settings)  # fail at start-up, not later
        if settings.backend == "dcmi" and settings.switch_faults:
            from dcmi_exporter.backends.dcmi.switch import SwitchLibrary

            exporter.switch = SwitchFaultTask(
                exporter.poller,
                SwitchLibrary(settings.switch_library),
                exporter.guard,
                settings.switch_fault_interval,
                exporter.lifecycle.scope("switch"),
                fallback_period_s=settings.poll_period,
            )
        return exporter

    async def start(self) -> None:
        await self.poller.start()
        if self.hang is not None:
            await self.hang.start()
        if self.nics is not None and await self.nics.load():
            await self.nics.refresh()
            await self.nics.start()
        if self.ub is not None:
            await self.ub.start()
        if self.switch is not None:
            await self.switch.start()
        self._setup_scope.spawn(
            apply_die_policy(self.poller, self.backend, self.guard, self.settings.use_single_die_mode), "die-policy"
        )
        if self.telemetry is not None:
            await self.telemetry.start()
        if self.roce is not None:
            await self.roce.start()
        if self._scenario_plan is not None:
            self._scenario_task = asyncio.create_task(self._start_scenario(self._scenario_plan), name="scenario")

    async def _start_scenario(self, scenario: Any) -> None:
        from dcmi_exporter.backends.sim.scenario import ScenarioRunner

        await self.poller.discovered.wait()
        runner = ScenarioRunner(self.backend, scenario, self.clock)  # type: ignore[arg-type]
        runner.start()
        self._scenario = runner
        log.info("scenario started", extra={"scenario": scenario.name})

    async def stop(self) -> None:
        log.debug("stopping: scenario, hangs, jobs, poller, backend")
        if self._scenario_task is not None:
            self._scenario_task.cancel()
        stop_scenario = getattr(self._scenario, "stop", None)
        if stop_scenario is not None:
            stop_scenario()
        release = getattr(self.backend, "release_all", None)
        if release is not None:
            release()
        await self.jobs.stop()
        if self.nics is not None:
            await self.nics.stop()
        if self.hang is not None:
            await self.hang.stop()
        if self.ub is not None:
            await self.ub.stop()
        if self.switch is not None:
            await self.switch.stop()
        await self._setup_scope.stop()
        if self.telemetry is not None:
            await self.telemetry.stop()
        if self.roce is not None:
            await self.roce.stop()
        await self.poller.stop()
        try:
            await self.guard.call("node", self.backend.close)
        except Exception as exc:  # shutting down: report and go on
            log.warning("backend did not close cleanly", extra={"error": repr(exc)})
        self.guard.shutdown()

    def stats(self) -> dict[str, float]:
        return {
            "events_published": float(self.events.published),
            "stream_clients": float(self.stream_clients),
            "hung_calls": float(len(self.guard.hung_keys())),
        }
