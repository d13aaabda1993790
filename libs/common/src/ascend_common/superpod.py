"""The node's super pod, from what its chips report (DCMI super-pod info, main board id).

Shared by the plugin (node labels and annotations, the rank configuration) and the fault-manager
(the device-info ConfigMap's SuperPodID / ServerIndex), so both say the same of the node.
Reference: pkg/server/manager.go `getSuperPodInfo` (the first device that answers), devmanager
`SetValidMainBoardInfo`. A 950 node reports its rack, super-pod type and size as well
(`setSuperPodInfo`); the product rules built on them are in ascend_common.products.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Final

from ascend_common.schemas.exporter import ChipStatic
from ascend_common.schemas.reading import Reading

INVALID_MAIN_BOARD_ID: Final = 0xFFFFFFFF


@dataclass(frozen=True, kw_only=True)
class SuperPod:
    """What the chips report of their super pod (the reference's SuperPodInfo).

    -1 means not in a super pod or not read, as every consumer of these values expects.
    """

    super_pod_id: int = -1
    server_index: int = -1
    rack_id: int = -1  # A5 only
    super_pod_type: int = -1  # A5 only: 0 server, 1 1D pod, 2 2D pod, 3/4 16P/32P server, 5/6 1P/4P card
    scale_type: int = -1  # A5 only: the super pod's size


NO_SUPER_POD: Final = SuperPod()


def super_pod(statics: Iterable[ChipStatic]) -> SuperPod:
    """The node's super pod: what the first chip (in the order given) that answered reports; a node
    where no chip answered has NO_SUPER_POD. Rack, type and size are the same chip's, where it
    reports them (950 chips only)."""
    for s in statics:
        pod_id, index = s.super_pod_id.value, s.server_index.value
        if s.super_pod_id.is_ok and s.server_index.is_ok and pod_id is not None and index is not None:
            return SuperPod(
                super_pod_id=_go_int32(pod_id),
                server_index=_go_int32(index),
                rack_id=_int32_or_unset(s.rack_id),
                super_pod_type=_int32_or_unset(s.super_pod_type),
                scale_type=_int32_or_unset(s.scale_type),
            )
    return NO_SUPER_POD


def super_device_id(static: ChipStatic) -> int | None:
    """The chip's SDID as the reference keeps it, None when it has none (written as 0): what the
    chip reported, whatever its rack id. `getSuperPodInfo` means to skip a 950 answer whose rack id
    is negative, but tests `int(RackId) < 0` on a uint32, which never holds on 64-bit Go: a rack
    id of 0xFFFFFFFF (the library's "none") keeps the SDID, and so do we (the SDID is the chip's
    own reading; the rack says nothing of it)."""
    if not static.super_device_id.is_ok:
        return None
    return static.super_device_id.value


def _int32_or_unset(reading: Reading[int]) -> int:
    return _go_int32(reading.value) if reading.is_ok and reading.value is not None else -1


def _go_int32(value: int) -> int:
    """The reference keeps the library's uint32 ids as int32: an id with bit 31 set goes negative,
    which every consumer then reads as "no super pod"."""
    value &= 0xFFFFFFFF
    return value - (1 << 32) if value >= 1 << 31 else value


def main_board_id(statics: Iterable[ChipStatic]) -> int | None:
    """The first valid main board id, in the order given."""
    for s in statics:
        if s.main_board_id.is_ok and s.main_board_id.value != INVALID_MAIN_BOARD_ID:
            return s.main_board_id.value
    return None
