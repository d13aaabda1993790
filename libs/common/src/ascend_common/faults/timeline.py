"""FaultDuration and FaultFrequency as pure functions of one code's timeline on one chip (contract section 7).

Everything here is a function of the events and "now" (seconds as floats; the caller scales time), so the
fault-manager can rebuild any state from its stored history after a restart, and can schedule a wake-up at
the next instant a state would change on its own (`changes_at`, `releases_at`).

Reference: Huawei MindCluster component/ascend-device-plugin/pkg/common/fault_code.go (`CountFaultDuration`,
`timeoutOrRecoveryAlgorithm`, `handleFaultQueue`, `handleFrequencyFault`, `DelOnceFrequencyFault`). Its
boundaries are kept exactly: a code present for exactly FaultTimeout has not timed out (`duration <=
threshold` continues), gone for exactly RecoverTimeout has not recovered, and an escalation released
ReleaseTimeWindow after the last recovery is still held at that instant (`now - lastRecover > window`).
`changes_at` / `releases_at` are those boundary instants; the state changes strictly after them, so a
caller scheduling a wake-up adds a tick (`TICK`).
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Literal, get_args

from ascend_common.faults.customization import DurationRule, FrequencyRule

EventKind = Literal["occur", "recover", "once"]
_KINDS: frozenset[str] = frozenset(get_args(EventKind))

TICK = 0.001
"""The reference's time unit (ms): the first instant after a boundary at which the new state holds."""

Interval = tuple[float, float | None]
"""`(start, end)` of a span in which a code was present; end None = still present."""


@dataclass(frozen=True)
class CodeEvent:
    """One event of one code on one chip: the DCMI assertion (occur / recover / once) and when it happened.

    A code newly seen by a poll is an "occur", and a polled code gone again a "recover".
    """

    at: float
    kind: EventKind

    def __post_init__(self) -> None:
        # Literal is not checked at run time, and a stray kind would silently be treated as no event.
        if self.kind not in _KINDS:
            raise ValueError(f"event kind must be one of {sorted(_KINDS)}, got {self.kind!r}")
        if not math.isfinite(self.at):
            raise ValueError(f"event time must be finite, got {self.at!r}")


@dataclass(frozen=True)
class DurationState:
    """Where a FaultDuration code stands at "now".

    counting: the code has lasted FaultTimeout and not yet been gone RecoverTimeout; the chip is at the
        rule's FaultHandling level.
    pending: the code is present but still inside its FaultTimeout (reported in `-Fault` at NotHandleFault).
    since: when it started counting (its last occur + FaultTimeout: the reference's FaultAlarmTime), None
        while not counting.
    changes_at: the boundary after which the state changes if no event arrives, None if it never does.
    """

    counting: bool
    pending: bool
    since: float | None
    changes_at: float | None


@dataclass(frozen=True)
class FrequencyState:
    """Where a FaultFrequency code stands at "now".

    escalated: the chip is at the rule's FaultHandling level because of this code.
    escalated_at: when the escalating (Times-th) occurrence landed, None while not escalated.
    count_in_window: occurrences inside the TimeWindow ending at "now" that count toward the next escalation;
        0 while escalated, because an escalation consumes its window (as the reference clears it).
    releases_at: the boundary after which the escalation is released if nothing else happens; None while not
        escalated, for a rule that never releases, or while the code is still present.
    released_at: when the last escalation was released by ReleaseTimeWindow (the boundary it passed), None
        if none was: positive evidence that a rule's isolation has ended.
    """

    escalated: bool
    escalated_at: float | None
    count_in_window: int
    releases_at: float | None
    released_at: float | None = None


# --- FaultDuration ---------------------------------------------------------------------------------


