"""Each 950 chip's `levelList` (issue 25 part A): the node's facts, then levels/rank_levels.py per chip.

The reference computes the lists in `getNpuBaseInfo` and copies them into both `baseDeviceInfos`
and the `ascend-npu-configuration` devices; ours builds them once per inventory (levels/level_source.py
caches them) and renders them in node_labels and allocation/annotations.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from ascend_common.chip_traits import traits
from ascend_common.gojson import GoJSON
from ascend_common.products import card_type
from ascend_common.superpod import SuperPod

from ascend_device_plugin.levels.rank_levels import NodeFacts, RankLevel, TopoEdge, level_list, render_level_list
from ascend_device_plugin.model.chip_pod import ChipInfo

LevelLists = Mapping[int, tuple[RankLevel, ...]]  # by phy id; a chip without levels is absent


def _known(value: int) -> int | None:
    return None if value < 0 else value  # SuperPod's -1: not read


def node_facts(
    chips: Sequence[ChipInfo],
    super_pod: SuperPod,
    main_board_id: int | None,
    internal_ip: str,
    *,
    npu_nics: Mapping[int, Sequence[str]] | None = None,
    nic_addresses: Mapping[str, Sequence[str]] | None = None,
    topo_edges: tuple[TopoEdge, ...] | None = None,
) -> NodeFacts:
    """What ranklevels needs of the node. Raises ValueError for a pod-type node without its super-pod
    id or server index (ranklevels.NodeFacts refuses it: the reference would publish "-1_-1")."""
    first = min(chips, key=lambda c: c.logic_id, default=None)  # the reference reads its first device's board
    return NodeFacts(
        super_pod_id=_known(super_pod.super_pod_id),
        server_index=_known(super_pod.server_index),
        super_pod_type=_known(super_pod.super_pod_type),
        super_pod_size=_known(super_pod.scale_type),
        main_board_id=main_board_id,
        card_type=card_type(first.board_id, main_board_id) if first is not None else None,
        internal_ip=internal_ip,
        topo_edges=topo_edges,
        npu_nics=npu_nics,
        nic_addresses=nic_addresses or {},
    )


def chip_levels(chips: Iterable[ChipInfo], facts: NodeFacts) -> dict[int, tuple[RankLevel, ...]]:
    """phy id -> the chip's levels, for the 950 chips that have any."""
    levels: dict[int, tuple[RankLevel, ...]] = {}
    for chip in chips:
        if not traits(chip.family).rank_levels:
            continue
        found = tuple(level_list(facts, chip.phy_id, chip.urma))
        if found:
            levels[chip.phy_id] = found
    return levels


def rendered(levels: LevelLists, phy_id: int) -> list[GoJSON] | None:
    """The chip's `levelList` value, None when it has none (the key is omitempty)."""
    found = levels.get(phy_id)
    return render_level_list(found) if found else None
