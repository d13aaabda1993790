"""HBM / AI-core fault association, as a pure function of (events, now).

Ported from the reference's fault_code_test.go `TestHbmFaultManager` (5 cases) and
`TestNewFaultInfosForHBMErr` (1 case); the table below adds the 5 s boundaries on both sides.
"""

from __future__ import annotations

from dataclasses import replace

import pytest
from ascend_common.faults.codes import HBM_DOUBLE_BIT_CODE
from fault_manager.reactor.association import WINDOW_MS, HbmAssociation, replay
from fault_manager.store import FaultEventRow

AIC = "80C98009"  # AicBusFaultCode
AIV = "80CB8009"  # AivBusFaultCode
HBM = HBM_DOUBLE_BIT_CODE
T = 1_700_000_000_000  # ms
_seq = iter(range(1, 1_000_000))


def row(code: str, raised_ms: int, *, chip: str = "Ascend910-1", assertion: str = "occur", arrived_ms: int | None = None
        ) -> FaultEventRow:  # fmt: skip
    return FaultEventRow(
        event_id=f"run-{next(_seq)}", chip=chip, logic_id=1, phy_id=1, code=code, assertion=assertion, severity=2,
        source="subscription", raised_at_ms=raised_ms, recorded_at_ms=raised_ms if arrived_ms is None else arrived_ms,
    )  # fmt: skip


def codes(rows: list[FaultEventRow]) -> list[str]:
    return [r.code for r in rows]


# --- TestHbmFaultManager ------------------------------------------------------------------------


def test_hbm_fault_manager_new() -> None:
    association = HbmAssociation()
    assert association.held == [] and association.wake_at_ms() is None


def test_hbm_fault_manager_update_hbm_occur_time() -> None:
    """`updateHbmOccurTime`: the 80E01801 occurrence's raised time is what later events are measured from."""
    association = HbmAssociation()
    assert codes(association.admit([row(HBM, 123456789)], 123456789).apply) == [HBM]
    out = association.admit([row(AIV, 123456789 + WINDOW_MS - 1)], 123456789 + WINDOW_MS)
    assert out.apply == [] and codes(out.dropped) == [AIV]


def test_hbm_fault_manager_fault_event_in_que() -> None:
    """`aicFaultEventInQue`: an 80CB8009 is held, with its raised time."""
    association = HbmAssociation()
    held = row(AIV, 123456789)
    out = association.admit([held], 123456789)
    assert out.apply == [] and out.dropped == [] and association.held == [held]


def test_hbm_fault_manager_out_que_reports_an_old_event() -> None:
    """`aicFaultEventOutQue`: an 80C98009 raised long before now, with no 80E01801, is reported."""
    association = HbmAssociation()
    out = association.admit([row(AIC, 100_000_000, arrived_ms=100_000_000)], T)
    assert codes(out.apply) == [AIC] and out.apply[0].raised_at_ms == 100_000_000
    assert association.held == []


def test_hbm_fault_manager_out_que_without_hbm_is_not_an_echo_of_time_zero() -> None:
    """The Go case raises the 80C98009 at 300 ms after the epoch and expects it dropped: with no 80E01801
    seen, `HbmOccurTimeCache` defaults to 0, and 300 is within 5 s of 0. That is an artefact of the
    default, not an association: ours has no 80E01801 to measure from, so it reports the event once it
    is 5 s old (a deliberate difference)."""
    association = HbmAssociation()
    assert association.admit([row(AIC, 300)], 300).apply == []
    out = association.due(300 + WINDOW_MS + 1)
    assert codes(out.apply) == [AIC] and out.dropped == []


# --- TestNewFaultInfosForHBMErr -----------------------------------------------------------------


def test_new_fault_infos_for_hbm_err() -> None:
    """01: 80E01801 and 80C98009 in one batch, 400 ms apart: only the 80E01801 is left."""
    association = HbmAssociation()
    hbm = row(HBM, 3400)
    out = association.admit([row(AIC, 3000), hbm], 3400)
    assert out.apply == [hbm] and codes(out.dropped) == [AIC]


