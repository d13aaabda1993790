"""Allocate and GetPreferredAllocation: the kubelet's request -> what the container gets.

Paths (contract sections 3-5): plain (the kubelet's ids), Volcano (the devices Volcano wrote
on the oldest pending pod, which is marked taken), soft share (softshare.py: Volcano's chip with a
quota file and two mounts), static vNPU, dynamic vNPU (`npu-core`: the vNPU the pod's annotation
names is created through the exporter) and 310P sharing. Reads
come from the pod cache. The Volcano path writes the pod twice: marked taken inside the call
(the kubelet's admission waits for it, as in the reference), then the allocation report once the
kubelet has its answer; the other paths write only the report, after the answer.

This class validates a request and sends it down its path: the plain one here (what each container
gets: containers.py; its report: plain.py), Volcano's (volcano/volcano_path.py), the dynamic vNPU's (vnpu.py);
every path's report goes out through report.py.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Container
from dataclasses import dataclass

from ascend_common.adapters.kubelet import deviceplugin_pb2 as pb
from ascend_common.naming import NPU_CORE

from ascend_device_plugin.allocation.containers import Containers, alloc_devices, invalid
from ascend_device_plugin.allocation.plain import PlainReport
from ascend_device_plugin.allocation.report import Report, physical
from ascend_device_plugin.allocation.response import validate_request
from ascend_device_plugin.inventory.views import ViewBoard
from ascend_device_plugin.placement.preferred import preferred_allocation
from ascend_device_plugin.placement.topology import affinity_groups, device_groups
from ascend_device_plugin.softshare.softshare_path import SoftSharePath
from ascend_device_plugin.vnpu.dynamic import DynamicVnpu
from ascend_device_plugin.volcano.pods import VolcanoPods
from ascend_device_plugin.volcano.volcano_path import VolcanoPath

log = logging.getLogger(__name__)

MAX_DEVICES_PER_CONTAINER = 128
MAX_CONTAINERS = 64


@dataclass
class Allocator:
    board: ViewBoard
    containers: Containers
    report: Report
    plain: PlainReport
    pods: VolcanoPods
    vnpu: DynamicVnpu
    volcano: VolcanoPath | None = None  # --volcano-type
    preset_vnpu: bool = True  # --preset-virtual-device
    slow_node: Callable[[], Awaitable[dict[str, str]]] | None = None  # the slow-node notice's envs
    soft_share: SoftSharePath | None = None  # --soft-share-dev-config-dir with --share-dev-count 100

    # ---- GetPreferredAllocation --------------------------------------------------------------

    def preferred_available(self, resource: str) -> bool:
        return resource == physical(self.containers.resources)

    def preferred(self, resource: str, request: pb.PreferredAllocationRequest) -> pb.PreferredAllocationResponse:
        groups = affinity_groups(self.containers.resources.inventory.chips.values())
        responses = []
        for creq in request.container_requests:
            available = list(creq.available_deviceIDs)
            try:
                ids = preferred_allocation(
                    available, list(creq.must_include_deviceIDs), creq.allocation_size,
                    device_groups(available, groups),
                )  # fmt: skip
            except ValueError as exc:
                raise invalid(str(exc)) from None
            responses.append(pb.ContainerPreferredAllocationResponse(deviceIDs=ids))
        return pb.PreferredAllocationResponse(container_responses=responses)

    # ---- Allocate ----------------------------------------------------------------------------

    def _validate(self, resource: str, request: pb.AllocateRequest) -> list[list[str]]:
        view = self.board.get(resource)
        if view is None:
            raise invalid(f"resource {resource} has no devices")
        known = {d.id for d in view.devices}
        if not request.container_requests:
            raise invalid("the request has no container")
        if len(request.container_requests) > MAX_CONTAINERS:
            raise invalid(f"the request has more than {MAX_CONTAINERS} containers")
        containers = []
        for i, creq in enumerate(request.container_requests):
            ids = list(creq.devices_ids)
            try:
                validate_request(ids, known, MAX_DEVICES_PER_CONTAINER)
            except ValueError as exc:
                raise invalid(f"container {i}: {exc}") from None
            containers.append(ids)
        return containers

    async def allocate(self, resource: str, request: pb.AllocateRequest) -> pb.AllocateResponse:
        # --enable-slow-node: every container gets the step-time notice. Read first, so that nothing is
        # awaited between the allocation and its answer (the report follows the answer: Report.after_answer).
        envs = await self.slow_node() if self.slow_node is not None else {}
        response = await self._allocate(resource, request)
        for container in response.container_responses:
            container.envs.update(envs)
        return response

    async def _allocate(self, resource: str, request: pb.AllocateRequest) -> pb.AllocateResponse:
        containers = self._validate(resource, request)
        if resource == NPU_CORE:
            return await self.vnpu.allocate(containers)
        # Under preset vNPU, a request for every chip of the node is served by the kubelet's ids (the
        # reference's Allocate: there is only one way to give them all).
        resources = self.containers.resources
        if self.soft_share is not None and resource == physical(resources):
            # Soft-share ids are anonymous quota units: neither the Volcano path (it matches a pod by the
            # count of its chips) nor the plain one (it would hand out chip <phy> of each id) serves them.
            return await self.soft_share.allocate(resource, containers)
        whole_node = self.preset_vnpu and sum(map(len, containers)) == len(resources.inventory.chips)
        if self.volcano is not None and resource == physical(resources) and not whole_node:
            return await self.volcano.allocate(resource, containers)
        self.containers.take(i for ids in containers for i in ids)
        responses = [self.containers.response(alloc_devices(ids)) for ids in containers]
        self.plain.after(resource, containers)
        return pb.AllocateResponse(container_responses=responses)

    def forget(self, present: Container[str]) -> None:
        """Drop what we remember of pods that are gone (`present`: the uids still there)."""
        self.pods.forget(present)

    async def collect_vnpus(self, grace_s: float) -> list[str]:
        """Dynamic mode: destroy the vNPUs no pending or running pod holds (DynamicVnpu.collect)."""
        return await self.vnpu.collect(grace_s)

    async def sweep_vnpus(self, period: float) -> None:
        """Dynamic mode, every `period` s: collect_vnpus, with twice the period's grace."""
        while True:
            await asyncio.sleep(period)
            try:
                await self.collect_vnpus(grace_s=2 * period)
            except Exception:  # keep sweeping; one bad round must not end the loop
                log.exception("vNPU sweep failed")

    async def stop(self, flush_s: float = 5.0) -> None:
        """Let the pending pod patches finish (bounded), then cancel what is left."""
        await self.report.stop(flush_s)
