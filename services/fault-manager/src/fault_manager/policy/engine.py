"""The fault policy over time: every chip's code timelines -> its level, reasons and verdict.

Pure state plus explicit time: the service feeds events (`apply`) and asks for an
`evaluate(chip, now)`; tests drive time by hand. Policy windows run on "policy time" =
real seconds x time scale, so a drill can pass minutes of policy in seconds; stored
times stay real. The rules themselves (code levels, FaultDuration, FaultFrequency, the
scheduling rule) are the pure functions of libs/common.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Protocol

from ascend_common.faults import (
    TICK,
    CodeEvent,
    FaultCodeTable,
    FaultCustomization,
    FaultLevel,
    SwitchFaultTable,
    code_level,
    duration_state,
    format_code_hex,
    frequency_state,
    is_network_code,
    most_serious,
    network_level,
    normalize_code,
    occurrences,
    presence,
    schedulable,
)
from ascend_common.faults import (
    network_healthy as level_network_healthy,
)
from ascend_common.faults.policy import supports_grace_tolerance
from ascend_common.schemas.verdict import ChipVerdict, VerdictReason

UPGRADE_DURATION = "FaultDuration"
UPGRADE_FREQUENCY = "FaultFrequency"
UPGRADE_AUTOFILL = "FaultAutofill"
AUTOFILL_CODE = "AutofillFaultCode"
"""The code of a reason made up for an isolation found without one (reference upgradefault.go)."""
BY_RULE = "FaultFrequency"  # who isolated a chip (manual_audit) when a frequency rule did
BY_RELEASE = "ReleaseTimeWindow"  # who lifted a rule's isolation when its release window passed
BY_ADOPTION = "adopted"  # the isolation was in the device-info ConfigMap when we found the node


@dataclass(frozen=True)
class Policy:
    table: FaultCodeTable
    customization: FaultCustomization
    switch: SwitchFaultTable

    def spell(self, code: str) -> str:
        """`code` as the policy spells it, lower-case (reference FormatFaultCodeHex)."""
        return format_code_hex(code, self.table.spellings, self.customization.spellings)

    def table_level(self, code: str, network: bool) -> FaultLevel:
        """What the tables alone say of `code` in one mode (unknown severity)."""
        return network_level(self.table, code) if network else code_level(self.table, code, None)


@dataclass(frozen=True)
class CodeReport:
    """One code of a chip as the ConfigMap's `-Fault` entry lists it."""

    code: str
    level: FaultLevel
    first_seen_ms: int
    network: bool


@dataclass(frozen=True)
class Escalation:
    """An UpgradeFaultReason: a rule (not the code table) raised the chip's level."""

    code: str
    level: FaultLevel
    upgrade_type: str  # FaultDuration | FaultFrequency | FaultAutofill
    at_ms: int


class StoredReason(Protocol):
    """An UpgradeFaultReason as the store keeps it (store.EscalationRow)."""

    @property
    def code(self) -> str: ...
    @property
    def level(self) -> str: ...
    @property
    def upgrade_type(self) -> str: ...
    @property
    def upgrade_time_ms(self) -> int: ...


def stored_escalation(row: StoredReason) -> Escalation:
    return Escalation(row.code, FaultLevel(row.level), row.upgrade_type, row.upgrade_time_ms)


@dataclass(frozen=True)
class AdoptedReason:
    """An UpgradeFaultReason found in the device-info ConfigMap on a first start (no history of ours
    explains it): it holds until its own rule lets it go. `at` is policy time."""

    code: str
    upgrade_type: str  # FaultDuration | FaultFrequency
    at: float


@dataclass(frozen=True)
class Evaluation:
    verdict: ChipVerdict
    codes: tuple[CodeReport, ...]
    escalations: tuple[Escalation, ...]
    isolate: bool  # a FaultFrequency rule with ManuallySeparateNPU holds: the chip is in ManuallySeparateNPU
    wake_at: float | None  # real time at which this evaluation changes with no new event
    released: bool = False  # this evaluation ended the chip's rule-made isolation (ReleaseTimeWindow)


@dataclass
class ChipFaults:
    name: str
    logic_id: int
    phy_id: int
    timelines: dict[str, list[CodeEvent]] = field(default_factory=dict)  # policy time
    first_seen: dict[str, float] = field(default_factory=dict)  # real time the current presence began
    severity: dict[str, int | None] = field(default_factory=dict)
    present: set[str] = field(default_factory=set)
    manual: bool = False  # in ManuallySeparateNPU (by an administrator or a frequency rule)
    manual_by_rule: bool = False  # ... by a frequency rule, so that rule's ReleaseTimeWindow lifts it
    released_at: float | None = None  # policy time an administrator last released the chip
    autofill_since: float | None = None  # policy time a FaultAutofill reason was made for the isolation
    adopted: list[AdoptedReason] = field(default_factory=list)  # reasons taken over from the ConfigMap
    reachable: bool = True  # the exporter reads the chip
    resetting: bool = False
    since: float = 0.0  # real time the current level began
    last_level: FaultLevel = FaultLevel.NORMAL_NPU


