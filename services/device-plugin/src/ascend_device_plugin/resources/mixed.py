"""310P mixed insert (the reference's `-use310PMixedInsert`): one resource per card product.

Reference: pkg/device/ascend310p.go `GetNPUs`, ascendcommon.go `assemble310PMixedPhyDevices`,
pkg/common/device.go `CheckCardUsageMode`, pkg/common/proto.go `Get310PProductType`, main.go
`checkUse310PMixedInsertWithVolcano` / `checkUse310PMixedInsertWithShareDevCount`.

A node that mixes Atlas 300V Pro, 300V and 300I Pro cards advertises each chip under its card's
product, `huawei.com/Ascend310P-VPro|-V|-IPro`, as `<resource>-<phyID>`, and nothing under
`huawei.com/Ascend310P`; the kubelet then counts each product apart, so a pod asks for the card it
was built for. The mode has no vNPU, no sharing and no Volcano path.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import NamedTuple

from ascend_common.naming import MIXED_310P_RESOURCES, mixed_device_id

from ascend_device_plugin.model.chip_pod import ChipInfo
from ascend_device_plugin.model.ordering import natural_key
from ascend_device_plugin.resources.devices import DeviceEntry

MIXED_FLAG = "--use-310p-mixed-insert"
SUPPORTED = "Atlas 300V Pro, Atlas 300V, Atlas 300I Pro"  # the reference's api.Ascend310PMix, by product


def check_flags(mixed: bool, *, volcano_type: bool, share_count: int, preset_virtual_device: bool = True) -> str | None:
    """The reference's start checks on the flags (main.go): mixed insert refuses Volcano and sharing.
    And dynamic vNPUs, which the reference rules out by needing Volcano for them
    (`checkPresetAndVolcanoRelation`); ours does not need Volcano there, so it is said outright."""
    if not mixed:
        return None
    if volcano_type:
        return f"{MIXED_FLAG} is set: --volcano-type must be false"
    if share_count > 1:
        return f"{MIXED_FLAG} is set: --share-dev-count must be 1"
    if not preset_virtual_device:
        return f"{MIXED_FLAG} is set: --preset-virtual-device must be true (the mode has no vNPUs)"
    return None


def card_usage_refusal(mixed: bool, product_types: Iterable[str | None]) -> str | None:
    """`CheckCardUsageMode`: with mixed insert on, every product the node reports must be one of the
    three 310P cards, and at least one must be reported; the reason to refuse, or None.

    `product_types` are the chips' (None: unreadable, skipped, as the reference skips a card whose
    product it cannot read).
    """
    if not mixed:
        return None
    known = sorted({p for p in product_types if p is not None})
    if not known:
        return f"{MIXED_FLAG}: no chip reported its product type; only {SUPPORTED} cards can be mixed"
    others = [p for p in known if p not in MIXED_310P_RESOURCES]
    if others:
        return f"{MIXED_FLAG}: only {SUPPORTED} cards can be mixed, this node has {', '.join(others)}"
    return None


class MixedDevices(NamedTuple):
    by_resource: dict[str, list[DeviceEntry]]  # resource type (e.g. "Ascend310P-V") -> its devices
    skipped: list[str]  # chips not advertised: their product is unread or not a mixed-insert card


def mixed_devices(chips: Iterable[ChipInfo]) -> MixedDevices:
    """Each chip under its product's resource (`assemble310PMixedPhyDevices`); a chip whose product is
    unread or unknown is left out (the reference logs it and goes on)."""
    by_resource: dict[str, list[DeviceEntry]] = {}
    skipped: list[str] = []
    for chip in chips:
        resource = MIXED_310P_RESOURCES.get(chip.product_type) if chip.product_type is not None else None
        if resource is None:
            skipped.append(chip.name)
            continue
        entry = DeviceEntry(mixed_device_id(resource, chip.phy_id), chip.healthy, chip.numa_node)
        by_resource.setdefault(resource, []).append(entry)
    for entries in by_resource.values():
        entries.sort(key=lambda d: natural_key(d.id))
    return MixedDevices(by_resource, sorted(skipped, key=natural_key))
