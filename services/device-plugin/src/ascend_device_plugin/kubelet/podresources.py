"""The kubelet's PodResources API: which pod got a set of device ids (plain path), and what every
container holds (the container metrics)."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path

import grpc
from ascend_common.adapters.kubelet import podresources_pb2 as pr
from ascend_common.adapters.kubelet import podresources_pb2_grpc as pr_grpc
from grpc import aio

from ascend_device_plugin.container_metrics.families import ContainerDevices

log = logging.getLogger(__name__)


async def find_pod(
    socket: Path, resource_name: str, device_ids: set[str], within: float = 30.0, first_interval: float = 0.05
) -> tuple[str, str] | None:
    """(namespace, name) of the pod whose container holds exactly these ids, or None.

    The kubelet records an allocation only after Allocate returns, and a loaded kubelet may take
    seconds to list it: ask again, backing off from `first_interval` to 1 s, for up to `within`
    seconds. The channel is per call: the kubelet re-creates its socket when it restarts, and the
    directory (not the socket) is what we mount.
    """
    deadline = asyncio.get_running_loop().time() + within
    interval = first_interval
    while True:
        try:
            async with aio.insecure_channel(f"unix://{socket}") as channel:
                reply = await pr_grpc.PodResourcesListerStub(channel).List(pr.ListPodResourcesRequest(), timeout=2.0)
        except grpc.aio.AioRpcError as exc:
            log.debug("PodResources List failed", extra={"error": exc.details()})
        else:
            for pod in reply.pod_resources:
                for container in pod.containers:
                    for devices in container.devices:
                        if devices.resource_name == resource_name and set(devices.device_ids) == device_ids:
                            return pod.namespace, pod.name
        if asyncio.get_running_loop().time() + interval > deadline:
            return None
        await asyncio.sleep(interval)
        interval = min(interval * 2, 1.0)


async def list_container_devices(socket: Path, deadline_s: float) -> list[ContainerDevices]:
    """Every container's devices, as one PodResources `List` answers them (one call, `deadline_s` s).

    Raises grpc.aio.AioRpcError when the kubelet is away or does not answer in time.
    """
    async with aio.insecure_channel(f"unix://{socket}") as channel:
        reply = await pr_grpc.PodResourcesListerStub(channel).List(pr.ListPodResourcesRequest(), timeout=deadline_s)
    return [
        ContainerDevices(pod.namespace, pod.name, container.name, devices.resource_name, tuple(devices.device_ids))
        for pod in reply.pod_resources
        for container in pod.containers
        for devices in container.devices
    ]
