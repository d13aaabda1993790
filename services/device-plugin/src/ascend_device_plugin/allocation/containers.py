"""What one container gets for its devices: the DeviceSpecs and envs of a ContainerAllocateResponse
(allocation.response's rules over the node's inventory and device nodes). Every path ends here."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from ascend_common.adapters.kubelet import deviceplugin_pb2 as pb
from ascend_common.chips import ChipFamily
from ascend_common.naming import parse_device_id

from ascend_device_plugin.allocation.refusals import AllocationError, Refusal
from ascend_device_plugin.allocation.response import (
    UB_DEVICE_DIRS,
    AllocDevice,
    ContainerAlloc,
    container_response,
    hccl_topo_path,
)
from ascend_device_plugin.inventory.snapshot import Resources
from ascend_device_plugin.model.chip_pod import PodView

HOST_DEV_NODES = ("/dev/davinci_manager", "/dev/davinci_manager_docker", "/dev/hisi_hdc", "/dev/devmm_svm",
                  "/dev/dvpp_cmdlist")  # fmt: skip


def invalid(cause: str, pod: PodView | None = None) -> AllocationError:
    return AllocationError(Refusal.INVALID_REQUEST, cause, pod=pod.key if pod is not None else None)


def alloc_devices(ids: Sequence[str], real: Sequence[str] | None = None) -> list[AllocDevice]:
    """The kubelet's ids, each with the chip (and vNPU) of its real device (`real`: by position; default the ids)."""
    out = []
    for kubelet_id, real_id in zip(ids, real or ids, strict=False):
        parsed = parse_device_id(real_id)
        out.append(AllocDevice(kubelet_id, parsed.phy_id, parsed.vdev_id))
    return out


@dataclass
class Containers:
    resources: Resources
    runtime_mode: bool = True  # --use-ascend-docker: the runtime mounts; else device nodes
    dev_root: Path = Path("/")
    # `--kubelet-api both`: takes the chips an Allocate hands out away from the DRA driver before the
    # answer (allocation.chip_owners); raises AllocationError when a claim holds one.
    hold: Callable[[list[str]], None] | None = None

    def take(self, device_ids: Iterable[str]) -> None:
        """Every path, once it knows the real devices it serves and before anything else is done for
        them: their chips (a vNPU's or a shared copy's parent) leave the DRA side, or the whole
        Allocate is refused with nothing taken."""
        if self.hold is not None:
            self.hold(sorted({parse_device_id(i).chip for i in device_ids}))

    def _family(self) -> ChipFamily:
        infos = list(self.resources.inventory.chips.values())
        if not infos:
            raise AllocationError(Refusal.NO_INVENTORY, "no chip inventory yet")
        return infos[0].family

    def _host_dev_nodes(self) -> frozenset[str]:
        return frozenset(p for p in HOST_DEV_NODES if (self.dev_root / p.lstrip("/")).exists())

    def ub_devices(self) -> list[str]:
        """Every file (not directory) under the UB device directories, each directory's in name order
        as os.ReadDir gives them (`addDevicesInDir`); a directory that cannot be read adds none."""
        found: list[str] = []
        for directory in UB_DEVICE_DIRS:
            try:
                entries = sorted(os.scandir(self.dev_root / directory.lstrip("/")), key=lambda e: e.name)
            except OSError:
                continue
            found.extend(f"{directory}/{e.name}" for e in entries if not e.is_dir(follow_symlinks=False))
        return found

    def response(
        self, devices: list[AllocDevice], *, dynamic: bool = False, volcano: bool = False
    ) -> pb.ContainerAllocateResponse:
        inventory = self.resources.inventory
        first = min(inventory.chips.values(), key=lambda c: c.logic_id, default=None)
        family = self._family()
        try:
            alloc: ContainerAlloc = container_response(
                devices, family=family, runtime_mode=self.runtime_mode, dynamic=dynamic,
                # Device nodes are mounted only in direct-mount mode: no stat() of them per call otherwise.
                host_dev_nodes=frozenset() if self.runtime_mode else self._host_dev_nodes(), volcano=volcano,
                logic_by_phy={phy: chip.logic_id for phy, chip in inventory.chips.items()},
                # Logic 0's chip's own reading, as `getProductTypeKey` asks it: its static answer in
                # the exporter's snapshot, so no DCMI call per Allocate (the type is the hardware's).
                hccl_topo=hccl_topo_path(
                    family, first.board_id if first else None, inventory.main_board_id,
                    first.super_pod_type if first else None,
                ),
                ub_devices=() if self.runtime_mode else self.ub_devices(),
            )  # fmt: skip
        except ValueError as exc:
            raise invalid(str(exc)) from None
        return pb.ContainerAllocateResponse(
            envs=alloc.envs,
            devices=[pb.DeviceSpec(container_path=d.container_path, host_path=d.host_path, permissions=d.permissions)
                     for d in alloc.devices],
        )  # fmt: skip