class _DurationRun:
    """The reference's per-chip duration cache (FaultDurationData), replayed event by event. Local only."""

    def __init__(self, rule: DurationRule) -> None:
        self.fault_timeout = float(rule.fault_timeout_s)
        self.recover_timeout = float(rule.recover_timeout_s)
        self.present = False
        self.started: float | None = None  # start of the current presence while it has not counted yet
        self.gone_at: float | None = None  # when a counting code went away
        self.since: float | None = None  # when the current counting span began
        self.spans: list[Interval] = []  # counting spans, (since, cleared or None)

    @property
    def counting(self) -> bool:
        return self.since is not None

    def advance(self, t: float) -> None:
        """Fire the timers due strictly before `t`. At most one can be due: counting needs presence and
        clearing needs absence, and no event changes presence between two calls."""
        if self.present and self.started is not None and self.started + self.fault_timeout < t:
            self.since = self.started + self.fault_timeout
            self.started = None
            self.spans.append((self.since, None))
        elif not self.present and self.gone_at is not None and self.gone_at + self.recover_timeout < t:
            self.spans[-1] = (self.spans[-1][0], self.gone_at + self.recover_timeout)
            self.since = None
            self.gone_at = None

    def occur(self, t: float) -> None:
        # A repeated occur while present changes nothing: the reference merges consecutive events with the
        # same assertion and keeps the first (mergeContinuousElementBasedAssertion).
        if self.present:
            return
        self.present = True
        if self.counting:
            self.gone_at = None  # back inside RecoverTimeout: the fault continues
        else:
            self.started = t

    def recover(self, t: float) -> None:
        if not self.present:
            return
        self.present = False
        if self.counting:
            self.gone_at = t
        else:
            self.started = None  # gone within FaultTimeout: it never counts

    def apply(self, event: CodeEvent) -> None:
        self.advance(event.at)
        if event.kind == "occur":
            self.occur(event.at)
        elif event.kind == "recover":
            self.recover(event.at)
        elif not self.present:
            # A "once" event is a fault present for an instant: it never outlasts a FaultTimeout (the
            # reference's pair judgement needs duration > FaultTimeout >= 1 s).
            self.occur(event.at)
            self.recover(event.at)

    def changes_at(self) -> float | None:
        if self.present and self.started is not None:
            return self.started + self.fault_timeout
        if not self.present and self.gone_at is not None:
            return self.gone_at + self.recover_timeout
        return None


def _in_order(events: Iterable[CodeEvent], now: float) -> list[CodeEvent]:
    # Stable sort: the reference sorts its queue by AlarmRaisedTime; events at one instant keep their order.
    return sorted((event for event in events if event.at <= now), key=lambda event: event.at)


def _run_duration(rule: DurationRule, events: Iterable[CodeEvent], now: float) -> _DurationRun:
    run = _DurationRun(rule)
    for event in _in_order(events, now):
        run.apply(event)
    run.advance(now)
    return run


def duration_state(rule: DurationRule, events: Sequence[CodeEvent], now: float) -> DurationState:
    """The FaultDuration state of one code on one chip at `now`; events after `now` are ignored.

    Reference fault_code.go `timeoutOrRecoveryAlgorithm`: a code counts once it has been continuously present
    for FaultTimeout and stops counting once it has been continuously gone for RecoverTimeout; a recover inside
    FaultTimeout ends it without counting, an occur inside RecoverTimeout continues it.
    """
    run = _run_duration(rule, events, now)
    return DurationState(
        counting=run.counting,
        pending=run.present and not run.counting,
        since=run.since,
        changes_at=run.changes_at(),
    )


def counting_spans(rule: DurationRule, events: Sequence[CodeEvent], now: float = math.inf) -> list[Interval]:
    """Every span in which the code counted under `rule`, up to `now`; the last may still be open (end None)."""
    return list(_run_duration(rule, events, now).spans)


# --- occurrences -----------------------------------------------------------------------------------


def occurrences(
    events: Sequence[CodeEvent], *, duration: DurationRule | None = None, now: float = math.inf
) -> list[float]:
    """The occurrence times FaultFrequency counts, in order.

    Without a duration rule every occur or once event is an occurrence (reference `baseChipFaultOccur`). A code
    that also has a FaultDuration rule occurs when it starts counting, not on each raw occur (reference
    `handleFaultQueue` inserts the frequency occurrence when the timeout status turns true), so a link that
    flaps shorter than its FaultTimeout never adds up to an isolation.
    """
    if duration is not None:
        return [start for start, _end in counting_spans(duration, events, now)]
    return [event.at for event in _in_order(events, now) if event.kind in ("occur", "once")]


