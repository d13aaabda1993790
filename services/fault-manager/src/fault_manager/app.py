"""Wires the fault-manager together and runs it until SIGTERM.

Ingest follows the exporter into the inbox; the reactor alone owns the engine, applies the
inbox's inputs in order and publishes; the device-info writer, the API and hot reset read what
it published and send it inputs. The lifecycle kit (ascend_common.adapters.lifecycle) owns their tasks.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
from collections.abc import Coroutine
from dataclasses import dataclass
from typing import Any

from ascend_common.adapters.clients.exporter import ExporterClient
from ascend_common.adapters.kube.configmaps import ApiConfigMaps, ConfigMaps, OfflineConfigMaps
from ascend_common.adapters.kube.events import ApiEventSink, EventSink, OfflineEventSink
from ascend_common.adapters.lifecycle import Lifecycle
from ascend_common.adapters.ops import ops_app
from ascend_common.adapters.pod_source import PodSource, build_pod_source
from ascend_common.adapters.serving import bind_unix_socket, server
from ascend_common.adapters.settings import parse_host_port
from ascend_common.clock import Clock, SystemClock
from ascend_common.tokens import first_token

from fault_manager.api import create_api, readiness
from fault_manager.events.fault_events import FaultEvents
from fault_manager.hotreset.handoff import NodeAnnotations
from fault_manager.hotreset.loop import HotReset
from fault_manager.hotreset.node_annotations import ApiNodeAnnotations, OfflineNodeAnnotations
from fault_manager.metrics import ops_registry
from fault_manager.policy.engine import FaultEngine
from fault_manager.policy.keeper import NAMESPACE as POLICY_NAMESPACE
from fault_manager.policy.keeper import POLICY_CONFIGMAP, PolicyKeeper, build, read_policy_dir
from fault_manager.publishing.writer import NAMESPACE as DEVICE_INFO_NAMESPACE
from fault_manager.publishing.writer import DeviceInfoWriter, configmap_name
from fault_manager.reactor.ingest import Ingest
from fault_manager.reactor.inputs import Inbox
from fault_manager.reactor.published import NodeState, Published
from fault_manager.reactor.reactor import Reactor
from fault_manager.reactor.verdicts import VerdictBoard
from fault_manager.retention import prune_forever
from fault_manager.settings import HOT_RESET_INFER, HOT_RESET_OFF, HOT_RESET_TRAIN, FaultManagerSettings
from fault_manager.store import Store, in_store_thread

log = logging.getLogger(__name__)
# How long the first device-info write waits for the node's pods to be listed: written before, the
# free list would offer a chip a running pod holds until the list arrives.
POD_LIST_WAIT_S = 10.0


def policy_files(settings: FaultManagerSettings) -> dict[str, str]:
    """The files of --policy-dir (none: the packaged reference tables)."""
    return read_policy_dir(settings.policy_dir)


@dataclass
class Service:
    settings: FaultManagerSettings
    kit: Lifecycle
    clock: Clock
    store: Store
    exporter: ExporterClient
    configmaps: ConfigMaps
    offline: OfflineConfigMaps | None
    pods: PodSource | None
    events: FaultEvents
    inbox: Inbox
    published: Published
    ingest: Ingest
    reactor: Reactor
    writer: DeviceInfoWriter
    keeper: PolicyKeeper
    hot_reset: HotReset | None

    @classmethod
    async def build(cls, settings: FaultManagerSettings) -> Service:
        kit = Lifecycle()
        clock = SystemClock(time_scale=settings.time_scale)
        store = Store(settings.db)
        exporter = ExporterClient(settings.exporter_socket)
        offline: OfflineConfigMaps | None = None
        pods: PodSource | None = None
        configmaps: ConfigMaps
        sink: EventSink
        node: NodeAnnotations
        if settings.kube == "offline":
            offline = OfflineConfigMaps(settings.state_dir / "kube")
            configmaps = offline
            sink = OfflineEventSink(settings.state_dir / "kube")
            node = OfflineNodeAnnotations(offline, settings.node_name)
        else:
            from ascend_common.adapters.kube.config import build_api_client

            api = await build_api_client(kubeconfig=settings.kubeconfig)
            kit.on_stop(api.close)  # its aiohttp session; registered first, so it closes after its users stop
            configmaps = ApiConfigMaps(api)
            pods = build_pod_source(api, settings.node_name, settings.kubelet_source())
            sink = ApiEventSink(api)
            node = ApiNodeAnnotations(api, settings.node_name)
        # Hot-reset mode 2 (--hot-reset) is the reference's HotResetTrainOffLine: with it, a training chip
        # has GraceToleranceOn (ascend_common.faults.policy.supports_grace_tolerance); mode 0 has none.
        mode = settings.reset_mode
        engine = FaultEngine(
            build(policy_files(settings)), time_scale=settings.time_scale, hot_reset=mode == HOT_RESET_TRAIN
        )
        pod = settings.pod_name or os.environ.get("HOSTNAME") or socket.gethostname()
        events = FaultEvents(sink, settings.node_name, clock.now, pod=pod, fault_format=settings.fault_event_format)
        inbox = Inbox()
        published = Published(VerdictBoard(), NodeState(engine.policy))
        name = configmap_name(settings.node_name)
        reactor = Reactor(engine, store, inbox, published, clock, events, name, duo_rule=mode == HOT_RESET_INFER)
        ingest = Ingest(exporter, store.events, inbox, clock, published.inventory)
        # With a cluster the ConfigMap is watched by name: no read every few seconds for an edit.
        follow = configmaps.watch(DEVICE_INFO_NAMESPACE, name) if isinstance(configmaps, ApiConfigMaps) else None
        writer = DeviceInfoWriter(
            configmaps, published, inbox, clock, settings.node_name, events,
            write_interval=settings.write_interval, refresh_period=settings.refresh_period, follow=follow,
        )  # fmt: skip
        if pods is not None:
            # Contract section 8: a chip a pod holds is not free and not reset; one a pod uses for
            # health (even a Pending pod Volcano bound to it) stays Healthy at PreSeparateNPU.
            pods.on_change.append(inbox.pod_changed)
        keeper = PolicyKeeper(store, inbox.adopt_policy, "policy-dir" if settings.policy_dir else "packaged")
        kit.ready_when(lambda: None if ingest.synced.is_set() else "not synced with the exporter yet")
        hot_reset = None
        if mode != HOT_RESET_OFF:
            if settings.token_file is None:
                raise ValueError(f"hot reset (mode {mode}) needs --token-file with the fault-manager's `reset` token")
            resetter = ExporterClient(settings.exporter_socket, token=first_token(settings.token_file))
            infer = mode == HOT_RESET_INFER
            log.info("hot reset on", extra={"mode": mode, "kind": "inference" if infer else "training"})
            hot_reset = HotReset(
                published, inbox, resetter, store, clock, settings.node_name, kit.scope("hot-reset"), node=node,
                pods=pods.pods if pods is not None else list, configmaps=None if infer else configmaps,
                mirror_dir=None if infer else settings.reset_mirror_dir, infer=infer,
            )  # fmt: skip
        return cls(
            settings, kit, clock, store, exporter, configmaps, offline, pods, events, inbox, published, ingest, reactor,
            writer, keeper, hot_reset,
        )  # fmt: skip


async def _after_pods_listed(pods: PodSource | None, inbox: Inbox, then: Coroutine[Any, Any, None]) -> None:
    """`then`, once the node's pods are listed and the reactor has applied them (or POD_LIST_WAIT_S
    passed: published without them, and corrected by the pods' first change)."""
    if pods is not None:
        if await pods.wait_synced(POD_LIST_WAIT_S):
            await inbox.pods_listed()
        else:
            log.warning("the node's pods are not listed yet; the device-info ConfigMap is written without them")
    await then


