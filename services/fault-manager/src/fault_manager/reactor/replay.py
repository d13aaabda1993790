"""`fault-manager replay`: the service's own policy engine run over a timeline, offline.

A timeline is JSON lines, each an event or a query:

    {"t": 0, "chip": "Ascend910-0", "code": "81078603", "assertion": "occur", "severity": 1}
    {"t": 25, "query": true}

Time `t` is in seconds and never decreases. The engine is driven exactly as the service drives it:
each event is applied and its chip evaluated at that instant, and every chip is evaluated again at
the instant its state changes by itself (the service's wake-up timer), so isolations and releases
happen when they would on a node, whether or not a query looks at that moment. A query prints one
JSON line with every chip named so far. The HBM / AI-core association holds and drops events as
the reactor does (reactor.association), each event taken to arrive when it was raised.

With `--db`, a node's stored event history is replayed under the (candidate) policy and compared
with what the node decided, chip by chip.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ascend_common.faults import normalize_code
from ascend_common.faults.codes import HBM_DOUBLE_BIT_CODE
from ascend_common.jsonin import InputError, loads_bounded

from fault_manager.policy.engine import (
    BY_ADOPTION,
    BY_RELEASE,
    BY_RULE,
    UPGRADE_AUTOFILL,
    Escalation,
    Evaluation,
    FaultEngine,
    Policy,
    stored_escalation,
)
from fault_manager.reactor.association import HbmAssociation, Outcome
from fault_manager.store import FaultEventRow, Store

ASSERTIONS = ("occur", "recover", "once")
_EVENT_KEYS = {"t", "chip", "code", "assertion", "severity"}


class TimelineError(ValueError):
    """A line of the timeline that cannot be replayed; `line` is 1-based."""

    def __init__(self, line: int, message: str) -> None:
        super().__init__(f"line {line}: {message}")
        self.line = line


@dataclass(frozen=True)
class Event:
    t: float
    chip: str
    code: str
    assertion: str
    severity: int | None


@dataclass(frozen=True)
class Query:
    t: float


Step = Event | Query


def parse_timeline(lines: Iterable[str]) -> Iterator[Step]:
    """The steps of a timeline, checked line by line (blank lines are skipped)."""
    last = -math.inf
    for number, raw in enumerate(lines, start=1):
        if not raw.strip():
            continue
        step = _parse_line(number, raw)
        if step.t < last:
            raise TimelineError(number, f"t {step.t:g} is before the previous line's t {last:g}")
        last = step.t
        yield step


def _parse_line(number: int, raw: str) -> Step:
    try:
        obj = loads_bounded(raw, what="the line")
    except InputError as exc:
        raise TimelineError(number, f"not JSON: {exc}") from None
    if not isinstance(obj, dict):
        raise TimelineError(number, "expected a JSON object")
    t = obj.get("t")
    if isinstance(t, bool) or not isinstance(t, int | float) or not math.isfinite(t):
        raise TimelineError(number, '"t" must be a finite number of seconds')
    if "query" in obj:
        if obj["query"] is not True or set(obj) != {"t", "query"}:
            raise TimelineError(number, 'a query is exactly {"t": <seconds>, "query": true}')
        return Query(float(t))
    unknown = sorted(set(obj) - _EVENT_KEYS)
    if unknown:
        raise TimelineError(number, f"unknown key {unknown[0]!r}")
    chip, code, assertion = obj.get("chip"), obj.get("code"), obj.get("assertion")
    if not isinstance(chip, str) or not chip:
        raise TimelineError(number, '"chip" must be a chip name such as "Ascend910-0"')
    if not isinstance(code, str):
        raise TimelineError(number, '"code" must be a hex fault code in a string, such as "81078603"')
    try:
        code = normalize_code(code)
    except ValueError as exc:
        raise TimelineError(number, str(exc)) from None
    if assertion not in ASSERTIONS:
        raise TimelineError(number, f'"assertion" must be one of {", ".join(ASSERTIONS)}')
    severity = obj.get("severity")
    if severity is not None and (isinstance(severity, bool) or not isinstance(severity, int) or severity < 0):
        raise TimelineError(number, '"severity" must be a non-negative integer')
    return Event(float(t), chip, code, assertion, severity)


class Replayer:
    """Feeds the engine as the service does: evaluate on each event and at each wake-up."""

    def __init__(self, policy: Policy) -> None:
        self.engine = FaultEngine(policy)
        self.evaluations: dict[str, Evaluation] = {}
        self.association = HbmAssociation()
        self._seq = 0

    def _evaluate(self, chip: str, now: float) -> Evaluation:
        ev = self.evaluations[chip] = self.engine.evaluate(chip, now)
        return ev

    def advance(self, until: float) -> None:
        """Fire every wake-up due at or before `until`, in time order (the association's too)."""
        while True:
            due = [(ev.wake_at, chip) for chip, ev in self.evaluations.items() if ev.wake_at is not None]
            at, chip = min(due) if due else (None, "")
            held = self.association.wake_at_ms()
            if held is not None and held / 1000 <= until and (at is None or held / 1000 <= at):
                self._apply(self.association.due(held), held / 1000)
                continue
            if at is None or at > until:
                return
            self._evaluate(chip, at)

    def event(self, step: Event) -> None:
        self.advance(step.t)
        self.engine.chip(step.chip, -1, -1)
        ms = round(step.t * 1000)
        self._seq += 1
        row = FaultEventRow(f"replay-{self._seq}", step.chip, -1, -1, step.code, step.assertion, step.severity,
                            "subscription", ms, ms)  # fmt: skip
        if self.engine.policy.customization.duration_rule(HBM_DOUBLE_BIT_CODE) is None:
            outcome = self.association.release_all()
            outcome.apply.append(row)
        else:
            outcome = self.association.admit([row], ms)
        self._apply(outcome, step.t)
        self._evaluate(step.chip, step.t)

    def _apply(self, outcome: Outcome, now: float) -> None:
        for row in outcome.apply:
            self.engine.apply(row.chip, row.code, row.assertion, row.severity, row.raised_at_ms / 1000)
        for chip in sorted({row.chip for row in outcome.apply}):
            self._evaluate(chip, now)

    def operator(self, chip: str, isolate: bool, t: float) -> None:
        """An operator isolated or released the chip at `t` (from the store's audit)."""
        self.advance(t)
        self.engine.chip(chip, -1, -1)
        if isolate:
            self.engine.isolate(chip)
        else:
            self.engine.release(chip, t)
        self._evaluate(chip, t)

    def adopt(self, chip: str, reasons: list[Escalation], t: float) -> None:
        """The chip's isolation and reasons were adopted from the ConfigMap at `t` (a first start)."""
        self.advance(t)
        self.engine.chip(chip, -1, -1)
        self.engine.adopt(chip, reasons)
        self._evaluate(chip, t)

    def autofill(self, chip: str, t: float) -> None:
        """The service gave the chip's isolation a FaultAutofill reason at `t` (a start found none)."""
        self.advance(t)
        self.engine.chip(chip, -1, -1)
        self.engine.autofill(chip, t)
        self._evaluate(chip, t)

    def query(self, t: float) -> dict[str, Any]:
        self.advance(t)
        return {"t": t, "chips": {chip: describe(self._evaluate(chip, t)) for chip in sorted(self.engine.chips)}}

    def run(self, steps: Iterable[Step]) -> Iterator[dict[str, Any]]:
        for step in steps:
            if isinstance(step, Query):
                yield self.query(step.t)
            else:
                self.event(step)


def describe(ev: Evaluation) -> dict[str, Any]:
    """One chip of a query's answer; `healthy` is what the kubelet is told with no pod on the chip."""
    v = ev.verdict
    return {
        "level": v.fault_level.value,
        "network_level": v.network_level.value,
        "healthy": v.schedulable,
        "network_healthy": v.network_healthy,
        "manually_separated": v.manually_separated,
        "reasons": [
            {"code": e.code, "level": e.level.value, "type": e.upgrade_type}
            for e in sorted(ev.escalations, key=lambda e: (e.code, e.upgrade_type))
        ],
    }


# --- --db: a node's history under a candidate policy ------------------------------------------------


def compare_store(path: Path, policy: Policy, now: float) -> Iterator[dict[str, Any]]:
    """For each chip of the database whose replayed state differs from the stored one, a line with both.

    Stored: the chip's last saved verdict level, its active escalations (UpgradeFaultReason) and whether
    it is in ManuallySeparateNPU. Replayed: every stored event of the chip, under `policy`, to `now`.
    """
    store = Store(path)
    try:
        states = store.states.all()
        manual = store.manual.chips()
        escalations: dict[str, list[dict[str, str]]] = {}
        for esc in store.isolations.escalations(True):
            escalations.setdefault(esc.chip, []).append(
                {"code": esc.code, "level": esc.level, "type": esc.upgrade_type}
            )
        chips = sorted(set(states) | manual)
        # The operators' isolations and releases are not in the events: they are replayed at their
        # times, so that only the rules are compared (a release restarts the frequency windows).
        # (chip, isolated) an operator's step; (chip, reasons) an adoption; (chip, None) a FaultAutofill reason.
        steps: list[tuple[float, int, Event | tuple[str, bool | list[Escalation] | None]]] = [
            (row.raised_at_ms / 1000, row.id or 0, Event(row.raised_at_ms / 1000, chip, row.code, row.assertion,
                                                         row.severity))
            for chip in chips for row in store.events.of_chip(chip)
        ]  # fmt: skip
        for chip in chips:
            reasons = store.isolations.escalations(False, chip)
            adopted_at = [a.at_ms for a in store.manual.audit(chip, limit=10_000) if a.set_by == BY_ADOPTION]
            for audit in store.manual.audit(chip, limit=10_000):
                if audit.set_by == BY_ADOPTION and audit.separated:
                    # What came with the ConfigMap is older than the adoption (service._restore).
                    held = [stored_escalation(r) for r in reasons if r.upgrade_time_ms < audit.at_ms]
                    steps.append((audit.at_ms / 1000, -1, (chip, held)))
                elif audit.set_by not in (BY_RULE, BY_RELEASE):
                    steps.append((audit.at_ms / 1000, -1, (chip, audit.separated)))
            for row in reasons:
                if row.upgrade_type == UPGRADE_AUTOFILL and not any(row.upgrade_time_ms < at for at in adopted_at):
                    steps.append((row.upgrade_time_ms / 1000, -1, (chip, None)))
    finally:
        store.close()
    replayer = Replayer(policy)
    for chip in chips:
        replayer.engine.chip(chip, -1, -1)
    for t, _order, step in sorted(steps, key=lambda item: (item[0], item[1])):  # as the node saw them
        if isinstance(step, Event):
            replayer.event(step)
        elif step[1] is None:
            replayer.autofill(step[0], t)
        elif isinstance(step[1], list):
            replayer.adopt(step[0], step[1], t)
        else:
            replayer.operator(step[0], step[1], t)
    replayer.advance(now)
    for chip in chips:
        if chip not in replayer.engine.chips:
            replayer.engine.chip(chip, -1, -1)
        replayed = describe(replayer._evaluate(chip, now))
        state = states.get(chip)
        stored = {
            "level": state.level if state else "NormalNPU",
            "manually_separated": chip in manual,
            "reasons": sorted(escalations.get(chip, []), key=lambda r: (r["code"].lower(), r["type"])),
        }
        mine = {"level": replayed["level"], "manually_separated": replayed["manually_separated"],
                "reasons": replayed["reasons"]}  # fmt: skip
        if _normal(stored) != _normal(mine):
            yield {"chip": chip, "stored": stored, "replayed": replayed}


def _normal(state: dict[str, Any]) -> Any:
    reasons = sorted((r["code"].upper(), r["level"], r["type"]) for r in state["reasons"])
    return state["level"], state["manually_separated"], reasons