# --- the rule, with its boundaries --------------------------------------------------------------

# (what arrives, at which offsets from T, in order) -> what is applied at once, what after the hold, what is dropped.
CASES = [
    # Must show: 80E01801 at t, 80CB8009 at t+3 s: only 80E01801.
    pytest.param([(HBM, 0), (AIV, 3000)], [HBM], [], [AIV], id="hbm-then-aiv-3s"),
    # Must show: 80CB8009 alone: reported 5 s late.
    pytest.param([(AIV, 0)], [], [AIV], [], id="aiv-alone"),
    pytest.param([(AIC, 0)], [], [AIC], [], id="aic-alone"),
    # The boundary after the 80E01801: 4.999 s is within, 5.000 s is not (`< AssociatedFaultDiagnosisTime`).
    pytest.param([(HBM, 0), (AIV, 4999)], [HBM], [], [AIV], id="aiv-4999ms-after-hbm"),
    pytest.param([(HBM, 0), (AIV, 5000)], [HBM], [AIV], [], id="aiv-5000ms-after-hbm"),
    # ... and before it: the AI-core event held meets an 80E01801 that comes within its 5 s.
    pytest.param([(AIV, 0), (HBM, 4999)], [HBM], [], [AIV], id="hbm-4999ms-after-aiv"),
    pytest.param([(AIV, 0), (HBM, 5000)], [HBM], [AIV], [], id="hbm-5000ms-after-aiv"),
    # A recovery of 80E01801 is no occurrence; another chip's is not this chip's.
    pytest.param([("80E01801/recover", 0), (AIV, 1000)], [HBM], [AIV], [], id="hbm-recovery-does-not-count"),
    pytest.param([("80E01801@Ascend910-2", 0), (AIV, 1000)], [HBM], [AIV], [], id="other-chips-hbm"),
    # Every assertion of an AI-core code is held (the reference queues them all).
    pytest.param([(HBM, 0), ("80CB8009/recover", 2000)], [HBM], [], [AIV], id="aiv-recovery-dropped"),
    # Other codes pass at once, in order.
    pytest.param([("8C1FA006", 0), (AIV, 10), ("80E18005", 20)], ["8C1FA006", "80E18005"], [AIV], [], id="others"),
]


def _rows(spec: list[tuple[str, int]]) -> list[FaultEventRow]:
    out = []
    for text, offset in spec:
        code, _, assertion = text.partition("/")
        code, _, chip = code.partition("@")
        out.append(row(code, T + offset, chip=chip or "Ascend910-1", assertion=assertion or "occur"))
    return out


@pytest.mark.parametrize(("arrivals", "at_once", "late", "dropped"), CASES)
def test_association(arrivals: list[tuple[str, int]], at_once: list[str], late: list[str], dropped: list[str]) -> None:
    association = HbmAssociation()
    applied: list[FaultEventRow] = []
    gone: list[FaultEventRow] = []
    for r in _rows(arrivals):
        out = association.admit([r], r.recorded_at_ms)
        applied += out.apply
        gone += out.dropped
    assert codes(applied) == at_once
    assert codes(gone) == dropped, "dropped as soon as the 80E01801 is seen"
    assert codes(association.held) == late, "held meanwhile"
    if late:
        # Nothing until the first held event is 5 s old (strictly more); then each at its time.
        first = min(r.raised_at_ms for r in association.held)
        assert association.wake_at_ms() == first + WINDOW_MS + 1
        assert association.due(first + WINDOW_MS).apply == []
        out = association.due(max(r.raised_at_ms for r in association.held) + WINDOW_MS + 1)
        assert codes(out.apply) == late and out.dropped == []
    assert association.held == [] and association.wake_at_ms() is None


def test_an_aicore_event_is_reported_exactly_when_it_is_5s_old() -> None:
    """`nowTime - AlarmRaisedTime > 5 s`: held at 5.000 s, reported at 5.001 s, with its raised time kept."""
    association = HbmAssociation()
    aiv = row(AIV, T)
    association.admit([aiv], T)
    assert association.wake_at_ms() == T + WINDOW_MS + 1
    assert association.due(T + WINDOW_MS).apply == []
    assert association.due(T + WINDOW_MS + 1).apply == [aiv]