class FaultEngine:
    def __init__(
        self, policy: Policy, time_scale: float = 1.0, history_s: float | None = None, *, hot_reset: bool = False
    ) -> None:
        self.scale = time_scale
        self.hot_reset = hot_reset  # with a chip's family, its GraceToleranceOn (supports_grace_tolerance)
        self.chips: dict[str, ChipFaults] = {}
        self._history_s = history_s
        self.set_policy(policy)

    def set_policy(self, policy: Policy) -> None:
        """Adopt a new policy; timelines stay, so the next evaluation applies the new rules to them."""
        self.policy = policy
        # How much policy time a timeline keeps: the longest window any rule looks back over.
        c = policy.customization
        windows = [r.time_window_s for r in c.frequencies] + [r.release_time_window_s for r in c.frequencies]
        windows += [r.fault_timeout_s + r.recover_timeout_s for r in c.durations]
        self.keep_s = self._history_s if self._history_s is not None else float(max(windows, default=0) + 60)

    def policy_time(self, real: float) -> float:
        return real * self.scale

    def real_time(self, policy: float) -> float:
        return policy / self.scale

    def chip(self, name: str, logic_id: int, phy_id: int) -> ChipFaults:
        """The chip's state, created on first sight; ids < 0 mean "not known yet" (restored from history)."""
        chip = self.chips.get(name)
        if chip is None:
            chip = self.chips[name] = ChipFaults(name, logic_id, phy_id)
        elif logic_id >= 0:
            chip.logic_id, chip.phy_id = logic_id, phy_id
        return chip

    def apply(self, name: str, code: str, kind: str, severity: int | None, at: float) -> None:
        """One event of one code (occur / recover / once) at real time `at`."""
        chip = self.chips[name]
        code = normalize_code(code)
        timeline = self.timelines_of(chip, code)
        timeline.append(CodeEvent(self.policy_time(at), kind))  # type: ignore[arg-type]
        if kind == "occur":
            if code not in chip.present:
                chip.first_seen[code] = at
            chip.present.add(code)
            chip.severity[code] = severity
        elif kind == "recover":
            chip.present.discard(code)
        elif kind == "once":
            chip.severity[code] = severity
        self._trim(timeline, self.policy_time(at))

    def timelines_of(self, chip: ChipFaults, code: str) -> list[CodeEvent]:
        return chip.timelines.setdefault(code, [])

    def _trim(self, timeline: list[CodeEvent], now_p: float) -> None:
        # Of the events before the horizon keep only the one that began the state in force there:
        # the occur that started the presence, or the recover that ended it. A `once` carries no
        # state (keeping one in place of the occur made a present code look gone), and a repeated
        # occur would move the presence's start.
        horizon = now_p - self.keep_s
        old = 0
        while old < len(timeline) and timeline[old].at < horizon:
            old += 1
        begin: int | None = None
        present = False
        for index, event in enumerate(timeline[:old]):
            if event.kind == "occur" and not present:
                present, begin = True, index
            elif event.kind == "recover" and (present or begin is None):
                present, begin = False, index
        if old > 1 or (old == 1 and begin is None):
            timeline[:old] = [] if begin is None else [timeline[begin]]

    def release(self, name: str, at: float) -> None:
        """An administrator removed the chip from ManuallySeparateNPU: its frequency windows restart."""
        chip = self.chips[name]
        chip.manual = chip.manual_by_rule = False
        chip.released_at = self.policy_time(at)
        chip.autofill_since = None

    def autofill(self, name: str, at: float) -> None:
        """The chip was found in ManuallySeparateNPU at start with no reason for it: a FaultAutofill
        reason (reference `FixManuallySeparateReason`) now holds the isolation, and the longest
        ReleaseTimeWindow after `at` (real time it was made) it ends, and with it a rule-made isolation."""
        self.chips[name].autofill_since = self.policy_time(at)

    def adopt(self, name: str, reasons: Iterable[Escalation]) -> None:
        """The chip was in ManuallySeparateNPU when we found the node (a first start: no history of ours),
        with these UpgradeFaultReason entries. A FaultDuration or FaultFrequency reason holds while its
        code's current rule would keep it (`_adopted`); a FaultAutofill one follows the autofill rule.
        An isolation a ManuallySeparateNPU reason holds ends with its last such reason; one without is
        an administrator's (only an administrator lifts it)."""
        chip = self.chips[name]
        chip.manual = True
        chip.manual_by_rule = False
        for reason in reasons:
            if reason.upgrade_type == UPGRADE_AUTOFILL:
                chip.autofill_since = self.policy_time(reason.at_ms / 1000)
                chip.manual_by_rule = True
            elif reason.upgrade_type in (UPGRADE_DURATION, UPGRADE_FREQUENCY):
                at = self.policy_time(reason.at_ms / 1000)
                chip.adopted.append(AdoptedReason(normalize_code(reason.code), reason.upgrade_type, at))
                chip.manual_by_rule = chip.manual_by_rule or reason.level is FaultLevel.MANUALLY_SEPARATE_NPU

    def _adopted(
        self, chip: ChipFaults, pnow: float, own: set[tuple[str, str]]
    ) -> tuple[list[Escalation], float | None]:
        """The adopted reasons that still hold, at their current rule's level (as the reference's
        `CheckAndUpdateExistingUpgradeFaults`: no rule, no reason), and when the next one ends.
        A FaultDuration reason holds while its code is present (the reference drops it on recovery);
        a FaultFrequency one until its ReleaseTimeWindow has passed since the later of its upgrade time
        and the code's last recovery, the code absent (`handleFrequencyFault`). Once one of our own
        rules holds the same reason, the adopted copy is dropped: ours carries it on."""
        custom = self.policy.customization
        kept: list[AdoptedReason] = []
        held: list[Escalation] = []
        ends: list[float] = []
        for reason in chip.adopted:
            if (reason.code, reason.upgrade_type) in own:
                continue
            present = reason.code in chip.present
            if reason.upgrade_type == UPGRADE_DURATION:
                duration = custom.duration_rule(reason.code)
                if duration is None or not present:
                    continue
                level = duration.handling
            else:
                frequency = custom.frequency_rule(reason.code)
                if frequency is None:
                    continue
                level = frequency.handling
                if not present and frequency.release_time_window_s:
                    recovers = [e.at for e in chip.timelines.get(reason.code, []) if e.kind == "recover"]
                    ends_at = max([reason.at, *recovers]) + frequency.release_time_window_s
                    if pnow > ends_at:
                        continue
                    ends.append(ends_at)
            kept.append(reason)
            held.append(Escalation(reason.code, level, reason.upgrade_type, int(self.real_time(reason.at) * 1000)))
        chip.adopted = kept
        return held, min(ends, default=None)

    def isolate(self, name: str) -> None:
        """An operator isolated the chip: only an operator lifts it."""
        chip = self.chips[name]
        chip.manual, chip.manual_by_rule = True, False

    def peek(self, name: str, now: float) -> Evaluation:
        """What `evaluate` would answer now, leaving the chip's state (isolation, release) untouched."""
        kept = self.chips[name]
        self.chips[name] = copy.deepcopy(kept)
        try:
            return self.evaluate(name, now)
        finally:
            self.chips[name] = kept

    def evaluate(self, name: str, now: float, in_use_for_health: bool = False) -> Evaluation:
        """The chip's verdict at real time `now` (reference fault_code.go `GetFaultType` for the chip
        level, `GetNetworkFaultType` for the network level).

        A network code (`NetworkFaultCodes`) and the FaultDuration / FaultFrequency escalations of one
        act on the network level only; every other code, and its escalations, on the chip level. A
        FaultFrequency rule whose handling is ManuallySeparateNPU isolates the chip whatever the code,
        and its ReleaseTimeWindow ends that isolation (`RemoveTimeoutReasonCache` ->
        `DeleteManuallyFaultInfo`); an isolation an operator made stays until an operator lifts it.
        """
        chip = self.chips[name]
        pnow = self.policy_time(now)
        custom = self.policy.customization
        levels: list[FaultLevel] = []
        net_levels: list[FaultLevel] = []
        reports: list[CodeReport] = []
        escalations: list[Escalation] = []
        reasons: set[VerdictReason] = set()
        isolating = False  # a ManuallySeparateNPU frequency escalation holds
        isolation_released = False  # one ended by its ReleaseTimeWindow
        wake: list[float] = []
        for code, events in chip.timelines.items():
            present = code in chip.present
            network = is_network_code(code)
            found: list[FaultLevel] = []
            if present:
                found.append(
                    network_level(self.policy.table, code)
                    if network
                    else code_level(self.policy.table, code, chip.severity.get(code))
                )
                reasons.add(VerdictReason.FAULT_CODE)
            duration = custom.duration_rule(code)
            if duration is not None:
                state = duration_state(duration, events, pnow)
                if state.changes_at is not None:
                    wake.append(state.changes_at + TICK)
                if state.counting:
                    found.append(duration.handling)
                    reasons.add(VerdictReason.FAULT_DURATION)
                    escalations.append(Escalation(code, duration.handling, UPGRADE_DURATION,
                                                  int(self.real_time(state.since or pnow) * 1000)))  # fmt: skip
            frequency = custom.frequency_rule(code)
            if frequency is not None:
                # A code with a FaultDuration rule occurs for FaultFrequency when it times out, and has
                # recovered when it clears (reference handleFaultQueue); others on each occur / recover.
                fstate = frequency_state(
                    frequency,
                    occurrences(events, duration=duration, now=pnow),
                    pnow,
                    chip.released_at,
                    present=presence(events, duration=duration, now=pnow),
                )
                if fstate.releases_at is not None and math.isfinite(fstate.releases_at):
                    wake.append(fstate.releases_at + TICK)
                separating = frequency.handling is FaultLevel.MANUALLY_SEPARATE_NPU
                if fstate.escalated:
                    found.append(frequency.handling)
                    reasons.add(VerdictReason.FAULT_FREQUENCY)
                    at_ms = int(self.real_time(fstate.escalated_at or pnow) * 1000)
                    escalations.append(Escalation(code, frequency.handling, UPGRADE_FREQUENCY, at_ms))
                    isolating = isolating or separating
                elif separating and fstate.released_at is not None:
                    isolation_released = True
            if not found:
                continue
            level = most_serious(found)
            (net_levels if network else levels).append(level)
            reports.append(CodeReport(code, level, int(chip.first_seen.get(code, now) * 1000), network))
        if chip.adopted:
            adopted, ends_at = self._adopted(chip, pnow, {(e.code, e.upgrade_type) for e in escalations})
            for esc in adopted:
                escalations.append(esc)
                (net_levels if is_network_code(esc.code) else levels).append(esc.level)
                reasons.add(VerdictReason.FAULT_FREQUENCY if esc.upgrade_type == UPGRADE_FREQUENCY
                            else VerdictReason.FAULT_DURATION)  # fmt: skip
            if any(e.level is FaultLevel.MANUALLY_SEPARATE_NPU for e in adopted):
                isolating = True
            else:
                isolation_released = True
            if ends_at is not None:
                wake.append(ends_at + TICK)
        if chip.autofill_since is not None:
            window = float(custom.longest_release_window_s())
            if window and pnow > chip.autofill_since + window:
                chip.autofill_since = None
                isolation_released = True
            else:
                escalations.append(Escalation(AUTOFILL_CODE, FaultLevel.MANUALLY_SEPARATE_NPU, UPGRADE_AUTOFILL,
                                              int(self.real_time(chip.autofill_since) * 1000)))  # fmt: skip
                isolating = True
                if window:
                    wake.append(chip.autofill_since + window + TICK)
        released = False
        if isolating and not chip.manual:
            chip.manual = chip.manual_by_rule = True
        elif chip.manual_by_rule and not isolating and isolation_released:
            chip.manual = chip.manual_by_rule = False
            released = True
        if chip.manual:
            levels.append(FaultLevel.MANUALLY_SEPARATE_NPU)
            reasons.add(VerdictReason.MANUAL)
        level = most_serious(levels)
        if level != chip.last_level:
            chip.last_level, chip.since = level, now
        net = most_serious(net_levels)
        grace = supports_grace_tolerance(self.hot_reset, name)
        ok = chip.reachable and not chip.resetting and schedulable(level, in_use_for_health, grace_tolerance_on=grace)
        reason = _main_reason(reasons, chip.reachable, level)
        verdict = ChipVerdict(
            chip=chip.name,
            logic_id=chip.logic_id,
            phy_id=chip.phy_id,
            fault_level=level,
            network_level=net,
            schedulable=ok,
            network_healthy=level_network_healthy(net),
            reason=reason,
            since=chip.since,
            codes=sorted(chip.present),
            resetting=chip.resetting,
            manually_separated=chip.manual,
        )
        future = [w for w in wake if w > pnow]
        return Evaluation(
            verdict,
            tuple(sorted(reports, key=lambda r: r.code)),
            tuple(escalations),
            isolating,
            self.real_time(min(future)) if future else None,
            released,
        )


def _main_reason(reasons: Iterable[VerdictReason], reachable: bool, level: FaultLevel) -> VerdictReason:
    if not reachable:
        return VerdictReason.UNKNOWN
    found = set(reasons)
    for reason in (VerdictReason.MANUAL, VerdictReason.FAULT_FREQUENCY, VerdictReason.FAULT_DURATION):
        if reason in found:
            return reason
    return VerdictReason.FAULT_CODE if level is not FaultLevel.NORMAL_NPU else VerdictReason.NORMAL