def presence(
    events: Sequence[CodeEvent], *, duration: DurationRule | None = None, now: float = math.inf
) -> list[Interval]:
    """The spans in which the code was present (with a duration rule: in which it counted), for
    frequency_state's `present`: the reference starts the release clock at the code's last recovery."""
    if duration is not None:
        return counting_spans(duration, events, now)
    spans: list[Interval] = []
    start: float | None = None
    for event in _in_order(events, now):
        if event.kind == "occur" and start is None:
            start = event.at
        elif event.kind == "recover" and start is not None:
            spans.append((start, event.at))
            start = None
    if start is not None:
        spans.append((start, None))
    return spans


# --- FaultFrequency --------------------------------------------------------------------------------


def _release_at(quiet_from: float, window: float, spans: Sequence[tuple[float, float]]) -> float:
    """The boundary after which an escalation whose last activity ended at `quiet_from` is released: `window`
    seconds later, unless the code is present in between, which pushes the clock to the end of that presence
    (inf: still present)."""
    end = quiet_from
    for start, stop in spans:  # sorted by start
        if start > end + window:
            break  # released before this presence began (strictly after end + window)
        end = max(end, stop)
    return end + window


def frequency_state(
    rule: FrequencyRule,
    occurrences: Sequence[float],
    now: float,
    released_at: float | None = None,
    *,
    present: Sequence[Interval] = (),
) -> FrequencyState:
    """The FaultFrequency state of one code on one chip at `now`.

    `occurrences`: occurrence times (see occurrences()); those after `now` are ignored.
    `released_at`: when an administrator last released the chip (removed it from ManuallySeparateNPU);
        occurrences at or before it are ignored, so the count starts afresh.
    `present`: optionally, the spans in which the code was present (see presence()); the release clock then
        also waits for the code to be gone, as the reference releases only once the fault has recovered.

    Times occurrences inside one TimeWindow (both ends included, as the reference keeps an occurrence exactly
    TimeWindow old) escalate at the instant the Times-th lands. The escalation consumes its window (reference
    `DelOnceFrequencyFault`), occurrences while escalated only keep it alive (`handleFrequencyFault`: "because
    the fault has been upgraded, don't count the fault times"), and once the code has been gone for more than
    ReleaseTimeWindow the escalation is released, after which counting starts afresh.
    """
    occurred = sorted(t for t in occurrences if t <= now and (released_at is None or t > released_at))
    spans = _clip(present, now, released_at)
    release_window = float(rule.release_time_window_s)
    time_window = float(rule.time_window_s)
    window: deque[float] = deque()
    escalated_at: float | None = None
    released: float | None = None
    quiet_from = -math.inf  # end of the activity that keeps the current escalation alive
    for t in occurred:
        if escalated_at is not None:
            if release_window == 0 or t <= (ends := _release_at(quiet_from, release_window, spans)):
                quiet_from = max(quiet_from, t)
                continue
            escalated_at, released = None, ends  # released before t; the window was emptied at escalation
        window.append(t)
        while window[0] < t - time_window:
            window.popleft()
        if len(window) >= rule.times:
            escalated_at = t
            quiet_from = t
            window.clear()
    if escalated_at is not None:
        if release_window == 0:
            return FrequencyState(True, escalated_at, 0, None, released)
        releases_at = _release_at(quiet_from, release_window, spans)
        if now <= releases_at:
            finite = releases_at if math.isfinite(releases_at) else None
            return FrequencyState(True, escalated_at, 0, finite, released)
        released = releases_at
    while window and window[0] < now - time_window:
        window.popleft()
    return FrequencyState(False, None, len(window), None, released)


def _clip(present: Sequence[Interval], now: float, released_at: float | None) -> list[tuple[float, float]]:
    """Presence spans up to `now`, open ends as inf, anything at or before an admin release cut away."""
    floor = -math.inf if released_at is None else released_at
    spans: list[tuple[float, float]] = []
    for start, end in present:
        stop = math.inf if end is None else end
        if start > now or stop <= floor:
            continue
        spans.append((max(start, floor), stop))
    spans.sort()
    return spans