def test_a_replayed_run_meets_the_hbm_fault_that_follows_in_a_later_batch() -> None:
    """Events of an hour ago, replayed from an exporter's run in two batches: the hold counts from
    arrival, so the 80E01801 of the second batch still drops the echo of the first."""
    association = HbmAssociation()
    now = T + 3_600_000
    assert association.admit([row(AIV, T + 2000, arrived_ms=now)], now).apply == []
    out = association.admit([row(HBM, T, arrived_ms=now + 3)], now + 3)
    assert codes(out.apply) == [HBM] and codes(out.dropped) == [AIV]


def test_two_hbm_faults_in_one_batch_each_drop_their_own_echo() -> None:
    association = HbmAssociation()
    batch = [row(HBM, T), row(AIV, T + 1000), row(HBM, T + 3_600_000), row(AIC, T + 3_601_000)]
    out = association.admit(batch, T + 3_700_000)
    assert codes(out.apply) == [HBM, HBM] and sorted(codes(out.dropped)) == sorted([AIV, AIC])


def test_replay_decides_as_the_events_did_when_they_arrived() -> None:
    """A restart replays the stored rows in arrival order: drops, reports and holds come out the same."""
    arrivals = [row(HBM, T), row(AIV, T + 3000), row(AIC, T + 20_000), row(AIV, T + 40_000)]
    live = HbmAssociation()
    applied: list[FaultEventRow] = []
    for r in arrivals:
        applied += live.admit([r], r.recorded_at_ms).apply
    now = T + 42_000
    applied += live.due(now).apply
    restarted = HbmAssociation()
    out = replay(restarted, arrivals, now)
    assert out.apply == applied and codes(applied) == [HBM, AIC]
    assert codes(out.dropped) == [AIV]
    assert restarted.held == live.held == [arrivals[3]], "the last one is still within its 5 s"


def test_release_all_gives_back_what_is_held() -> None:
    association = HbmAssociation()
    held = [row(AIV, T), replace(row(AIC, T + 1), chip="Ascend910-2")]
    association.admit(held, T + 1)
    assert sorted(association.release_all().apply, key=lambda r: r.chip) == held
    assert association.held == []


# --- `fault-manager replay`: the same association over a timeline ----------------------------------


def test_the_replay_tool_drops_the_echo_and_reports_a_lone_one_5s_late() -> None:
    import json

    from fault_manager.policy.keeper import build
    from fault_manager.reactor.replay import Replayer, parse_timeline

    rule = {
        "FaultDuration": [{"EventId": [HBM], "FaultTimeout": 0, "RecoverTimeout": 0, "FaultHandling": "SeparateNPU"}]
    }
    policy = build({"faultCustomization.json": json.dumps(rule)})
    lines = [
        {"t": 0, "chip": "Ascend910-1", "code": HBM, "assertion": "occur", "severity": 2},
        {"t": 3, "chip": "Ascend910-1", "code": AIV, "assertion": "occur", "severity": 2},
        {"t": 3, "chip": "Ascend910-2", "code": AIV, "assertion": "occur", "severity": 2},
        {"t": 7.9, "query": True},
        {"t": 8.002, "query": True},
    ]
    replayer = Replayer(policy)
    before, after = replayer.run(parse_timeline(json.dumps(line) for line in lines))
    assert before["chips"]["Ascend910-1"]["level"] == after["chips"]["Ascend910-1"]["level"] == "SeparateNPU"
    assert replayer.engine.chips["Ascend910-1"].present == {HBM}, "the echo dropped"
    assert replayer.engine.chips["Ascend910-2"].present == {AIV}
    assert before["chips"]["Ascend910-2"]["level"] == "NormalNPU", "held"
    assert after["chips"]["Ascend910-2"]["level"] == "RestartRequest", "reported 5 s after it was raised"
