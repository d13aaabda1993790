"""The device plugin's gRPC servers, one per resource the board has (vNPU types can appear at any
time), and the options each registers with."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from ascend_common.adapters.kubelet import deviceplugin_pb2 as pb

from ascend_device_plugin.allocator import Allocator
from ascend_device_plugin.inventory.views import ViewBoard
from ascend_device_plugin.kubelet.server import DevicePluginService, ResourceServer
from ascend_device_plugin.metrics import PluginMetrics


@dataclass
class ResourceServers:
    board: ViewBoard
    allocator: Allocator
    metrics: PluginMetrics
    plugin_dir: Path
    list_watch_period: float
    max_message_bytes: int
    max_streams: int
    by_resource: dict[str, ResourceServer] = field(default_factory=dict)

    def current(self) -> dict[str, ResourceServer]:
        return self.by_resource

    def ensure(self) -> None:
        """A server for every resource the board has."""
        for resource in self.board.resources():
            if resource not in self.by_resource:
                service = DevicePluginService(
                    resource, self.board, self.allocator, self.list_watch_period, self.metrics
                )
                self.by_resource[resource] = ResourceServer(
                    resource,
                    self.plugin_dir / f"{resource}.sock",
                    service,
                    self.max_message_bytes,
                    self.max_streams,
                )

    def options(self, resource: str) -> pb.DevicePluginOptions:
        return pb.DevicePluginOptions(
            pre_start_required=False, get_preferred_allocation_available=self.allocator.preferred_available(resource)
        )
