"""The rack topology file for the RAS network-fault diagnosis (a 950 super pod only).

Reference: pkg/topology/rack_topology.go `RasTopoWriteTask`, `checkConfigReady`,
`GetTopoFileAndWrite`; topo.go `ToFile`; ascend-common slownet `GetSuperPodInfoFilePath`,
`GetRackTopologyFilePath`. ascend-faultdiag-online's netfault (`get_cur_superpodinfo.go`) reads
`<root>/cluster/super-pod-<id>/rack-<rack>/topo_<server index>.json`: the HCCL topology file of
the node's super-pod type, copied there once the diagnosis has made `super-pod-<id>/`.

The decision (`ras_target`, `needs_write`) is pure; `RasTopologyWriter` is the small I/O shell,
its file work in a thread (it runs beside Allocate on the event loop).
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from ascend_common.adapters.hostfs import HostDir, UnsafePath
from ascend_common.jsonin import loads_bounded
from ascend_common.products import HCCL_TOPO_FILES, ProductType
from ascend_common.superpod import SuperPod

log = logging.getLogger(__name__)

REFRESH_S: Final = 30.0  # the reference's TopologyRefreshTime
NET_FAULT_SUB_PATH: Final = "cluster"  # slownet's netFaultSubPath
# topoFilePathMap: the server and pod types only; a card (1P / 4P) publishes no rack topology.
RAS_PRODUCT_TYPES: Final = frozenset(
    {ProductType.SERVER, ProductType.POD_1D, ProductType.POD_2D, ProductType.SERVER_16P, ProductType.SERVER_32P}
)
MAX_TOPO_BYTES: Final = 50 * 1024 * 1024  # the reference's size50M read limit
FILE_MODE: Final = 0o644  # defaultPerm
RACK_DIR_MODE: Final = 0o755  # rackDirPerm


@dataclass(frozen=True)
class RasTarget:
    super_pod_dir: Path  # must exist: the diagnosis makes it, we never do
    rack_dir: Path  # made when missing
    file: Path
    source: Path  # the node type's HCCL topology file


def ras_target(root: Path, pod: SuperPod, source_root: Path = Path("/")) -> RasTarget | None:
    """Where the node's rack topology goes and what it copies, or None when there is nothing to write:
    a node outside a super pod (an unread or negative id) or of a type without a rack topology.

    The reference formats whatever ids it read at its start (an unread one as `super-pod--2`); a
    node outside a super pod has no diagnosis directory to find, so ours does not look for one."""
    if pod.super_pod_id < 0 or pod.rack_id < 0 or pod.server_index < 0:
        return None
    if pod.super_pod_type not in RAS_PRODUCT_TYPES:
        return None
    source = source_root / HCCL_TOPO_FILES[pod.super_pod_type].lstrip("/")
    super_pod_dir = root / NET_FAULT_SUB_PATH / f"super-pod-{pod.super_pod_id}"
    rack_dir = super_pod_dir / f"rack-{pod.rack_id}"
    return RasTarget(super_pod_dir, rack_dir, rack_dir / f"topo_{pod.server_index}.json", source)


def needs_write(new: bytes, current: bytes | None) -> bool:
    """Whether the target must be (re)written: it is missing or its sha256 differs (`ToFile`)."""
    return current is None or hashlib.sha256(new).digest() != hashlib.sha256(current).digest()


def sync_once(target: RasTarget) -> bool:
    """One round of file work (blocking): copy the source to the target when the super-pod directory
    exists and the content differs. True when it wrote. OSError / ValueError say what failed;
    UnsafePath (an OSError) when a directory below the configured root or the target is a symlink:
    the diagnosis shares the tree, and root must never write or chmod through a link planted there."""
    root = target.super_pod_dir.parents[1]  # `<root>/cluster/super-pod-<id>`: the operator's root
    try:
        with HostDir.root(root) as top:
            super_pod = top.walk(target.super_pod_dir.relative_to(root).as_posix())
    except (FileNotFoundError, NotADirectoryError):
        return False  # the diagnosis has not made it (yet)
    with super_pod:
        with target.source.open("rb") as f:
            new = f.read(MAX_TOPO_BYTES + 1)
        if len(new) > MAX_TOPO_BYTES:
            raise ValueError(f"{target.source} is larger than {MAX_TOPO_BYTES} bytes")
        # The reference refuses a source that is not JSON (json.Valid); a deep one is refused too.
        loads_bounded(new, what=str(target.source), max_bytes=MAX_TOPO_BYTES)
        with super_pod.sub(target.rack_dir.name, create_mode=RACK_DIR_MODE, set_mode=True) as rack:
            try:
                current: bytes | None = rack.read(target.file.name, MAX_TOPO_BYTES)
            except FileNotFoundError:
                current = None
            if not needs_write(new, current):
                return False
            # Written beside and renamed: the diagnosis never reads a half-written file.
            rack.write_atomically(target.file.name, new, FILE_MODE, fsync=False)
    return True


@dataclass
class RasTopologyWriter:
    """Every REFRESH_S, the node's current super pod (`pod`: the plugin's inventory) decides the
    target, and the file is copied when due. A failed round is logged and retried next round."""

    root: Path
    pod: Callable[[], SuperPod]
    source_root: Path = Path("/")
    period_s: float = REFRESH_S

    async def round(self) -> bool:
        target = ras_target(self.root, self.pod(), self.source_root)
        if target is None:
            return False
        try:
            wrote = await asyncio.to_thread(sync_once, target)
        except UnsafePath as exc:
            log.error(
                "RAS rack topology not written: a symlink below the RAS root",
                extra={"file": str(target.file), "path": exc.filename, "error": str(exc)},
            )
            return False
        except (OSError, ValueError) as exc:
            log.error(
                "RAS rack topology not written",
                extra={"file": str(target.file), "source": str(target.source), "error": str(exc)},
            )
            return False
        if wrote:
            log.info("RAS rack topology written", extra={"file": str(target.file), "source": str(target.source)})
        return wrote

    async def run(self) -> None:
        while True:
            await self.round()
            await asyncio.sleep(self.period_s)
