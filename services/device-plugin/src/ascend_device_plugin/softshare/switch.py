"""Soft share (Volcano's `chip1softsharedev`): the switch and the device ids, as the reference.

Pure rules only; the settings check the switch's flags (settings.py) and the resource manager
applies `ids_per_chip` to every chip (resources/devices.py). The reference's rules:

- `common.ShareDev`: `shareDevCount` > 1 copies a chip only on the 310P and 310B; on any other
  family each chip stays one device id.
- `common.IsSupportSoftShareDevice`: soft share is on iff `shareDevCount` is 100 and
  `softShareDevConfigDir` is set; then `addSoftShareDev` offers each chip as 100 ids
  `<name>-<phy>-0..99` with the chip's health and NUMA node.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from ascend_common.chip_traits import families_with
from ascend_common.chips import ChipFamily

SOFT_SHARE_COUNT = 100  # the reference's api.SoftShareDeviceCount (= common.MaxShareDevCount)
# The families `common.ShareDev` copies a chip on (the 310P/310B sharing).
SHARE_FAMILIES: frozenset[ChipFamily] = families_with(lambda row: row.share_dev)


def soft_share_on(share_count: int, config_dir: Path | None) -> bool:
    """`common.IsSupportSoftShareDevice`: `-shareDevCount=100` and `-softShareDevConfigDir` set."""
    return share_count == SOFT_SHARE_COUNT and config_dir is not None


def ids_per_chip(family: ChipFamily, share_count: int, soft_share: bool) -> int:
    """How many device ids one whole chip of `family` is advertised as.

    The 310P/310B sharing copies it `share_count` times (`common.ShareDev`); soft share gives any
    other family 100 ids (`addSoftShareDev`); otherwise a chip is one id, whatever the count (the
    reference ignores the count there, and so do we, with a warning: `ignored_share_count`).
    """
    if family in SHARE_FAMILIES:
        return share_count
    return SOFT_SHARE_COUNT if soft_share else 1


def ignored_share_count(families: Iterable[ChipFamily], share_count: int, soft_share: bool) -> str | None:
    """The warning for a `--share-dev-count` > 1 that gives these chips one id each; None otherwise."""
    if share_count <= 1 or soft_share:
        return None
    ignored = sorted({f.value for f in families if f not in SHARE_FAMILIES})
    if not ignored:
        return None
    return (
        f"--share-dev-count {share_count} copies only 310P/310B chips; {', '.join(ignored)} chips are "
        f"advertised once each (soft share needs --share-dev-count {SOFT_SHARE_COUNT} and "
        "--soft-share-dev-config-dir)"
    )


def soft_share_refusal(families: Iterable[ChipFamily], soft_share: bool) -> str | None:
    """Why soft share cannot run on these chips, or None.

    The reference lets the 310P/310B sharing and soft share both expand a chip (100 x 100 ids per
    chip, its bug 6); the plugin refuses to start instead.
    """
    if not soft_share:
        return None
    refused = sorted({f.value for f in families if f in SHARE_FAMILIES})
    if not refused:
        return None
    return f"soft share (--soft-share-dev-config-dir) is not supported on {', '.join(refused)} chips"


def check_switch(
    share_count: int, config_dir: Path | None, *, volcano_type: bool, preset_virtual_device: bool
) -> str | None:
    """The reference's start checks on the flags alone (main.go `checkPresetWithShareDevCount`,
    `checkSoftShareDevConfigDir` without its disk check, `checkSoftShareDevParam`): the reason
    to refuse, or None."""
    if not preset_virtual_device and share_count > 1:
        return "--preset-virtual-device false needs --share-dev-count 1"
    if config_dir is None:
        return None
    if share_count != SOFT_SHARE_COUNT:
        return f"--share-dev-count must be {SOFT_SHARE_COUNT} when --soft-share-dev-config-dir is set"
    if not config_dir.is_absolute():
        return f"--soft-share-dev-config-dir {str(config_dir)!r} is not an absolute path"
    if not volcano_type:
        return "soft share (--soft-share-dev-config-dir) needs --volcano-type"
    return None
