"""Which chips the node's pods use (contract section 8): read from their allocation annotations.

A chip is in use when a Pending or Running pod names it, or a vNPU on it (maybe with a
`_<vfgID>` suffix), or a shared copy of it, in `huawei.com/AscendReal` or `huawei.com/kltDev`.
Shared by the device-plugin (the running-pod health rule) and the fault-manager (free chips,
reset preconditions).
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping
from typing import Protocol

from ascend_common.naming import NPU_CORE, parse_device_id

ASCEND_REAL = "huawei.com/AscendReal"
KLT_DEV = "huawei.com/kltDev"
PENDING, RUNNING = "Pending", "Running"


class PodLike(Protocol):
    @property
    def phase(self) -> str: ...

    @property
    def annotations(self) -> Mapping[str, str]: ...


@functools.lru_cache(maxsize=8192)
def chips_named(value: str) -> frozenset[str]:
    """Chip names in an AscendReal/kltDev annotation value; cached: every pod change re-reads them all."""
    names: set[str] = set()
    for item in value.split(","):
        item = item.strip()
        if not item or item.startswith(NPU_CORE):
            continue
        try:
            names.add(parse_device_id(item).chip)
        except ValueError:
            continue  # another plugin's or a malformed entry: it names no chip of ours
    return frozenset(names)


def chips_in_use(pods: Iterable[PodLike], phases: tuple[str, ...] = (PENDING, RUNNING)) -> set[str]:
    used: set[str] = set()
    for pod in pods:
        if pod.phase not in phases:
            continue
        for key in (ASCEND_REAL, KLT_DEV):
            if key in pod.annotations:
                used |= chips_named(pod.annotations[key])
    return used
