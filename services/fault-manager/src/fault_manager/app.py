"""Wires the fault-manager together and runs it until SIGTERM."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import socket
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass

from ascend_common.adapters.kube.client import KubeNotFound
from ascend_common.adapters.kube.configmaps import ApiConfigMaps, ConfigMaps, OfflineConfigMaps
from ascend_common.adapters.kube.events import ApiEventSink, FaultEvents, OfflineEventSink
from ascend_common.adapters.kube.patch import get_node, patch_node
from ascend_common.adapters.kube.pod_watch import PodCache
from ascend_common.adapters.serving import bind_unix_socket, server
from ascend_common.adapters.settings import parse_host_port
from ascend_common.clients.exporter import ExporterClient
from ascend_common.clock import SystemClock
from ascend_common.essential import exit_status, stop_service_when_one_ends
from ascend_common.inuse import allocation_share, health_share
from ascend_common.node_reset_info import RESET_INFO_ANNOTATION
from ascend_common.pods import SlimPod
from ascend_common.tokens import first_token

from fault_manager.api import create_api, create_ops_app
from fault_manager.engine import FaultEngine
from fault_manager.hotreset import HotReset
from fault_manager.policy import PolicyKeeper, build, read_policy_dir
from fault_manager.service import FaultManager
from fault_manager.settings import FaultManagerSettings
from fault_manager.store import Store

log = logging.getLogger(__name__)


def policy_files(settings: FaultManagerSettings) -> dict[str, str]:
    """The files of --policy-dir (none: the packaged reference tables)."""
    return read_policy_dir(settings.policy_dir)


class ChipsInUse:
    """The chips the node's pods use, by both predicates of ascend_common.inuse, kept one pod event
    at a time: the event's pod takes its old share out and puts its new one in. A pass over the
    whole cache instead costs milliseconds of CPU on a 10,000-pod node, and every pod event (each
    Volcano allocation patches one) asked for it.
    """

    def __init__(self) -> None:
        # uid -> (its chips for the free list and reset, its chips for health)
        self._shares: dict[str, tuple[frozenset[str], frozenset[str]]] = {}
        self._allocation: Counter[str] = Counter()  # chip -> pods naming it (chips_in_use_for_allocation)
        self._health: Counter[str] = Counter()  # chip -> pods naming it (chips_in_use_for_health)

    def changed(self, kind: str, pod: SlimPod) -> None:
        old = self._shares.pop(pod.uid, None)
        if old is not None:
            self._count(old, -1)
        if kind == "DELETED":
            return
        share = (allocation_share(pod), health_share(pod))
        if share[0] or share[1]:
            self._shares[pod.uid] = share
            self._count(share, 1)

    def _count(self, share: tuple[frozenset[str], frozenset[str]], step: int) -> None:
        for counter, chips in zip((self._allocation, self._health), share, strict=True):
            for chip in chips:
                counter[chip] += step
                if counter[chip] <= 0:
                    del counter[chip]

    def any_phase(self) -> set[str]:
        """In use for the free list and reset: a Pending or Running pod's AscendReal/kltDev names the chip."""
        return set(self._allocation)

    def in_use_for_health(self, chip: str) -> bool:
        """In use for the health rule (PreSeparateNPU, and FreeRestartNPU with GraceToleranceOn)."""
        return chip in self._health


