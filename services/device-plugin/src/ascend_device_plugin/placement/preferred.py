"""GetPreferredAllocation: keep a request inside one HCCS ring / card pair / NUMA node.

The reference answers GetPreferredAllocation with "not support" (pkg/server/plugin.go) and
leaves placement to Volcano; on the plain path the kubelet would otherwise pick devices at
random, so we answer with a packing rule:

1. must-include devices are always in the answer;
2. if one group can hold the whole request (enough free devices, and every must-include),
   use the fitting group with the FEWEST free devices (packing keeps big groups whole for big
   requests), ties by group key in natural order;
3. otherwise spill: must-includes first, then fill from the groups with the MOST free devices.
Inside a group devices are taken in natural id order. The answer is in natural order.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from ascend_device_plugin.model.ordering import natural_key, natural_sorted

UNGROUPED = ""  # the group of available ids that group_of does not know


def preferred_allocation(
    available: Sequence[str],
    must_include: Sequence[str],
    size: int,
    group_of: Mapping[str, str],
) -> list[str]:
    avail = list(dict.fromkeys(available))
    must = list(dict.fromkeys(must_include))
    avail_set = set(avail)
    if size <= 0:
        raise ValueError(f"allocation size must be positive, got {size}")
    if size > len(avail):
        raise ValueError(f"allocation size {size} exceeds the {len(avail)} available devices")
    for device in must:
        if device not in avail_set:
            raise ValueError(f"must-include device {device!r} is not available")
    if len(must) > size:
        raise ValueError(f"{len(must)} must-include devices exceed the allocation size {size}")

    members: dict[str, list[str]] = {}
    for device in avail:
        members.setdefault(group_of.get(device, UNGROUPED), []).append(device)
    must_groups = {group_of.get(device, UNGROUPED) for device in must}

    fitting = [g for g, devs in members.items() if len(devs) >= size and must_groups <= {g}]
    if fitting:
        best = min(fitting, key=lambda g: (len(members[g]), natural_key(g)))
        return _fill(must, [members[best]], size)
    spill_order = sorted(members, key=lambda g: (-len(members[g]), natural_key(g)))
    return _fill(must, [members[g] for g in spill_order], size)


def _fill(must: list[str], groups: list[list[str]], size: int) -> list[str]:
    chosen = list(must)
    taken = set(chosen)
    for devices in groups:
        for device in natural_sorted(devices):
            if len(chosen) >= size:
                return natural_sorted(chosen)
            if device not in taken:
                chosen.append(device)
                taken.add(device)
    return natural_sorted(chosen)
