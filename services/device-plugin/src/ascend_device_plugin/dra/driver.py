"""NodePrepareResources / NodeUnprepareResources: claims in, CDI specs and the checkpoint out.

The rules are dra.claims'; this is their shell: it reads the claim from the apiserver, the
chips from the resource manager, and writes through `state` (in a thread: file I/O and fsync have
no place on the event loop). Calls are serialized: the kubelet sends one batch per pod, and two
batches that raced over the checkpoint could lose a claim.

A bad claim gets its own error and writes nothing; the other claims of the batch go on.

A claim's chips are reserved in the chip table (allocation.chip_owners, shared with the device plugin's
Allocate under `--kubelet-api both`) before its CDI spec is written, and released if the Prepare
fails or when the claim is unprepared: a chip goes to one claim, or to one container.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from ascend_device_plugin.allocation.chip_owners import ChipOwners, ChipTaken
from ascend_device_plugin.allocation.containers import HOST_DEV_NODES
from ascend_device_plugin.allocation.response import UB_DEVICE_DIRS, hccl_topo_path
from ascend_device_plugin.dra.claims import (
    ClaimDevice,
    ClaimError,
    cdi_device_id,
    cdi_spec,
    cdi_spec_name,
    claim_devices,
)
from ascend_device_plugin.dra.health_reports import PreparedChip
from ascend_device_plugin.dra.slice_devices import chip_name, device_name
from ascend_device_plugin.dra.state import CdiSpecs, Checkpoint, PreparedClaims, PreparedDevice
from ascend_device_plugin.inventory.snapshot import InventorySource

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ClaimRef:
    """A claim as the kubelet names it (the proto's Claim)."""

    namespace: str
    name: str
    uid: str

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


class ClaimLookupError(Exception):
    """The claim could not be read (no cluster, not found, apiserver down)."""


class ClaimReader(Protocol):
    async def read_claim(self, namespace: str, name: str) -> Mapping[str, Any]: ...


@dataclass(frozen=True)
class Outcome:
    """One claim's answer: its devices, or why it failed."""

    devices: tuple[PreparedDevice, ...] = ()
    error: str = ""


def _host_files(dev_root: Path) -> tuple[frozenset[str], list[str]]:
    """The shared driver nodes the host has, and every UB device file (as Containers finds them)."""
    nodes = frozenset(p for p in HOST_DEV_NODES if (dev_root / p.lstrip("/")).exists())
    ub: list[str] = []
    for directory in UB_DEVICE_DIRS:
        try:
            names = sorted(p.name for p in (dev_root / directory.lstrip("/")).iterdir() if not p.is_dir())
        except OSError:
            continue
        ub.extend(f"{directory}/{name}" for name in names)
    return nodes, ub


class DraDriver:
    def __init__(
        self,
        node: str,
        resources: InventorySource,
        claims: ClaimReader,
        state_dir: Path,
        cdi_root: Path,
        *,
        dev_root: Path = Path("/"),
        on_change: Callable[[], None] = lambda: None,
        owners: ChipOwners | None = None,
    ) -> None:
        self.node = node
        self.resources = resources
        self.claims = claims
        self.checkpoint = Checkpoint(state_dir)
        self.specs = CdiSpecs(cdi_root)
        self.dev_root = dev_root
        self._listeners = [on_change]  # told when the set of prepared or reserved chips changed
        # Who holds each chip: with `--kubelet-api both` the table the device plugin's Allocate takes
        # chips through too; else the driver's own (a chip still goes to one claim).
        self.owners = owners if owners is not None else ChipOwners()
        self._prepared: PreparedClaims = {}
        self._lock = asyncio.Lock()

    async def load(self) -> None:
        """Read the checkpoint (CheckpointError when it is corrupt: the service must not start)."""
        self._prepared = await asyncio.to_thread(self.checkpoint.load)
        log.info("dra checkpoint loaded", extra={"claims": len(self._prepared), "path": str(self.checkpoint.path)})
        for uid, devices in self._prepared.items():
            try:
                self.owners.reserve(uid, [chip_name(d.deviceName) for d in devices], time.monotonic())
            except ChipTaken as exc:  # the containers of both exist already: nothing to refuse any more
                log.error("dra: a checkpointed claim's chips are held elsewhere", extra={"uid": uid, "error": str(exc)})
        # A spec without its checkpoint entry was written by a Prepare that did not finish (the
        # process died before the checkpoint); nothing refers to it, and a retry writes it again.
        ours = {cdi_spec_name(uid) for uid in self._prepared}
        for name in await asyncio.to_thread(self.specs.names, cdi_spec_name("")):
            if name not in ours:
                await asyncio.to_thread(self.specs.remove, name)
                log.warning("dra: removed a CDI spec no prepared claim owns", extra={"spec": name})
        self._changed()

    def watch(self, callback: Callable[[], None]) -> None:
        """Also tell `callback` when the set of prepared chips changes."""
        self._listeners.append(callback)

    def _changed(self) -> None:
        for callback in self._listeners:
            callback()

    def prepared_chips(self) -> list[PreparedChip]:
        """Every device of a prepared claim, with the chip behind it (None: no such chip any more)."""
        chips = self._chips_by_name()
        return [PreparedChip(d.poolName, d.deviceName, chips.get(d.deviceName))
                for devices in self._prepared.values() for d in devices]  # fmt: skip

    def prepared_devices(self) -> frozenset[str]:
        """The chips (by the device plugin's ids) held by claims, prepared or being prepared (the other
        API must not hand them out)."""
        return self.owners.claims()

    # ---- the calls ---------------------------------------------------------------------------

    async def prepare(self, claims: Sequence[ClaimRef]) -> dict[str, Outcome]:
        async with self._lock:
            return {claim.uid: await self._prepare_one(claim) for claim in claims}

    async def unprepare(self, claims: Sequence[ClaimRef]) -> dict[str, Outcome]:
        async with self._lock:
            return {claim.uid: await self._unprepare_one(claim) for claim in claims}

    async def _prepare_one(self, ref: ClaimRef) -> Outcome:
        known = self._prepared.get(ref.uid)
        if known is not None:
            # Prepared before (a kubelet retry, or a restart of either side): the same answer, and the
            # spec again if it went missing; never a second entry.
            if not await asyncio.to_thread(self.specs.exists, cdi_spec_name(ref.uid)):
                try:
                    devices = self._from_names(ref, known)
                    await self._write_spec(ref, devices)
                except (ClaimError, OSError, ValueError) as exc:
                    return self._failed("prepare", ref, str(exc))
            return Outcome(tuple(known))
        try:
            claim = await self.claims.read_claim(ref.namespace, ref.name)
        except ClaimLookupError as exc:
            return self._failed("prepare", ref, f"claim {ref.key}: {exc}")
        try:
            devices = claim_devices(claim, uid=ref.uid, node=self.node, chips=self._chips_by_name())
            self._reserve(ref, devices)
        except (ClaimError, ValueError) as exc:
            return self._failed("prepare", ref, str(exc))
        self._changed()
        try:
            await self._write_spec(ref, devices)
        except (ClaimError, ValueError) as exc:
            return self._released(ref, str(exc))
        except OSError as exc:
            return self._released(ref, f"claim {ref.key}: writing its CDI spec failed: {exc}")
        prepared = [PreparedDevice([d.request], self.node, d.device, [cdi_device_id(d.phy_id)]) for d in devices]
        claims = {**self._prepared, ref.uid: prepared}
        try:
            await asyncio.to_thread(self.checkpoint.save, claims)
        except OSError as exc:
            await asyncio.to_thread(self.specs.remove, cdi_spec_name(ref.uid))
            return self._released(ref, f"claim {ref.key}: saving the checkpoint failed: {exc}")
        self._prepared = claims
        log.info("dra claim prepared", extra={"claim": ref.key, "uid": ref.uid, "devices": [d.device for d in devices]})
        self._changed()
        return Outcome(tuple(prepared))

    async def _unprepare_one(self, ref: ClaimRef) -> Outcome:
        try:
            await asyncio.to_thread(self.specs.remove, cdi_spec_name(ref.uid))
            changed = ref.uid in self._prepared
            if changed:
                claims = {uid: d for uid, d in self._prepared.items() if uid != ref.uid}
                await asyncio.to_thread(self.checkpoint.save, claims)
                self._prepared = claims
            if self.owners.release(ref.uid) or changed:
                self._changed()
        except OSError as exc:
            return self._failed("unprepare", ref, f"claim {ref.key}: {exc}")
        log.info("dra claim unprepared", extra={"claim": ref.key, "uid": ref.uid})
        return Outcome()

    # ---- helpers -----------------------------------------------------------------------------

    def _failed(self, what: str, ref: ClaimRef, error: str) -> Outcome:
        log.warning(f"dra {what} refused", extra={"claim": ref.key, "uid": ref.uid, "error": error})
        return Outcome(error=error)

    def _released(self, ref: ClaimRef, error: str) -> Outcome:
        self.owners.release(ref.uid)
        self._changed()
        return self._failed("prepare", ref, error)

    def _reserve(self, ref: ClaimRef, devices: Sequence[ClaimDevice]) -> None:
        """No chip goes to two consumers: not one the device plugin handed out, not one another claim holds."""
        try:
            self.owners.reserve(ref.uid, [chip_name(d.device) for d in devices], time.monotonic())
        except ChipTaken as exc:
            taken = ", ".join(device_name(chip) for chip in exc.chips)
            if exc.claim is None:
                raise ClaimError(f"claim {ref.key}: {taken} is allocated through the device plugin") from None
            raise ClaimError(f"claim {ref.key}: {taken} is prepared for claim uid {exc.claim}") from None

    def _chips_by_name(self) -> dict[str, int]:
        return {device_name(chip.name): phy for phy, chip in self.resources.inventory.chips.items()}

    def _from_names(self, ref: ClaimRef, prepared: Sequence[PreparedDevice]) -> list[ClaimDevice]:
        chips = self._chips_by_name()
        missing = [d.deviceName for d in prepared if d.deviceName not in chips]
        if missing:
            raise ClaimError(f"claim {ref.key}: its prepared devices {missing} are no chips of this node any more")
        return [ClaimDevice(d.requestNames[0] if d.requestNames else "", d.deviceName, chips[d.deviceName])
                for d in prepared]  # fmt: skip

    async def _write_spec(self, ref: ClaimRef, devices: Sequence[ClaimDevice]) -> None:
        inventory = self.resources.inventory
        if not inventory.chips:
            raise ClaimError(f"claim {ref.key}: no chip inventory yet")
        first = min(inventory.chips.values(), key=lambda c: c.logic_id)
        family = first.family
        nodes, ub = await asyncio.to_thread(_host_files, self.dev_root)
        spec = cdi_spec(
            devices, family=family, logic_by_phy={phy: c.logic_id for phy, c in inventory.chips.items()},
            host_dev_nodes=nodes, ub_devices=ub,
            hccl_topo=hccl_topo_path(family, first.board_id, inventory.main_board_id, first.super_pod_type),
        )  # fmt: skip
        await asyncio.to_thread(self.specs.write, cdi_spec_name(ref.uid), spec)