@dataclass
class Service:
    settings: FaultManagerSettings
    fm: FaultManager
    offline: OfflineConfigMaps | None
    exporter: ExporterClient
    store: Store
    keeper: PolicyKeeper
    configmaps: ConfigMaps
    pods: PodCache | None = None
    hot_reset: HotReset | None = None

    @classmethod
    def build(cls, settings: FaultManagerSettings) -> Service:
        clock = SystemClock(time_scale=settings.time_scale)
        store = Store(settings.db)
        exporter = ExporterClient(settings.exporter_socket)
        offline: OfflineConfigMaps | None = None
        pods: PodCache | None = None
        configmaps: ConfigMaps
        if settings.kube == "offline":
            offline = OfflineConfigMaps(settings.state_dir / "kube")
            configmaps = offline
        else:
            from ascend_common.adapters.kube.config import build_api_client

            api = build_api_client(kubeconfig=settings.kubeconfig)
            configmaps = ApiConfigMaps(api)
            pods = PodCache(api, settings.node_name)
        # Our --hot-reset is the reference's HotResetTrainOffLine: with it, a training chip has
        # GraceToleranceOn (ascend_common.faults.policy.supports_grace_tolerance).
        engine = FaultEngine(
            build(policy_files(settings)), time_scale=settings.time_scale, hot_reset=settings.hot_reset
        )
        fm = FaultManager(
            store, engine, exporter, configmaps, clock, settings.node_name,
            write_interval=settings.write_interval, refresh_period=settings.refresh_period,
            retention_s=settings.retention_days * 86400,
        )  # fmt: skip
        if pods is not None:
            # Contract section 8: a chip a pod holds is not free and not reset; one a pod uses for
            # health (even a Pending pod Volcano bound to it) stays Healthy at PreSeparateNPU.
            in_use = ChipsInUse()
            fm.in_use = in_use.any_phase
            fm.in_use_for_health = in_use.in_use_for_health

            def pods_changed(kind: str, pod: SlimPod) -> None:
                in_use.changed(kind, pod)
                fm.pods_changed()

            pods.on_change.append(pods_changed)
        sink = OfflineEventSink(settings.state_dir / "kube") if offline is not None else ApiEventSink(api)
        pod = settings.pod_name or os.environ.get("HOSTNAME") or socket.gethostname()
        fm.events = FaultEvents(sink, settings.node_name, clock.now, pod=pod)
        keeper = PolicyKeeper(store, fm.adopt_policy, "policy-dir" if settings.policy_dir else "packaged")
        hot_reset = None
        if settings.hot_reset:
            if settings.token_file is None:
                raise ValueError("--hot-reset needs --token-file with the fault-manager's `reset` token")
            resetter = ExporterClient(settings.exporter_socket, token=first_token(settings.token_file))
            hot_reset = HotReset(fm, resetter, store, configmaps=configmaps, mirror_dir=settings.reset_mirror_dir)
            if pods is not None:
                hot_reset.pods = pods.pods
            if offline is not None:
                objects = offline
                hot_reset.write_reset_info = lambda info: objects.annotate_node(
                    settings.node_name, {RESET_INFO_ANNOTATION: info}
                )
                hot_reset.read_node_annotations = lambda: objects.node_annotations(settings.node_name)
            else:
                node, client = settings.node_name, api

                async def annotate(info: str) -> None:
                    await patch_node(client, node, annotations={RESET_INFO_ANNOTATION: info})

                async def read_annotations() -> Mapping[str, str] | None:
                    try:
                        return (await get_node(client, node)).annotations
                    except KubeNotFound:  # no node object: nothing was left on it
                        return None

                hot_reset.write_reset_info = annotate
                hot_reset.read_node_annotations = read_annotations
        return cls(settings, fm, offline, exporter, store, keeper, configmaps, pods, hot_reset)


async def serve(service: Service) -> int:
    """Run until SIGTERM/SIGINT; the exit status is 1 when an essential loop ended (see `essential`)."""
    s = service.settings
    api_sock = bind_unix_socket(s.socket, group=s.socket_group)
    host, port = parse_host_port(s.metrics_addr)
    api = server(create_api(service.fm, service.offline, service.keeper, service.hot_reset))
    ops = server(create_ops_app(service.fm), host=host, port=port)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    stop_service_when_one_ends()
    if service.pods is not None:
        await service.pods.start()
    if s.kube == "offline":
        await service.keeper.offer(policy_files(s), service.keeper.status.source)
    if service.fm.events is not None:
        service.fm.events.start()
    await service.fm.start()
    if service.hot_reset is not None:
        await service.hot_reset.start()
    if s.kube == "api":
        base = policy_files(s)
        policy_task = asyncio.create_task(
            service.keeper.follow_configmap(service.configmaps, s.policy_poll, base, service.keeper.status.source)
        )
    tasks = [asyncio.create_task(api.serve(sockets=[api_sock])), asyncio.create_task(ops.serve())]
    log.info("fault-manager serving", extra={"socket": str(s.socket), "kube": s.kube, "db": str(s.db)})
    await stop.wait()
    log.info("fault-manager stopping")
    api.should_exit = ops.should_exit = True
    await asyncio.wait(tasks, timeout=5)
    if s.kube == "api":
        policy_task.cancel()
        await asyncio.wait([policy_task], timeout=5)
    if service.hot_reset is not None:
        await service.hot_reset.stop()
    await service.fm.stop()
    if service.fm.events is not None:
        await service.fm.events.stop()
    if service.pods is not None:
        await service.pods.stop()
    await service.exporter.close()
    await asyncio.to_thread(service.store.close)
    with contextlib.suppress(FileNotFoundError):
        s.socket.unlink()
    return exit_status()
