"""Fuzzing the fault engine with random timelines of occur / recover / once events (contract section 7).

The packaged policy and a mix of codes that exercise every rule: table levels from NotHandleFault to
SeparateNPU, an unknown code (severity fallback), network codes, the link-down code with its
FaultDuration and FaultFrequency rules, FaultFrequency codes that isolate, and the card-drop code.
Invariants checked after every event:
- a chip's level is never below the table level of a code it currently has (non-network codes,
  whose level comes from the table), nor its network level below a present network code's, nor
  below a FaultDuration rule's level once the code has been present for its FaultTimeout;
- the verdict lists exactly the codes present, and schedulable follows the level;
- a network code and its escalations raise the network level only, never the chip level;
- for codes without a FaultDuration rule (each occur or once counts; no ReleaseTimeWindow in the
  packaged policy), the chip is in ManuallySeparateNPU exactly when some isolating FaultFrequency rule
  saw Times occurrences of one code inside its TimeWindow (ends included), and then its level says so.
  The link-down code counts once per timed-out presence and is released by its ReleaseTimeWindow:
  it may isolate only if its raw occurs could have (the exact rules are table tests in
  services/fault-manager/tests/test_reference_policy.py);
- nothing changes on its own before the evaluation's wake-up time;
- replaying the same events gives the same verdicts;
- once every code has recovered and every window has passed, the chip is NormalNPU again unless
  a rule without a ReleaseTimeWindow isolated it.
Out-of-order and repeated events must not raise, and converge the same way.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Literal

from ascend_common.faults import (
    FaultLevel,
    code_level,
    default_fault_code_table,
    default_fault_customization,
    default_switch_fault_table,
    is_network_code,
    network_level,
    schedulable,
)
from ascend_common.schemas.verdict import ChipVerdict
from fault_manager.policy.engine import FaultEngine, Policy
from hypothesis import event as note
from hypothesis import given, settings
from hypothesis import strategies as st

POLICY = Policy(default_fault_code_table(), default_fault_customization(), default_switch_fault_table())
CHIPS = ("Ascend910-0", "Ascend910-1")
LINK_DOWN = "81078603"
CODES = (
    "81078603",  # RoCE link down: network; FaultDuration 20 s / 60 s -> PreSeparateNPU; 5 a day isolate
    "80E01801",  # RestartBusiness; 2 a day isolate
    "80E18005",  # RestartNPU; 3 a day isolate
    "8C1FA006",  # RestartNPU
    "81A3880C",  # SubHealthFault
    "80E21007",  # NotHandleFault
    "A2301001",  # SeparateNPU
    "8C0E4E00",  # FreeRestartNPU
    "80C98002",  # RestartRequest
    "81078607",  # network, no rule
    "110001024",  # network, PreSeparateNPU in the main lists
    "40F84E00",  # card drop: a FaultAutofill reason
    "ABCDEF1",  # in no list: its severity decides
)
# Past every window of the packaged policy: RecoverTimeout 60 s, TimeWindow 1 day, ReleaseTimeWindow 2 days.
SETTLED_S = 10 * 86_400.0

Kind = Literal["occur", "recover", "once"]


@dataclass(frozen=True)
class Event:
    chip: str
    code: str
    kind: Kind
    severity: int | None
    at: float


# Whole seconds around the policy's thresholds shrink far faster than floats; sub-second gaps are in the mix too.
gaps = (
    st.sampled_from([0.0, 1.0, 19.0, 20.0, 21.0, 59.0, 60.0, 61.0, 86_399.0, 86_400.0, 86_401.0])
    | st.integers(0, 200_000).map(float)
    | st.sampled_from([0.25, 1e-6])
)


@st.composite
def events_in_order(draw: st.DrawFn) -> list[Event]:
    """Events at non-decreasing times. Each example uses a few of the codes: their events then meet on
    one timeline often enough to fill FaultFrequency windows and to outlive the engine's history
    horizon. The length is drawn, not left to st.lists, whose average stays near a handful of items."""
    # The link-down code has the most rules (duration, frequency, network): drawn more often.
    codes = draw(st.lists(st.sampled_from((*CODES, LINK_DOWN, LINK_DOWN)), min_size=1, max_size=4, unique=True))
    events, at = [], 1_000.0
    for _ in range(draw(st.integers(4, 40))):
        at += draw(gaps)
        kinds: tuple[Kind, ...] = ("occur", "occur", "recover", "once")
        kind = draw(st.sampled_from(kinds))
        severity = draw(st.none() | st.integers(0, 3))
        events.append(Event(draw(st.sampled_from(CHIPS)), draw(st.sampled_from(codes)), kind, severity, at))
    return events


events_any_order = st.integers(4, 60).flatmap(
    lambda n: st.lists(
        st.builds(
            Event,
            st.sampled_from(CHIPS),
            st.sampled_from(CODES),
            st.sampled_from(("occur", "recover", "once")),
            st.none() | st.integers(-5, 300),
            st.floats(0.0, 300_000.0) | st.sampled_from([0.0, 1e-9, 86_400.0]),
        ),
        min_size=n,
        max_size=n,
    )
)


@dataclass
class Model:
    """What the events say, independently of the engine: present codes, severities, occurrences."""

    present: dict[str, set[str]] = field(default_factory=lambda: {c: set() for c in CHIPS})
    since: dict[tuple[str, str], float] = field(default_factory=dict)  # when the current presence began
    severity: dict[tuple[str, str], int | None] = field(default_factory=dict)
    occurred: dict[tuple[str, str], list[float]] = field(default_factory=dict)

    def apply(self, e: Event) -> None:
        if e.kind == "occur":
            if e.code not in self.present[e.chip]:
                self.since[(e.chip, e.code)] = e.at
            self.present[e.chip].add(e.code)
        elif e.kind == "recover":
            self.present[e.chip].discard(e.code)
        if e.kind in ("occur", "once"):
            self.severity[(e.chip, e.code)] = e.severity
            self.occurred.setdefault((e.chip, e.code), []).append(e.at)

    def isolated(self, chip: str, *, timed: bool = False) -> bool:
        """Some isolating rule saw Times occurs in its window: of the codes without a FaultDuration rule,
        or (`timed`) of those with one, whose raw occurs only bound what counts."""
        custom = POLICY.customization
        for (name, code), times in self.occurred.items():
            rule = custom.frequency_rule(code)
            if name != chip or rule is None or rule.handling is not FaultLevel.MANUALLY_SEPARATE_NPU:
                continue
            if (custom.duration_rule(code) is not None) != timed:
                continue
            times = sorted(times)
            for last, t in enumerate(times):
                # Written as frequency_state compares (t - TimeWindow), so that float rounding agrees.
                if sum(1 for earlier in times[: last + 1] if earlier >= t - rule.time_window_s) >= rule.times:
                    return True
        return False


def new_engine() -> FaultEngine:
    engine = FaultEngine(POLICY)
    for index, name in enumerate(CHIPS):
        engine.chip(name, logic_id=index, phy_id=index)
    return engine


def check(engine: FaultEngine, model: Model, chip: str, verdict: ChipVerdict, now: float) -> None:
    table = POLICY.table
    assert verdict.codes == sorted(model.present[chip])
    for code in model.present[chip]:
        duration = POLICY.customization.duration_rule(code)
        network = is_network_code(code)
        if duration is not None and model.since[(chip, code)] + duration.fault_timeout_s < now:
            # Present for longer than FaultTimeout without a break: it counts (strictly, as the reference).
            seen = verdict.network_level if network else verdict.fault_level
            assert seen.rank >= duration.handling.rank, (code, model.since[(chip, code)], verdict)
        if network:
            assert verdict.network_level.rank >= network_level(table, code).rank, (code, verdict)
        else:
            floor = code_level(table, code, model.severity.get((chip, code)))
            assert verdict.fault_level.rank >= floor.rank, (code, floor, verdict)
    if not any(not is_network_code(code) for code in model.present[chip]) and not engine.chips[chip].manual:
        assert verdict.fault_level is FaultLevel.NORMAL_NPU, ("network codes only", verdict)
    manual = engine.chips[chip].manual
    if model.isolated(chip):
        assert manual, (chip, model.occurred)
    elif not model.isolated(chip, timed=True):
        assert not manual, (chip, model.occurred)
    assert (verdict.fault_level is FaultLevel.MANUALLY_SEPARATE_NPU) == verdict.manually_separated
    assert verdict.schedulable == schedulable(verdict.fault_level, False)


def replay(events: list[Event], *, checked: bool) -> list[ChipVerdict]:
    """Feed `events` one by one, evaluating the chip after each (as the service does); the verdicts."""
    engine, model, verdicts = new_engine(), Model(), []
    wake: dict[str, float | None] = dict.fromkeys(CHIPS)
    last: dict[str, FaultLevel] = dict.fromkeys(CHIPS, FaultLevel.NORMAL_NPU)
    for event in events:
        due = wake[event.chip]
        if checked and (due is None or due > event.at):
            # Nothing may change between two events before the wake-up the engine asked for.
            quiet = engine.evaluate(event.chip, event.at).verdict.fault_level
            assert quiet is last[event.chip], (event, wake[event.chip], quiet, last[event.chip])
        engine.apply(event.chip, event.code, event.kind, event.severity, event.at)
        model.apply(event)
        evaluation = engine.evaluate(event.chip, event.at)
        if evaluation.wake_at is not None:
            assert evaluation.wake_at > event.at
        wake[event.chip], last[event.chip] = evaluation.wake_at, evaluation.verdict.fault_level
        verdicts.append(evaluation.verdict)
        if checked:
            check(engine, model, event.chip, evaluation.verdict, event.at)
    return verdicts


def settle(engine: FaultEngine, events: list[Event]) -> None:
    """Recover every code after the last event, wait past every window: only an isolation remains."""
    end = max((e.at for e in events), default=0.0) + 1.0
    for chip in CHIPS:
        for code in CODES:
            engine.apply(chip, code, "recover", None, end)
        verdict = engine.evaluate(chip, end + SETTLED_S).verdict
        manual = engine.chips[chip].manual
        assert verdict.fault_level is (FaultLevel.MANUALLY_SEPARATE_NPU if manual else FaultLevel.NORMAL_NPU)
        assert verdict.network_level is FaultLevel.NORMAL_NPU and verdict.codes == []


FUZZ = settings(max_examples=200, deadline=None, database=None, report_multiple_bugs=False)


@FUZZ
@given(events=events_in_order())
def test_invariants_hold_after_every_event_and_replay_is_identical(events: list[Event]) -> None:
    first = replay(events, checked=True)
    assert replay(events, checked=True) == first
    note(f"{len(events) // 10 * 10}+ events")
    note(f"worst level {max((v.fault_level for v in first), key=lambda level: level.rank, default=None)}")


@FUZZ
@given(events=events_in_order())
def test_every_chip_returns_to_normal_unless_isolated(events: list[Event]) -> None:
    engine, model = new_engine(), Model()
    for event in events:
        engine.apply(event.chip, event.code, event.kind, event.severity, event.at)
        model.apply(event)
        engine.evaluate(event.chip, event.at)
    settle(engine, events)
    for chip in CHIPS:
        # The link-down rule's ReleaseTimeWindow (2 days) has passed; the others never release.
        assert engine.chips[chip].manual == model.isolated(chip)


@FUZZ
@given(events=events_any_order, repeat=st.booleans())
def test_out_of_order_and_repeated_events_do_not_break_the_engine(events: list[Event], repeat: bool) -> None:
    if repeat:
        events = [e for event in events for e in (event, event)]
    engine = new_engine()
    for event in events:
        engine.apply(event.chip, event.code, event.kind, event.severity, event.at)
        verdict = engine.evaluate(event.chip, event.at).verdict
        assert verdict.codes == sorted(engine.chips[event.chip].present)
        assert math.isfinite(verdict.since)
    settle(engine, events)


def test_regression_a_once_event_does_not_end_a_fault_that_outlives_the_history() -> None:
    """Trimming the timeline kept a `once` in place of the occur that began the presence: two days
    into a link down, the next event of the code made the chip look healthy while the link was down."""
    engine, chip = new_engine(), CHIPS[0]
    engine.apply(chip, "81078603", "occur", 1, 1_000.0)
    engine.apply(chip, "81078603", "once", 1, 1_200.0)
    engine.apply(chip, "81078603", "once", 1, 201_200.0)  # past keep_s: the first two events are trimmed
    verdict = engine.evaluate(chip, 201_200.0).verdict
    assert verdict.codes == ["81078603"]
    # A network code: its FaultDuration escalation is on the network level; the chip level is untouched.
    assert (verdict.fault_level, verdict.network_level) == (FaultLevel.NORMAL_NPU, FaultLevel.PRE_SEPARATE_NPU)
    [escalation] = [e for e in engine.evaluate(chip, 201_200.0).escalations if e.upgrade_type == "FaultDuration"]
    assert escalation.at_ms == 1_020_000  # it began counting 20 s after the first occur, not later
