"""What the DRA driver tells the kubelet of its prepared devices' health (dra-health/v1alpha1).

Pure. The kubelet shows it per device of a pod's claims in
`status.containerStatuses[].allocatedResourcesStatus`. A chip's health is the one the plugin
decided for ListAndWatch and the ResourceSlice (the exporter's view and the fault-manager's
verdicts, resources/health.py), with that decision's reason as the message; while the exporter
is lost (its grace period over) nobody knows the chip's state, and the kubelet is told so
(Unknown) rather than a guess. Only devices of prepared claims are reported: the kubelet looks
health up for those alone, by driver, pool and device name.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Final

from ascend_device_plugin.model.chip_pod import ChipHealth

# The kubelet truncates longer messages (v1.ResourceHealthMessageMaxLength) to 1021 characters and "...".
MAX_MESSAGE: Final = 1024
EXPORTER_LOST: Final = "the exporter is unreachable: the chip's state is not known"
NOT_REPORTED: Final = "the exporter does not report this chip"


class DeviceHealth(StrEnum):
    HEALTHY = "Healthy"
    UNHEALTHY = "Unhealthy"
    UNKNOWN = "Unknown"


@dataclass(frozen=True)
class PreparedChip:
    """A device of a prepared claim: its pool, its name, and the chip (phy id) behind it if known."""

    pool: str
    device: str
    phy_id: int | None


@dataclass(frozen=True)
class DeviceReport:
    pool: str
    device: str
    health: DeviceHealth
    message: str


def device_health(chip: ChipHealth | None, *, exporter_lost: bool) -> tuple[DeviceHealth, str]:
    """One chip's health for the kubelet, and the message it shows."""
    if exporter_lost:
        return DeviceHealth.UNKNOWN, EXPORTER_LOST
    if chip is None:
        return DeviceHealth.UNKNOWN, NOT_REPORTED
    health = DeviceHealth.HEALTHY if chip.healthy else DeviceHealth.UNHEALTHY
    return health, chip.reason[:MAX_MESSAGE]


def device_reports(
    devices: Iterable[PreparedChip], chips: Mapping[int, ChipHealth], *, exporter_lost: bool
) -> tuple[DeviceReport, ...]:
    """The complete list the kubelet is sent: each prepared device once, in a stable order."""
    out: dict[tuple[str, str], DeviceReport] = {}
    for d in devices:
        chip = chips.get(d.phy_id) if d.phy_id is not None else None
        health, message = device_health(chip, exporter_lost=exporter_lost)
        out[(d.pool, d.device)] = DeviceReport(d.pool, d.device, health, message)
    return tuple(out[key] for key in sorted(out))
