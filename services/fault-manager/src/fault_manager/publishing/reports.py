"""What the device-info ConfigMap says, from the published node state (pure).

The chips' reports (`-Fault` entries, health, in use, recovering), ManuallySeparateNPU and
UpgradeFaultReason come from the evaluations, not the store: a reason goes out in the same
write as the verdict it explains. Whether a chip pods hold is kept off the free list is
`kept_from_free_list`, the soft-share quota rule.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ascend_common.faults import is_network_code
from ascend_common.softshare import MAX_AICORE_QUOTA
from ascend_common.superpod import SuperPod

from fault_manager.deviceinfo.configmap import (
    ChipReport,
    SwitchReport,
    UnwatchedSwitch,
    UpgradeReason,
    published_rack_id,
    render_device_info,
)
from fault_manager.deviceinfo.faultlist import Reason, fault_entries, upgrade_reasons
from fault_manager.reactor.chips_in_use import NO_QUOTA, PodUse
from fault_manager.reactor.published import NodeState


def kept_from_free_list(chip: str, pods: PodUse, hbm_mb: int) -> bool:
    """Whether the pods holding `chip` keep it off the free list (DeviceInfoCfg `huawei.com/<type>`).

    A pod holding it whole does. Soft-share pods alone do once their quotas fill it: Σaicore
    reaches 100 or ΣHBM the HBM size of the node's first chip (reference `filterSoftShareDevices`,
    with `updateQuota`'s sums); while the HBM size is unknown (0) they always do, as there. The
    reference frees a chip under the quotas even when a whole-chip pod holds it too (its rule
    looks at the sums alone); ours keeps that chip used, as the pod has all of it.
    """
    if chip in pods.whole:
        return True
    if chip not in pods.shared:
        return False
    if hbm_mb <= 0:
        return True
    used = pods.quotas.get(chip, NO_QUOTA)
    return used.aicore >= MAX_AICORE_QUOTA or used.hbm_mb >= hbm_mb


@dataclass(frozen=True)
class DeviceInfo:
    """The rendering inputs; equal values render equal ConfigMaps (but for the update time)."""

    rtype: str = field(compare=False)  # known before the first write, and never changes after it
    reports: tuple[ChipReport, ...]
    manual: tuple[str, ...]
    upgrade: tuple[tuple[str, tuple[UpgradeReason, ...]], ...]
    switch: SwitchReport | UnwatchedSwitch | None
    super_pod: SuperPod

    def render(self, update_time_s: int) -> dict[str, str]:
        pod = self.super_pod
        return render_device_info(
            self.rtype, self.reports, update_time_s=update_time_s, manually_separated=self.manual,
            upgrade_reasons=dict(self.upgrade), switch=self.switch, super_pod_id=pod.super_pod_id,
            server_index=pod.server_index, rack_id=published_rack_id(self.rtype, pod.super_pod_type, pod.rack_id),
        )  # fmt: skip


def device_info(state: NodeState) -> DeviceInfo:
    policy = state.policy
    reports: list[ChipReport] = []
    manual: list[str] = []
    upgrade: list[tuple[str, tuple[UpgradeReason, ...]]] = []
    for chip in state.chips:
        ev = chip.evaluation
        reasons = [Reason(e.code, e.level, e.upgrade_type, e.at_ms) for e in ev.escalations]
        if chip.manual:
            manual.append(chip.name)
        faults = fault_entries(
            ev.verdict, ev.codes, reasons, is_network=is_network_code, table_level=policy.table_level,
            spell=policy.spell,
        )  # fmt: skip
        reports.append(
            ChipReport(
                chip.name,
                healthy=ev.verdict.schedulable,
                in_use=kept_from_free_list(chip.name, state.pods, state.hbm_mb),
                network_unhealthy=not ev.verdict.network_healthy,
                recovering=ev.verdict.resetting,
                faults=tuple(faults),
            )
        )
        if reasons:
            upgrade.append((chip.name, tuple(upgrade_reasons(reasons, policy.spell))))
    return DeviceInfo(state.rtype, tuple(reports), tuple(manual), tuple(sorted(upgrade)), state.switch, state.super_pod)
