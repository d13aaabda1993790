"""The node's rank levels (`levelList`), built once per inventory and what feeds them.

The pure rules are levels/level_lists and ascend_device_plugin.levels.rank_levels; this gathers their inputs: the
inventory (chips, super pod, main board), the exporter's NodeInfo (the npu-nic mapping and the
NICs' addresses), the Node's InternalIP and, on an Atlas 350 card, the HCCL topology file's edges
(read in a thread, as the reference reads it at most until one read succeeds).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from pathlib import Path

from ascend_common.adapters.inputs import read_bounded
from ascend_common.products import card_type, hccl_topo_file, product_type
from ascend_common.schemas.exporter import NodeInfo

from ascend_device_plugin.inventory.snapshot import Inventory
from ascend_device_plugin.levels.hccl_topo import MAX_TOPO_BYTES, topo_edges
from ascend_device_plugin.levels.level_lists import LevelLists, chip_levels, node_facts
from ascend_device_plugin.levels.rank_levels import TopoEdge

log = logging.getLogger(__name__)

_NO_LEVELS: LevelLists = {}


def _read_edges(path: Path) -> tuple[TopoEdge, ...]:
    return topo_edges(read_bounded(path, max_bytes=MAX_TOPO_BYTES))


class LevelSource:
    """`levels(inventory)`: each 950 chip's rank levels by phy id, recomputed only when an input changed."""

    def __init__(
        self,
        node_name: str,
        node_info: Callable[[], NodeInfo | None],
        internal_ip: Callable[[], str],
        *,
        source_root: Path = Path("/"),
    ) -> None:
        self._node_name = node_name
        self._node_info = node_info
        self._internal_ip = internal_ip
        self._root = source_root
        self._edges: tuple[TopoEdge, ...] | None = None
        self._edges_path: Path | None = None  # the file `_edges` came from
        self._edges_failed: Path | None = None  # the file whose failure was logged (once)
        self._inventory: Inventory | None = None  # what `_levels` was built from, with `_key`
        self._key: tuple[object, ...] | None = None
        self._levels: LevelLists = _NO_LEVELS
        self._refused = False  # the node's facts were refused: logged once until they are accepted

    def _topology_path(self, inventory: Inventory) -> Path | None:
        """The topology file of an Atlas 350 card node (only its level 0 reads edges)."""
        first = min(inventory.chips.values(), key=lambda c: c.logic_id, default=None)
        card = card_type(first.board_id, inventory.main_board_id) if first is not None else None
        if card is None:
            return None
        name = hccl_topo_file(product_type(card, None))
        return self._root / name.lstrip("/") if name is not None else None

    async def load_topology(self, inventory: Inventory) -> None:
        """Read the card's topology file if not read yet; unreadable: no edges (one log per file)."""
        path = self._topology_path(inventory)
        if path is None or path == self._edges_path:
            return
        try:
            self._edges = await asyncio.to_thread(_read_edges, path)
        except (OSError, ValueError) as exc:
            self._edges = None
            if self._edges_failed != path:
                self._edges_failed = path
                log.error(
                    "topology file unreadable: no level-0 rank addresses",
                    extra={"node": self._node_name, "path": str(path), "error": str(exc)},
                )
            return
        self._edges_path = path

    def levels(self, inventory: Inventory) -> LevelLists:
        info = self._node_info()
        npu_nics = info.npu_nics if info is not None else None
        nic_addresses = info.nic_addresses if info is not None else None
        ip = self._internal_ip()
        key = (npu_nics, nic_addresses, ip, self._edges)
        if inventory is self._inventory and key == self._key:
            return self._levels
        chips = list(inventory.chips.values())
        try:
            facts = node_facts(
                chips, inventory.super_pod, inventory.main_board_id, ip,
                npu_nics=npu_nics, nic_addresses=nic_addresses, topo_edges=self._edges,
            )  # fmt: skip
            levels: LevelLists = chip_levels(chips, facts)
        except ValueError as exc:
            # A pod node without its super-pod id, or a NIC address that is no IP: publishing no
            # list is better than a wrong one, and the node's other annotations still go out.
            if not self._refused:
                self._refused = True
                log.error("no levelList for the node's chips", extra={"node": self._node_name, "error": str(exc)})
            levels = _NO_LEVELS
        else:
            self._refused = False
        self._inventory, self._key, self._levels = inventory, key, levels
        return levels
