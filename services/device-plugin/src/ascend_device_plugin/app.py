"""Wires the device-plugin together and runs it until SIGTERM."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ascend_common.adapters.clients.exporter import ExporterClient, InventoryFollower
from ascend_common.adapters.clients.verdicts import VerdictFollower
from ascend_common.adapters.kubelet import deviceplugin_pb2 as pb
from ascend_common.adapters.lifecycle import Lifecycle
from ascend_common.adapters.ops import ops_app
from ascend_common.adapters.serving import bind_tcp_socket, server
from ascend_common.adapters.settings import parse_host_port
from ascend_common.faults import default_fault_code_table
from ascend_common.inuse import ASCEND_REAL, chips_in_use_for_allocation
from ascend_common.schemas.exporter import (
    VDEV_ID_MAX,
    VDEV_ID_MIN,
    Chip,
    ChipHolders,
    ContainerHolder,
    ContainerMapping,
    NodeInfo,
    VnpuHolders,
)
from ascend_common.schemas.verdict import ChipVerdict
from ascend_common.tokens import first_token

from ascend_device_plugin.allocation.chip_owners import ChipOwners, ChipTaken
from ascend_device_plugin.allocation.containers import Containers
from ascend_device_plugin.allocation.plain import PlainReport
from ascend_device_plugin.allocation.refusals import AllocationError, Refusal
from ascend_device_plugin.allocation.repair import AnnotationRepair
from ascend_device_plugin.allocation.report import HostFacts, Report
from ascend_device_plugin.allocator import Allocator
from ascend_device_plugin.container_metrics.families import ContainerRef
from ascend_device_plugin.container_metrics.sampler import ContainerMetrics
from ascend_device_plugin.inventory.views import ViewBoard
from ascend_device_plugin.kubelet.podresources import find_pod, list_container_devices
from ascend_device_plugin.kubelet.registrar import Registrar
from ascend_device_plugin.kubelet.server import DevicePluginService, ResourceServer
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
    from ascend_device_plugin.dra.driver import DraDriver
    from ascend_device_plugin.dra.grpc_servers import DraServers
    from ascend_device_plugin.dra.slices import SlicePublisher
    from ascend_device_plugin.kube import KubeBridge

log = logging.getLogger(__name__)
GRACE_CHECK_S = 0.5


class SoftShareRefused(ValueError):
    """The node's chips cannot take a mode that is on: soft share (core/softshare.soft_share_refusal)
    or 310P mixed insert (core/mixed.card_usage_refusal)."""


@dataclass
class DevicePlugin:
    settings: PluginSettings
    metrics: PluginMetrics = field(default_factory=PluginMetrics)
    board: ViewBoard = field(default_factory=ViewBoard)
    servers: dict[str, ResourceServer] = field(default_factory=dict)
    lifecycle: Lifecycle = field(default_factory=Lifecycle)

    def __post_init__(self) -> None:
        s = self.settings
        token = first_token(s.token_file) if s.token_file else None
        self.exporter = ExporterClient(s.exporter_socket, token=token)
        self.manager = ResourceManager(
            self.board, default_fault_code_table(), self.metrics,
            share_count=s.share_dev_count, soft_share=s.soft_share, preset_virtual_device=s.preset_virtual_device,
            mixed_310p=s.use_310p_mixed_insert,
        )  # fmt: skip
        kit = self.lifecycle
        self.follower = InventoryFollower(
            self.exporter, self._on_chips, kit.scope("exporter-follower"), on_node=self._on_node
        )
        self.verdicts = (
            VerdictFollower(s.fault_manager_socket, self._on_verdicts, kit.scope("verdict-follower"))
            if s.fault_manager_socket
            else None
        )
        self.kube: KubeBridge | None = None
        if s.kube == "api":
            # Imported only with a cluster: the Kubernetes client is most of an offline plugin's memory.
            from ascend_device_plugin.kube import KubeBridge

            self.kube = KubeBridge.create(s, self._on_pods)
        # Allocation, path by path; each keeps what its own concept needs (allocation/, volcano/).
        containers = Containers(self.manager, runtime_mode=s.runtime_mounts)
        levels = None
        if self.kube is not None:
            kube = self.kube
            levels = LevelSource(
                s.node_name,
                lambda: self.follower.node,
                lambda: kube.node.internal_ip if kube.node is not None else "",
            )
            kube.levels = levels
        # The allocation report is written back when a pod event shows it edited or lost.
        self.repair = AnnotationRepair(self.kube) if self.kube is not None else None
        if self.kube is not None and self.repair is not None:
            self.kube.on_pod_event = self.repair.pod_changed
        report = Report(
            self.manager, patcher=self.kube, node=self.kube.node_facts if self.kube else HostFacts, levels=levels,
            repair=self.repair,
        )  # fmt: skip
        pods = VolcanoPods(self.kube)
        volcano = VolcanoPath(
            self.board, containers, pods, report, taken_tries=s.retry_update_count, taken_wait_s=s.update_pod_wait_time
        )
        self.soft_share_dirs: SoftShareDirs | None = None
        soft_share: SoftSharePath | None = None
        if s.soft_share and s.soft_share_dev_config_dir is not None:
            self.soft_share_dirs = SoftShareDirs(
                HostFiles(s.soft_share_npu_info_dir, s.soft_share_dev_config_dir),
                pods=self.kube.pods if self.kube is not None else list,
            )
            soft_share = SoftSharePath(
                containers, pods, report, volcano, self.soft_share_dirs, s.soft_share_dev_config_dir
            )
            if self.kube is not None:
                self.kube.on_pod_gone = self.soft_share_dirs.pod_gone
        self.allocator = Allocator(
            self.board,
            containers,
            report,
            PlainReport(report, pods=self.kube, find_pod=functools.partial(find_pod, s.podresources_socket)),
            pods,
            DynamicVnpu(containers, pods, report, exporter=self.exporter),
            volcano=volcano if s.volcano_type else None,
            preset_vnpu=s.preset_virtual_device,
            soft_share=soft_share,
            slow_node=self.kube.slow_node_envs if self.kube is not None and s.enable_slow_node else None,
        )  # fmt: skip
        self.registrar = Registrar(
            s.plugin_dir, lambda: self.servers, self._options, self.metrics, require_root=s.require_root_owned
        )
        self._loops = kit.scope("device-plugin")
        self.container_metrics: ContainerMetrics | None = None
        if s.container_metrics_period > 0:
            self.container_metrics = ContainerMetrics(
                lambda deadline_s: list_container_devices(s.podresources_socket, deadline_s),
                self._exporter_chips,
                self._real_allocations,
                period=s.container_metrics_period,
                kubelet_chips=not s.volcano_type,
                publish=self._publish_holders,
            )
            self.metrics.registry.register(self.container_metrics)
        kit.ready_when(lambda: None if self.follower.state.connected else "exporter unreachable")
        kit.ready_when(lambda: None if self.servers else "no chips yet")
        if s.kubelet_api != "dra":
            kit.ready_when(lambda: None if self.registrar.all_registered() else "not registered with the kubelet")
        self.dra: DraServers | None = None
        self.dra_driver: DraDriver | None = None
        self.slices: SlicePublisher | None = None
        # Which API holds each chip (`both`): Allocate and Prepare take chips through this one table.
        self.owners = ChipOwners(allocate_hold_s=s.dra_allocate_hold_s)
        if s.kubelet_api != "device-plugin":
            self._wire_dra()
        self._unmappable: set[str] = set()  # pods whose kltDev/AscendReal could not be read (logged once)
        self._started = False  # start() checked the chips it saw; later chips are checked as they come
        self._refused = False

    def _wire_dra(self) -> None:
        """The DRA driver beside (or instead of) the device plugin, on the same resource manager."""
        # Imported only when switched on: the resource API client pulls in the Kubernetes client,
        # which a device plugin without DRA (and without a cluster) must not load.
        from ascend_device_plugin.dra.driver import DraDriver
        from ascend_device_plugin.dra.grpc_servers import DraServers
        from ascend_device_plugin.dra.resource_api import ResourceApi
        from ascend_device_plugin.dra.slice_devices import DRIVER
        from ascend_device_plugin.dra.slices import SlicePublisher

        s = self.settings
        api = ResourceApi(lambda: self.kube.api if self.kube is not None else None)
        # `both`: a chip goes to one API at a time (core.chip_owners). Allocate takes its chips out of
        # the slice before it answers; a chip reserved for a claim refuses Allocate, and turns
        # Unhealthy for the kubelet's device-plugin side until the claim is unprepared.
        owners = self.owners
        held = (lambda: owners.device_plugin(time.monotonic())) if s.kubelet_api == "both" else frozenset
        if s.kubelet_api == "both":
            self.allocator.containers.hold = self._take_for_device_plugin
        self.dra_driver = DraDriver(
            s.node_name, self.manager, api, s.kubelet_plugins_dir / DRIVER, s.cdi_root, on_change=self._dra_changed,
            owners=owners,
        )  # fmt: skip
        if self.kube is not None:
            self.slices = SlicePublisher(
                s.node_name, self.manager, self.board, api, period=s.list_watch_period, withheld=held,
                on_written=self._slice_written, noexecute_levels=noexecute_levels(s.dra_noexecute_levels),
            )  # fmt: skip
        slices = self.slices
        self.dra = DraServers(
            self.dra_driver, s.kubelet_plugins_dir, s.plugins_registry_dir, s.max_message_bytes,
            # A (re)starting kubelet deleted the node's slices before it registered us again.
            on_registered=(lambda: slices.kick(verify=True)) if slices is not None else lambda: None,
            metrics=self.metrics, changes=self.manager,
        )  # fmt: skip
        dra = self.dra
        self.lifecycle.ready_when(
            lambda: None if dra.registration.registered else "dra driver not registered with the kubelet"
        )

    def _dra_changed(self) -> None:
        if self.settings.kubelet_api == "both" and self.dra_driver is not None:
            self.manager.set_withheld(self.dra_driver.prepared_devices())
        if self.slices is not None:
            self.slices.kick()

    def _slice_written(self, devices: int) -> None:
        self.metrics.dra_slice_writes.inc()
        self.metrics.dra_slice_devices.set(devices)

    def _take_for_device_plugin(self, chips: list[str]) -> None:
        try:
            self.owners.allocate(chips, time.monotonic())
        except ChipTaken as exc:
            raise AllocationError(
                Refusal.DRA_CLAIM, f"{', '.join(exc.chips)} is prepared for the DRA claim uid {exc.claim}"
            ) from None
        if self.slices is not None:
            self.slices.kick()  # the slice's next generation leaves them out; no claim can have them meanwhile
            # A hold no pod's annotation took over ends then: offer the chips again at once, not a period later.
            asyncio.get_running_loop().call_later(self.owners.allocate_hold_s, self.slices.kick)

    # ---- inputs ------------------------------------------------------------------------------

    def _on_chips(self, changed: Mapping[int, Chip]) -> None:
        self.manager.set_chips(changed)
        self._fault_may_have_changed()
        if (reason := self.manager.start_refusal()) is not None:
            # Before start() has checked, it refuses (exit 2); after, the plugin stops (exit 1) and
            # serves nothing of these chips meanwhile.
            if self._started and not self._refused:
                self._refused = True
                self._loops.essential(_refuse(reason), "soft-share-check")
            return
        if self.kube is not None and self.settings.volcano_type:
            self.manager.restore_volcano(self.kube.allocated())
        self._ensure_servers()
        if self.kube is not None:
            node = self.follower.node
            version = node.dcmi_version.value if node is not None and node.dcmi_version.is_ok else None
            self.kube.chips_changed(self.manager, version)

    def _on_node(self, node: NodeInfo) -> None:
        # The levelList's level 3 comes from NodeInfo's NIC mapping and addresses (LevelSource reads
        # follower.node); the labels are re-rendered and written only if their bytes changed.
        if self.kube is not None:
            self.kube.relabel()

    def _on_verdicts(self, changed: Mapping[str, ChipVerdict]) -> None:
        assert self.verdicts is not None
        self.manager.set_verdicts(self.verdicts.verdicts, self.verdicts.connected)
        self._fault_may_have_changed()

    def _fault_may_have_changed(self) -> None:
        # A faulty chip's fault level (its taint's value and effect) can change while it stays
        # Unhealthy, which wakes nothing through the device lists: the slice looks again (a write
        # only if its devices differ).
        if self.slices is not None:
            self.slices.kick()

    def _on_pods(self) -> None:
        assert self.kube is not None
        if self.settings.volcano_type:
            self.manager.restore_volcano(self.kube.allocated())
        self.manager.set_pods(
            self.kube.pods(), in_use_for_health=self.kube.in_use_for_health(), holding=self.kube.holding()
        )
        self.allocator.forget(self.kube.uids())
        if self.settings.kubelet_api == "both":
            self.owners.set_annotated(chips_in_use_for_allocation(self.kube.pods()))
            if self.slices is not None:
                self.slices.kick()  # a pod's chips may have changed hands
        if self.soft_share_dirs is not None:
            self.soft_share_dirs.forget(self.kube.uids())

    async def _exporter_chips(self, deadline_s: float) -> list[Chip]:
        # Read afresh: the follower re-reads a chip on its events only, so its readings are old.
        async with asyncio.timeout(deadline_s):
            return (await self.exporter.chips()).chips

    async def _publish_holders(
        self,
        holders: Mapping[int, Sequence[ContainerRef]],
        vnpus: Mapping[int, Sequence[ContainerRef]],
        deadline_s: float,
    ) -> None:
        def containers(refs: Sequence[ContainerRef]) -> list[ContainerHolder]:
            return [ContainerHolder(namespace=r.namespace, pod=r.pod, container=r.container) for r in refs]

        mapping = ContainerMapping(
            chips=[ChipHolders(phy_id=phy, containers=containers(refs)) for phy, refs in sorted(holders.items())],
            # Only the vdev ids the exporter accepts (npu-exporter serves no other): one the kubelet
            # names outside them must not cost the whole mapping a 422.
            vnpus=[
                VnpuHolders(vdev_id=vdev, containers=containers(refs))
                for vdev, refs in sorted(vnpus.items())
                if VDEV_ID_MIN <= vdev <= VDEV_ID_MAX
            ],
        )
        async with asyncio.timeout(deadline_s):
            await self.exporter.put_containers(mapping)

    def _real_allocations(self) -> dict[tuple[str, str], str]:
        if self.kube is None:
            return {}
        return {(p.namespace, p.name): p.annotations[ASCEND_REAL] for p in self.kube.allocated().values()
                if ASCEND_REAL in p.annotations}  # fmt: skip

    def _options(self, resource: str) -> pb.DevicePluginOptions:
        return pb.DevicePluginOptions(
            pre_start_required=False, get_preferred_allocation_available=self.allocator.preferred_available(resource)
        )

    def _ensure_servers(self) -> None:
        """A server for every resource the board has (vNPU types can appear at any time)."""
        for resource in self.board.resources():
            if resource not in self.servers:
                service = DevicePluginService(
                    resource, self.board, self.allocator, self.settings.list_watch_period, self.metrics
                )
                self.servers[resource] = ResourceServer(
                    resource,
                    self.settings.plugin_dir / f"{resource}.sock",
                    service,
                    self.settings.max_message_bytes,
                    self.settings.max_streams,
                )

    def bad_inputs(self) -> dict[str, str]:
        """The optional inputs refused (/readyz `bad_inputs`): the slow-node ConfigMap's value."""
        return self.kube.bad_inputs.snapshot() if self.kube is not None else {}

    def readiness(self) -> tuple[bool, dict[str, object]]:
        reason = self.lifecycle.not_ready()
        return reason is None, {"reason": reason or f"{len(self.servers)} resources registered"}

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
        self._started = True
        if self.settings.kubelet_api != "dra":
            await self.registrar.start()
        if self.dra is not None and self.dra_driver is not None:
            await self.dra_driver.load()
            await self.dra.start()
        if self.slices is not None:
            self._loops.essential(self.slices.run(), "dra-resourceslice")
        self._loops.essential(self._grace_watch(), "exporter-grace")
        if self.soft_share_dirs is not None and not await self.soft_share_dirs.ready():
            # Not fatal: the admin may create it later; until then every soft-share Allocate is refused.
            log.warning(
                "soft share: the npu-info directory is missing; soft-share pods are refused until it exists",
                extra={"dir": str(self.settings.soft_share_npu_info_dir)},
            )
        if self.soft_share_dirs is not None and self.kube is not None:
            # After the first pod list: the directories of pods deleted while the plugin was away.
            self._loops.spawn(self.soft_share_dirs.sweep_when(self.kube.wait_synced), "soft-share-sweep")
        if not self.settings.preset_virtual_device and self.kube is not None:
            self._loops.essential(self._vnpu_gc(), "vnpu-gc")
        if self.container_metrics is not None:
            # Not essential: the container families are an extra; each round's failures are logged.
            self._loops.spawn(self.container_metrics.run(), "container-metrics")
        if self.settings.ras_net_root_path is not None:
            writer = RasTopologyWriter(self.settings.ras_net_root_path, lambda: self.manager.inventory.super_pod)
            # Not essential: the diagnosis file is an extra; its failures are logged each round.
            self._loops.spawn(writer.run(), "ras-topology")

    async def _grace_watch(self) -> None:
        while True:
            self.manager.set_exporter_lost(self.follower.unreachable_for() > self.settings.exporter_grace)
            await asyncio.sleep(GRACE_CHECK_S)

    async def _vnpu_gc(self) -> None:
        period = self.settings.vnpu_gc_period
        while True:
            await asyncio.sleep(period)
            try:
                await self.allocator.collect_vnpus(grace_s=2 * period)
            except Exception:  # keep sweeping; one bad round must not end the loop
                log.exception("vNPU sweep failed")

    async def stop(self) -> None:
        await self._loops.stop()
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


async def _refuse(reason: str) -> None:
    raise SoftShareRefused(reason)


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