async def serve(service: Service) -> int:
    """Run until SIGTERM/SIGINT; the exit status is 1 when an essential loop ended (adapters.lifecycle)."""
    s = service.settings
    kit = service.kit
    api_sock = bind_unix_socket(s.socket, group=s.socket_group)
    host, port = parse_host_port(s.metrics_addr)
    api = server(create_api(service.published, service.inbox, service.store.events, service.store.resets,
                            service.offline, service.keeper, service.hot_reset))  # fmt: skip
    hot_reset = service.hot_reset
    resets = (lambda: hot_reset.outcomes) if hot_reset is not None else dict
    ops_metrics = ops_registry(service.published, lambda: service.reactor.ingested, resets)
    ops = server(ops_app(readiness(service.published, kit.not_ready), ops_metrics), host=host, port=port)
    loops = kit.scope("fault-manager")
    servers = kit.scope("servers")

    def unlink_socket() -> None:
        with contextlib.suppress(FileNotFoundError):
            s.socket.unlink()

    async def start() -> None:
        kit.on_stop(unlink_socket)
        kit.on_stop(lambda: in_store_thread(service.store.close))
        kit.on_stop(service.exporter.close)
        if service.pods is not None:
            await service.pods.start()
            kit.on_stop(service.pods.stop)
        service.events.start()
        kit.on_stop(service.events.stop)
        await service.reactor.start()
        loops.essential(service.reactor.run(), "reactor")
        loops.essential(service.ingest.run(), "ingest-follow")
        loops.essential(_after_pods_listed(service.pods, service.inbox, service.writer.run()), "deviceinfo-writer")
        loops.essential(prune_forever(service.store, service.clock, s.retention_days * 86400), "retention")
        kit.on_stop(loops.stop)
        if s.kube == "offline":  # the reactor runs: the policy it adopts applies to every chip
            await service.keeper.offer(policy_files(s), service.keeper.status.source)
        if service.hot_reset is not None:
            await service.hot_reset.start()
            kit.on_stop(service.hot_reset.stop)
        if s.kube == "api":
            base = policy_files(s)
            cms = service.configmaps
            watched = cms.watch(POLICY_NAMESPACE, POLICY_CONFIGMAP) if isinstance(cms, ApiConfigMaps) else None
            follow = service.keeper.follow_configmap(cms, s.policy_poll, base, service.keeper.status.source, watched)
            loops.essential(follow, "policy-follow")
        tasks = [servers.essential(api.serve(sockets=[api_sock]), "api"), servers.essential(ops.serve(), "ops")]

        async def stop_serving() -> None:
            log.info("fault-manager stopping")
            api.should_exit = ops.should_exit = True
            await asyncio.wait(tasks, timeout=5)

        kit.on_stop(stop_serving)
        log.info("fault-manager serving", extra={"socket": str(s.socket), "kube": s.kube, "db": str(s.db)})

    return await kit.run(start)
