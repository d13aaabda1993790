"""HBM / AI-core fault association (reference fault_code.go `HbmFaultManager`, `newFaultInfosForHBMErr`).

An HBM multi-bit ECC error (80E01801) makes the AI cores that read the bad memory report a bus
error too (80C98009 AI core, 80CB8009 AI vector). Those are its echo, not a second fault: the
reference holds every AI-core bus event of a chip for `AssociatedFaultDiagnosisTime` (5 s), drops
one raised less than 5 s from an 80E01801 occurrence of the same chip, and reports the others
once they are 5 s old. It does so only while the policy has a FaultDuration rule for 80E01801
(`faultDurationMap[HbmDoubleBitFaultCodeStr]`), which the packaged faultCustomization.json has not.

Why here, in the fault-manager, and not in the exporter's event pipeline: the switch is the
policy, which only the fault-manager holds (the exporter knows no FaultDuration); the exporter
keeps reporting what the chip said, and the store keeps every raw event for audit and history,
so a drop is a decision of the policy that `fault-manager replay` and a restart can make again.

Pure state with explicit time, no I/O: the reactor feeds rows in the order they arrived
(`admit`), asks for what fell due on its timer (`due`, `wake_at_ms`), and a restart replays the
stored rows in arrival order (`replay`) to the same outcome.

Two choices of ours where the reference's single "last 80E01801 time" slot works only because its
events arrive live: an AI-core event is held 5 s from when it *arrived* (its raised time when
that is later), so a replay of an exporter's run from its start (old raised times, in batches)
still meets the 80E01801 that follows it; and a chip keeps its last few 80E01801 times, not
one, so a replayed batch holding two of them an hour apart drops the echo of the first.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

from ascend_common.faults.codes import AI_CORE_BUS_CODES, HBM_DOUBLE_BIT_CODE

from fault_manager.store import FaultEventRow

WINDOW_MS = 5_000  # AssociatedFaultDiagnosisTime (5 s)
HBM_TIMES_KEPT = 16  # per chip; more 80E01801 occurrences within one replayed batch are not met in practice


@dataclass(frozen=True)
class _Held:
    row: FaultEventRow
    release_at_ms: int  # reported once now passes this, unless an 80E01801 drops it first


@dataclass
class Outcome:
    """What an `admit` or a `due` decided: rows to apply now (in order), rows dropped."""

    apply: list[FaultEventRow] = field(default_factory=list)
    dropped: list[FaultEventRow] = field(default_factory=list)

    def extend(self, other: Outcome) -> None:
        self.apply.extend(other.apply)
        self.dropped.extend(other.dropped)


class HbmAssociation:
    def __init__(self) -> None:
        self._hbm_ms: dict[str, deque[int]] = {}  # per chip: raised times of its last 80E01801 occurrences
        self._held: dict[str, list[_Held]] = {}  # per chip: AI-core bus events, oldest raised first

    @property
    def held(self) -> list[FaultEventRow]:
        return [h.row for chip in sorted(self._held) for h in self._held[chip]]

    def wake_at_ms(self) -> int | None:
        """When the next held event falls due (ms since the epoch); None when none is held."""
        times = [h.release_at_ms + 1 for queue in self._held.values() for h in queue]
        return min(times, default=None)

    def admit(self, rows: list[FaultEventRow], now_ms: int) -> Outcome:
        """A batch of rows in arrival order at `now_ms`: the rows to apply now, the ones dropped.

        As `newFaultInfosForHBMErr`: first what fell due before this batch (a timer that fired on
        time), then the batch's 80E01801 occurrences are noted and its AI-core bus events held,
        every other row passes in order, and the held events of the batch's chips are sorted out.
        """
        out = self.due(now_ms)
        touched: list[str] = []
        for row in rows:
            touched.append(row.chip)
            if row.code == HBM_DOUBLE_BIT_CODE and row.assertion != "recover":
                self._hbm_ms.setdefault(row.chip, deque(maxlen=HBM_TIMES_KEPT)).append(row.raised_at_ms)
            if row.code in AI_CORE_BUS_CODES:
                # Recoveries too, as the reference queues every assertion: a recovery of a dropped
                # echo would otherwise end a code the chip never showed.
                queue = self._held.setdefault(row.chip, [])
                queue.append(_Held(row, max(row.raised_at_ms, row.recorded_at_ms) + WINDOW_MS))
                queue.sort(key=lambda h: h.row.raised_at_ms)  # DevFaultInfoBasedTimeAscend
                continue
            out.apply.append(row)
        for chip in dict.fromkeys(touched):
            out.extend(self._sort_out(chip, now_ms))
        return out

    def due(self, now_ms: int) -> Outcome:
        """The held events of every chip sorted out at `now_ms` (the reactor's timer)."""
        out = Outcome()
        for chip in sorted(self._held):
            out.extend(self._sort_out(chip, now_ms))
        return out

    def release_all(self) -> Outcome:
        """Everything held, to apply now: the policy no longer associates (its 80E01801 rule is gone)."""
        out = Outcome(apply=self.held)
        self._held.clear()
        return out

    def _sort_out(self, chip: str, now_ms: int) -> Outcome:
        """`aicFaultEventOutQue`: drop what an 80E01801 explains, report what is old enough, hold the rest."""
        out = Outcome()
        kept: list[_Held] = []
        hbm = self._hbm_ms.get(chip, ())
        for held in self._held.get(chip, []):
            if any(abs(h - held.row.raised_at_ms) < WINDOW_MS for h in hbm):
                out.dropped.append(held.row)
            elif now_ms > held.release_at_ms:
                out.apply.append(held.row)
            else:
                kept.append(held)
        if kept:
            self._held[chip] = kept
        else:
            self._held.pop(chip, None)
        return out


def replay(association: HbmAssociation, rows: list[FaultEventRow], now_ms: int) -> Outcome:
    """Stored rows, in arrival order (recorded time, then id), decided again as when they arrived;
    then what fell due by `now_ms`. `association` keeps what is still within its 5 s. Chips are
    independent: replaying them one after the other into one association is the same as together."""
    out = Outcome()
    for row in rows:
        out.extend(association.admit([row], row.recorded_at_ms))
    out.extend(association.due(now_ms))
    return out
