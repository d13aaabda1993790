"""One chip's entries of the device-info `-Fault` list and its UpgradeFaultReason, as the reference writes them.

Pure: the engine's verdict and code reports, the chip's active reasons and the policy in; the
`FaultEntry` / `UpgradeReason` values deviceinfo renders out.

Reference (MindCluster, component/ascend-device-plugin):
- pkg/device/ascendcommon.go `getDeviceFaults`: a CardNetworkUnhealthy entry when the chip has
  network codes or an unhealthy network, then a CardUnhealthy entry when it has chip codes or is
  Unhealthy for the kubelet. `getDeviceFaultsWithMode`: the entry's codes are the current codes of
  its mode followed by the codes of that mode's upgrade reasons, duplicates dropped; its level is
  `GetFaultType` / `GetNetworkFaultType` of those codes, which adds every escalation of the mode.
- `getFaultTimeAndLevelMap`: each current code at its first-seen time with `GetFaultType([code])`
  (so a chip-wide escalation raises every code of the mode), then each reason code at its upgrade
  time and level, overriding.
- pkg/common/fault_code.go `GetUpgradeFaultLevelAndTime`: a reason whose code is not hex (the
  literal `AutofillFaultCode`) is skipped; a network code's reason belongs to the network entry.
- `FormatFaultCodeHex`: codes as the policy spells them (leading zeros kept), upper-cased in
  `-Fault`, lower-case in UpgradeFaultReason.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from ascend_common.faults import FaultLevel, most_serious, normalize_code
from ascend_common.schemas.verdict import ChipVerdict

from fault_manager.deviceinfo.configmap import (
    CARD_NETWORK_UNHEALTHY,
    CARD_UNHEALTHY,
    FaultEntry,
    FaultType,
    UpgradeReason,
)
from fault_manager.policy.engine import AUTOFILL_CODE, UPGRADE_AUTOFILL, CodeReport


@dataclass(frozen=True)
class Reason:
    """An active UpgradeFaultReason of the chip."""

    code: str  # normalize_code() form, or AUTOFILL_CODE
    level: FaultLevel
    upgrade_type: str
    at_ms: int


Spell = Callable[[str], str]
"""A code as the policy spells it, lower-case (`format_code_hex` bound to the policy)."""
TableLevel = Callable[[str, bool], FaultLevel]
"""The level the tables give a code that is not present now (network or chip mode)."""


def _hex(code: str) -> str | None:
    try:
        return normalize_code(code)
    except ValueError:
        return None


def fault_entries(
    verdict: ChipVerdict,
    codes: Sequence[CodeReport],
    reasons: Sequence[Reason],
    *,
    is_network: Callable[[str], bool],
    table_level: TableLevel,
    spell: Spell,
) -> tuple[FaultEntry, ...]:
    """The chip's `-Fault` entries: the network one first, then the chip one."""
    entries: list[FaultEntry] = []
    modes: tuple[tuple[FaultType, bool, bool], ...] = (
        (CARD_NETWORK_UNHEALTHY, True, not verdict.network_healthy),
        (CARD_UNHEALTHY, False, not verdict.schedulable),
    )
    for fault_type, network, unhealthy in modes:
        current = [c for c in codes if c.network == network]
        if not current and not unhealthy:
            continue
        mode_reasons = [(code, r) for r in reasons if (code := _hex(r.code)) and is_network(code) == network]
        # One level per code (a Go map there): the most serious reason's, written last.
        mode_reasons.sort(key=lambda item: (item[1].level.rank, item[1].at_ms))
        escalated = [r.level for _code, r in mode_reasons]
        listed: list[str] = []
        for code in [c.code for c in current] + sorted(code for code, _r in mode_reasons):
            if code not in listed:
                listed.append(code)
        present = {c.code for c in current}
        by_code = [c.level for c in current] + [table_level(code, network) for code in listed if code not in present]
        level = most_serious(by_code + escalated)
        time_and_level: dict[str, tuple[int, str]] = {}
        for c in current:
            time_and_level[spell(c.code).upper()] = (c.first_seen_ms, most_serious([c.level, *escalated]).value)
        for code, r in mode_reasons:
            time_and_level[spell(code).upper()] = (r.at_ms, r.level.value)
        entries.append(
            FaultEntry(
                fault_type,
                verdict.chip,
                level.value,
                tuple(spell(code).upper() for code in listed),
                time_and_level,
            )
        )
    return tuple(entries)


def upgrade_reasons(reasons: Sequence[Reason], spell: Spell) -> list[UpgradeReason]:
    """UpgradeFaultReason entries: codes lower-case as the policy spells them; AUTOFILL_CODE as is."""
    return [
        UpgradeReason(r.at_ms, spell(hex_code) if (hex_code := _hex(r.code)) else r.code, r.level.value, r.upgrade_type)
        for r in reasons
    ]


def fix_manually_separate_reasons(
    reasons: Mapping[str, Sequence[Reason]], separated: Sequence[str], now_ms: int
) -> tuple[dict[str, list[Reason]], list[str]]:
    """The reference's `FixManuallySeparateReason`, run at start: a separated chip with no reason at
    ManuallySeparateNPU gets a FaultAutofill one made now; a chip that is not separated loses its
    reasons at that level (and is dropped when none is left). Returns the reasons and the chips
    given one, in `separated` order."""
    fixed = {chip: list(chip_reasons) for chip, chip_reasons in reasons.items()}
    autofilled: list[str] = []
    for chip in separated:
        held = fixed.setdefault(chip, [])
        if not any(r.level is FaultLevel.MANUALLY_SEPARATE_NPU for r in held):
            held.append(Reason(AUTOFILL_CODE, FaultLevel.MANUALLY_SEPARATE_NPU, UPGRADE_AUTOFILL, now_ms))
            autofilled.append(chip)
    for chip in [c for c in fixed if c not in set(separated)]:
        fixed[chip] = [r for r in fixed[chip] if r.level is not FaultLevel.MANUALLY_SEPARATE_NPU]
        if not fixed[chip]:
            del fixed[chip]
    return fixed, autofilled
