"""Wires the device-plugin together and runs it until SIGTERM: `DevicePlugin.build` constructs and
connects the parts; what each input's change does is theirs (inputs.py, kube/, handover.py)."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ascend_common.adapters.clients.exporter import ExporterClient, InventoryFollower
from ascend_common.adapters.clients.verdicts import VerdictFollower
from ascend_common.adapters.lifecycle import Lifecycle, TaskScope
from ascend_common.adapters.ops import ops_app
from ascend_common.adapters.serving import bind_tcp_socket, server
from ascend_common.adapters.settings import parse_host_port
from ascend_common.faults import default_fault_code_table
from ascend_common.tokens import first_token

from ascend_device_plugin.allocation.chip_owners import ChipOwners
from ascend_device_plugin.allocation.containers import Containers
from ascend_device_plugin.allocation.plain import PlainReport
from ascend_device_plugin.allocation.repair import AnnotationRepair
from ascend_device_plugin.allocation.report import HostFacts, Report
from ascend_device_plugin.allocator import Allocator
from ascend_device_plugin.container_metrics.sampler import ContainerMetrics, ExporterHolders, real_allocations
from ascend_device_plugin.inputs import ChipInputs, PodInputs, SoftShareRefused
from ascend_device_plugin.inventory.views import ViewBoard
from ascend_device_plugin.kube.pods import NodePods
from ascend_device_plugin.kubelet.podresources import find_pod, list_container_devices
from ascend_device_plugin.kubelet.registrar import Registrar
from ascend_device_plugin.kubelet.servers import ResourceServers
from ascend_device_plugin.levels.level_source import LevelSource
from ascend_device_plugin.metrics import PluginMetrics
from ascend_device_plugin.ras_topology import RasTopologyWriter
from ascend_device_plugin.resources.manager import ResourceManager
from ascend_device_plugin.settings import PluginSettings, noexecute_levels
from ascend_device_plugin.softshare.dirs import SoftShareDirs
from ascend_device_plugin.softshare.files import HostFiles
from ascend_device_plugin.softshare.softshare_path import SoftSharePath
from ascend_device_plugin.vnpu.dynamic import DynamicVnpu
from ascend_device_plugin.volcano.pods import VolcanoPods
from ascend_device_plugin.volcano.volcano_path import VolcanoPath

if TYPE_CHECKING:
    from ascend_common.adapters.inputs import BadInputs

    from ascend_device_plugin.dra.driver import DraDriver
    from ascend_device_plugin.dra.grpc_servers import DraServers
    from ascend_device_plugin.dra.slices import SlicePublisher
    from ascend_device_plugin.handover import DraHandover
    from ascend_device_plugin.kube.edge import KubeEdge
    from ascend_device_plugin.kube.feed import PodFeed
    from ascend_device_plugin.kube.patching import PodPatcher
    from ascend_device_plugin.kube.slow_node import SlowNodeNotice

__all__ = ["DevicePlugin", "SoftShareRefused", "serve"]
log = logging.getLogger(__name__)


@dataclass
class DevicePlugin:
    settings: PluginSettings
    lifecycle: Lifecycle
    metrics: PluginMetrics
    manager: ResourceManager
    exporter: ExporterClient
    follower: InventoryFollower
    verdicts: VerdictFollower | None
    chips: ChipInputs
    servers: ResourceServers
    registrar: Registrar
    allocator: Allocator
    loops: TaskScope
    kube: KubeEdge | None  # --kube api
    bad_input_names: BadInputs | None  # the slow-node ConfigMap's (--kube api)
    repair: AnnotationRepair | None
    soft_share_dirs: SoftShareDirs | None
    container_metrics: ContainerMetrics | None
    dra: DraServers | None  # --kubelet-api dra|both
    dra_driver: DraDriver | None
    slices: SlicePublisher | None  # with DRA and a cluster

    @classmethod
    def build(cls, settings: PluginSettings) -> DevicePlugin:
        s = settings
        kit = Lifecycle()
        metrics = PluginMetrics()
        board = ViewBoard()
        token = first_token(s.token_file) if s.token_file else None
        exporter = ExporterClient(s.exporter_socket, token=token)
        manager = ResourceManager(
            board, default_fault_code_table(), metrics,
            share_count=s.share_dev_count, soft_share=s.soft_share, preset_virtual_device=s.preset_virtual_device,
            mixed_310p=s.use_310p_mixed_insert,
        )  # fmt: skip
        follower_scope = kit.scope("exporter-follower")
        verdict_scope = kit.scope("verdict-follower") if s.fault_manager_socket else None
        loops = kit.scope("device-plugin")

        # The node's pods (--kube api): what the allocation paths, health and soft share read.
        index = NodePods() if s.kube == "api" else None
        soft_share_dirs: SoftShareDirs | None = None
        if s.soft_share and s.soft_share_dev_config_dir is not None:
            soft_share_dirs = SoftShareDirs(
                HostFiles(s.soft_share_npu_info_dir, s.soft_share_dev_config_dir),
                pods=index.pods if index is not None else list,
            )

        # The cluster's side (--kube api), one piece a concept (kube/). Imported only with a cluster:
        # the Kubernetes client is most of an offline plugin's memory.
        kube: KubeEdge | None = None
        feed: PodFeed | None = None
        slow_node: SlowNodeNotice | None = None
        patcher: PodPatcher | None = None
        node_facts: Callable[[], HostFacts] = HostFacts
        levels: LevelSource | None = None
        repair: AnnotationRepair | None = None
        if index is not None:
            from ascend_device_plugin.kube.connection import ApiConnection
            from ascend_device_plugin.kube.edge import KubeEdge
            from ascend_device_plugin.kube.feed import PodFeed
            from ascend_device_plugin.kube.labels import NodeLabels
            from ascend_device_plugin.kube.node import NodeFollower
            from ascend_device_plugin.kube.patching import PodPatcher
            from ascend_device_plugin.kube.retire import OldResources
            from ascend_device_plugin.kube.slow_node import SlowNodeNotice

            connection = ApiConnection(s.kubeconfig)
            retire = OldResources(connection, s.node_name)
            # The labels read the Node and write it back, and a change of it re-renders them (bound
            # just below), before the old resources are tried again.
            node = NodeFollower(
                s.node_name, on_change=[lambda old, new: labels.node_changed(old, new), retire.node_changed]
            )
            # Level 3 of the levelList comes from the exporter's NodeInfo (its follower is built last).
            levels = LevelSource(s.node_name, lambda: follower.node, node.internal_ip)
            labels = NodeLabels(connection, node, levels)
            patcher = PodPatcher(connection)
            node_facts = node.facts
            slow_node = SlowNodeNotice(connection)
            # The allocation report is written back when a pod event shows it edited or lost.
            repair = AnnotationRepair(patcher)
            # Every pod event reaches the repair and soft share as it comes; the pods as a whole reach
            # the allocation state (bound below: the Volcano path re-lists through this feed).
            feed = PodFeed(
                index, s.node_name, lambda: pod_inputs.pods_changed(), on_pod_event=repair.pod_changed,
                on_pod_gone=soft_share_dirs.pod_gone if soft_share_dirs is not None else None,
                kubelet=s.kubelet_source(),
            )  # fmt: skip
            kube = KubeEdge(connection, feed, node, labels, retire)

        # DRA beside (or instead of) the device plugin, on the same resource manager. Imported only
        # when switched on: the resource API client pulls in the Kubernetes client.
        handover: DraHandover | None = None
        dra: DraServers | None = None
        dra_driver: DraDriver | None = None
        slices: SlicePublisher | None = None
        if s.kubelet_api != "device-plugin":
            from ascend_device_plugin.dra.driver import DraDriver
            from ascend_device_plugin.dra.grpc_servers import DraServers
            from ascend_device_plugin.dra.resource_api import ResourceApi
            from ascend_device_plugin.dra.slice_devices import DRIVER
            from ascend_device_plugin.dra.slices import SlicePublisher
            from ascend_device_plugin.handover import DraHandover

            api = ResourceApi(lambda: kube.connection.api if kube is not None else None)
            # Which API holds each chip (`both`): Allocate and Prepare take chips through this one table.
            owners = ChipOwners(allocate_hold_s=s.dra_allocate_hold_s)
            if kube is not None:
                slices = SlicePublisher(
                    s.node_name, manager, board, api, period=s.list_watch_period,
                    withheld=lambda: handover.held_by_device_plugin() if handover is not None else frozenset(),
                    on_written=metrics.dra_slice_written, noexecute_levels=noexecute_levels(s.dra_noexecute_levels),
                )  # fmt: skip
            # The driver tells the handover its claims changed; the handover reads its prepared chips.
            handover = DraHandover(
                owners, manager, both=s.kubelet_api == "both", slices=slices, prepared=lambda: driver.prepared_devices()
            )
            driver = dra_driver = DraDriver(
                s.node_name, manager, api, s.kubelet_plugins_dir / DRIVER, s.cdi_root, on_change=handover.dra_changed,
                owners=owners,
            )  # fmt: skip
            published = slices
            dra = DraServers(
                driver, s.kubelet_plugins_dir, s.plugins_registry_dir, s.max_message_bytes,
                # A (re)starting kubelet deleted the node's slices before it registered us again.
                on_registered=(lambda: published.kick(verify=True)) if published is not None else lambda: None,
                metrics=metrics, changes=manager,
            )  # fmt: skip

        # Allocation, path by path; each keeps what its own concept needs (allocation/, volcano/).
        hold = handover.take_for_device_plugin if handover is not None and s.kubelet_api == "both" else None
        containers = Containers(manager, runtime_mode=s.runtime_mounts, hold=hold)
        report = Report(manager, patcher=patcher, node=node_facts, levels=levels, repair=repair)
        pods = VolcanoPods(feed)
        volcano = VolcanoPath(
            board, containers, pods, report, taken_tries=s.retry_update_count, taken_wait_s=s.update_pod_wait_time
        )
        soft_share = (
            SoftSharePath(containers, pods, report, volcano, soft_share_dirs, s.soft_share_dev_config_dir)
            if soft_share_dirs is not None and s.soft_share_dev_config_dir is not None
            else None
        )
        allocator = Allocator(
            board,
            containers,
            report,
            PlainReport(report, pods=feed, find_pod=functools.partial(find_pod, s.podresources_socket)),
            pods,
            DynamicVnpu(containers, pods, report, exporter=exporter),
            volcano=volcano if s.volcano_type else None,
            preset_vnpu=s.preset_virtual_device,
            soft_share=soft_share,
            slow_node=slow_node.envs if slow_node is not None and s.enable_slow_node else None,
        )  # fmt: skip
        if index is not None:
            pod_inputs = PodInputs(
                manager, index, allocator.forget, volcano=s.volcano_type, handover=handover,
                soft_share_dirs=soft_share_dirs,
            )  # fmt: skip
        servers = ResourceServers(
            board, allocator, metrics, s.plugin_dir, s.list_watch_period, s.max_message_bytes, s.max_streams
        )
        registrar = Registrar(
            s.plugin_dir, servers.current, servers.options, metrics, require_root=s.require_root_owned
        )
        chips = ChipInputs(
            manager, servers, loops, lambda: follower.node, volcano=s.volcano_type, pods=index,
            kube=kube, handover=handover,
        )  # fmt: skip
        follower = InventoryFollower(exporter, chips.chips_changed, follower_scope, on_node=chips.node_changed)
        verdicts: VerdictFollower | None = None
        if s.fault_manager_socket and verdict_scope is not None:
            # The chips take the follower's whole table (and whether it is connected) on each change.
            verdicts = followed = VerdictFollower(
                s.fault_manager_socket,
                lambda _: chips.verdicts_changed(followed.verdicts, followed.connected),
                verdict_scope,
            )
        container_metrics: ContainerMetrics | None = None
        if s.container_metrics_period > 0:
            holders = ExporterHolders(exporter)
            container_metrics = ContainerMetrics(
                lambda deadline_s: list_container_devices(s.podresources_socket, deadline_s),
                holders.chips,
                (lambda: real_allocations(index.allocated())) if index is not None else dict,
                period=s.container_metrics_period,
                kubelet_chips=not s.volcano_type,
                publish=holders.publish,
            )
            metrics.registry.register(container_metrics)

        kit.ready_when(lambda: None if follower.state.connected else "exporter unreachable")
        kit.ready_when(lambda: None if servers.current() else "no chips yet")
        if s.kubelet_api != "dra":
            kit.ready_when(lambda: None if registrar.all_registered() else "not registered with the kubelet")
        if dra is not None:
            registration = dra.registration
            kit.ready_when(lambda: None if registration.registered else "dra driver not registered with the kubelet")
        return cls(
            s, kit, metrics, manager, exporter, follower, verdicts, chips, servers, registrar, allocator, loops, kube,
            slow_node.bad_inputs if slow_node is not None else None, repair, soft_share_dirs, container_metrics, dra,
            dra_driver, slices,
        )  # fmt: skip

    def bad_inputs(self) -> dict[str, str]:
        """The optional inputs refused (/readyz `bad_inputs`): the slow-node ConfigMap's value."""
        return self.bad_input_names.snapshot() if self.bad_input_names is not None else {}

    def readiness(self) -> tuple[bool, dict[str, object]]:
        reason = self.lifecycle.not_ready()
        return reason is None, {"reason": reason or f"{len(self.servers.current())} resources registered"}

    # ---- lifecycle ---------------------------------------------------------------------------

    async def start(self) -> None:
        await self.follower.start()
        if self.verdicts is not None:
            await self.verdicts.start()
        if self.kube is not None:
            await self.kube.start()
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(10):
                await self.follower.synced.wait()
        if (reason := self.manager.start_refusal()) is not None:
            raise SoftShareRefused(reason)
        self.chips.started = True
        if self.settings.kubelet_api != "dra":
            await self.registrar.start()
        if self.dra is not None and self.dra_driver is not None:
            await self.dra_driver.load()
            await self.dra.start()
        if self.slices is not None:
            self.loops.essential(self.slices.run(), "dra-resourceslice")
        self.loops.essential(
            self.chips.watch_exporter(self.follower.unreachable_for, self.settings.exporter_grace), "exporter-grace"
        )
        if self.soft_share_dirs is not None and not await self.soft_share_dirs.ready():
            # Not fatal: the admin may create it later; until then every soft-share Allocate is refused.
            log.warning(
                "soft share: the npu-info directory is missing; soft-share pods are refused until it exists",
                extra={"dir": str(self.settings.soft_share_npu_info_dir)},
            )
        if self.soft_share_dirs is not None and self.kube is not None:
            # After the first pod list: the directories of pods deleted while the plugin was away.
            self.loops.spawn(self.soft_share_dirs.sweep_when(self.kube.feed.wait_synced), "soft-share-sweep")
        if not self.settings.preset_virtual_device and self.kube is not None:
            self.loops.essential(self.allocator.sweep_vnpus(self.settings.vnpu_gc_period), "vnpu-gc")
        if self.container_metrics is not None:
            # Not essential: the container families are an extra; each round's failures are logged.
            self.loops.spawn(self.container_metrics.run(), "container-metrics")
        if self.settings.ras_net_root_path is not None:
            writer = RasTopologyWriter(self.settings.ras_net_root_path, lambda: self.manager.inventory.super_pod)
            # Not essential: the diagnosis file is an extra; its failures are logged each round.
            self.loops.spawn(writer.run(), "ras-topology")

    async def stop(self) -> None:
        await self.loops.stop()
        if self.dra is not None:
            await self.dra.stop()
        await self.registrar.shutdown()
        await self.allocator.stop()
        if self.repair is not None:
            await self.repair.stop()
        if self.soft_share_dirs is not None:
            await self.soft_share_dirs.stop()
        await self.follower.stop()
        if self.verdicts is not None:
            await self.verdicts.stop()
        if self.kube is not None:
            await self.kube.stop()
        await self.exporter.close()


async def serve(plugin: DevicePlugin) -> int:
    """Run until SIGTERM/SIGINT; the exit status is 1 when an essential loop ended (adapters.lifecycle)."""
    kit = plugin.lifecycle
    host, port = parse_host_port(plugin.settings.metrics_addr)
    ops = server(ops_app(plugin.readiness, plugin.metrics.registry, bad_inputs=plugin.bad_inputs))

    async def start() -> None:
        ops_sock = bind_tcp_socket(host, port)  # first: an address in use stops the plugin before it registers anywhere
        serving = kit.scope("ops").essential(ops.serve(sockets=[ops_sock]), "ops")

        async def stop_serving() -> None:
            log.info("ascend-device-plugin stopping")
            ops.should_exit = True
            await asyncio.wait([serving], timeout=5)

        kit.on_stop(plugin.stop)
        kit.on_stop(stop_serving)  # last registered, first run: the ops port closes first, as before
        await plugin.start()
        log.info("ascend-device-plugin serving", extra={"plugin_dir": str(plugin.settings.plugin_dir)})

    return await kit.run(start)
