"""The plugin's Prometheus metrics (one registry per process, so tests can build several)."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from ascend_device_plugin.inventory.views import AdvertisedDevice


class PluginMetrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        r = self.registry
        self.registrations = Counter(
            "ascend_device_plugin_registrations", "registrations with the kubelet", ["resource"], registry=r
        )
        self.list_and_watch_sends = Counter(
            "ascend_device_plugin_list_and_watch_sends", "ListAndWatch messages sent", ["resource"], registry=r
        )
        self.allocations = Counter(
            "ascend_device_plugin_allocations", "Allocate calls by result", ["resource", "result"], registry=r
        )
        self.allocate_seconds = Histogram(
            "ascend_device_plugin_allocate_seconds",
            "Allocate latency",
            ["resource"],
            buckets=(0.0005, 0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0),
            registry=r,
        )
        self.devices = Gauge("ascend_device_plugin_devices", "advertised devices", ["resource", "health"], registry=r)
        # DRA (--kubelet-api dra|both)
        self.dra_claims = Counter(
            "ascend_device_plugin_dra_claims", "DRA claims by call and result", ["call", "result"], registry=r
        )
        self.dra_slice_writes = Counter(
            "ascend_device_plugin_dra_slice_writes", "ResourceSlice generations written", registry=r
        )
        self.dra_slice_devices = Gauge(
            "ascend_device_plugin_dra_slice_devices", "devices in the node's ResourceSlice as last written", registry=r
        )

    def dra_slice_written(self, devices: int) -> None:
        """The DRA driver wrote a generation of the node's ResourceSlice with `devices` devices."""
        self.dra_slice_writes.inc()
        self.dra_slice_devices.set(devices)

    def devices_published(self, resource: str, devices: tuple[AdvertisedDevice, ...]) -> None:
        """The resource manager published a resource's devices (metrics listen to it)."""
        healthy = sum(d.healthy for d in devices)
        self.devices.labels(resource, "Healthy").set(healthy)
        self.devices.labels(resource, "Unhealthy").set(len(devices) - healthy)
