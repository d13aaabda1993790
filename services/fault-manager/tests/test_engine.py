"""The fault policy over time, driven by a hand-moved clock (no sleeping)."""

from __future__ import annotations

import pytest
from ascend_common.faults import (
    FaultLevel,
    default_fault_code_table,
    default_fault_customization,
    default_switch_fault_table,
)
from fault_manager.policy.engine import Escalation, FaultEngine, Policy

LINK_DOWN = "81078603"
HBM_ECC = "80E01801"  # FaultFrequency: 2 in 24 h -> ManuallySeparateNPU (packaged table)
RESTART_NPU = "8C1FA006"
CHIP = "Ascend910-4"


def engine(scale: float = 1.0) -> FaultEngine:
    e = FaultEngine(
        Policy(default_fault_code_table(), default_fault_customization(), default_switch_fault_table()),
        time_scale=scale,
    )
    e.chip(CHIP, logic_id=0, phy_id=4)
    return e


@pytest.mark.parametrize(
    ("down_s", "at", "network_level", "network_healthy"),
    [
        (10, 5, FaultLevel.NOT_HANDLE_FAULT, True),  # inside FaultTimeout: listed, harmless
        (10, 10, FaultLevel.NORMAL_NPU, True),
        (10, 200, FaultLevel.NORMAL_NPU, True),
        (25, 19, FaultLevel.NOT_HANDLE_FAULT, True),
        (25, 20, FaultLevel.NOT_HANDLE_FAULT, True),  # exactly FaultTimeout: not yet (strict, as the reference)
        (25, 20.001, FaultLevel.PRE_SEPARATE_NPU, False),
        (25, 25 + 60, FaultLevel.PRE_SEPARATE_NPU, False),  # recovered, exactly RecoverTimeout: still held
        (25, 25 + 60.001, FaultLevel.NORMAL_NPU, True),
    ],
)
def test_link_down_duration_acts_on_the_network_level_only(
    down_s: float, at: float, network_level: FaultLevel, network_healthy: bool
) -> None:
    e = engine()
    t0 = 1000.0
    e.apply(CHIP, LINK_DOWN, "occur", 1, t0)
    if down_s <= at:
        e.apply(CHIP, LINK_DOWN, "recover", 1, t0 + down_s)
    v = e.evaluate(CHIP, t0 + at).verdict
    assert (v.network_level, v.network_healthy) == (network_level, network_healthy)
    # reference GetFaultType leaves network codes and their escalations out of the chip level
    assert (v.fault_level, v.schedulable) == (FaultLevel.NORMAL_NPU, True)


def test_a_network_escalation_is_a_reason_with_the_network_level() -> None:
    e = engine()
    e.apply(CHIP, LINK_DOWN, "occur", 1, 0.0)
    ev = e.evaluate(CHIP, 30.0)
    assert ev.verdict.network_level is FaultLevel.PRE_SEPARATE_NPU and ev.verdict.schedulable
    assert [(x.upgrade_type, x.level, x.at_ms) for x in ev.escalations] == [
        ("FaultDuration", FaultLevel.PRE_SEPARATE_NPU, 20_000)
    ]
    assert [(r.code, r.level, r.network) for r in ev.codes] == [(LINK_DOWN, FaultLevel.PRE_SEPARATE_NPU, True)]


def test_wake_up_time_is_just_after_the_boundary() -> None:
    e = engine()
    e.apply(CHIP, LINK_DOWN, "occur", 1, 100.0)
    assert e.evaluate(CHIP, 105.0).wake_at == pytest.approx(120.001)


def test_time_scale_shrinks_policy_windows_only() -> None:
    e = engine(scale=10.0)
    e.apply(CHIP, LINK_DOWN, "occur", 1, 100.0)
    assert e.evaluate(CHIP, 101.9).verdict.network_level is FaultLevel.NOT_HANDLE_FAULT
    assert e.evaluate(CHIP, 102.01).verdict.network_level is FaultLevel.PRE_SEPARATE_NPU  # 20 s of policy


def test_five_long_link_downs_isolate_and_the_release_window_lifts_it() -> None:
    e = engine()
    t = 0.0
    for _ in range(5):  # 25 s down, then 100 s up (more than RecoverTimeout): five timeouts
        e.apply(CHIP, LINK_DOWN, "occur", 1, t)
        e.apply(CHIP, LINK_DOWN, "recover", 1, t + 25)
        ev = e.evaluate(CHIP, t + 30)
        t += 125
    assert ev.isolate and ev.verdict.manually_separated
    assert ev.verdict.fault_level is FaultLevel.MANUALLY_SEPARATE_NPU and not ev.verdict.schedulable
    last_recover = t - 125 + 25
    held = e.evaluate(CHIP, last_recover + 60 + 172800 - 1)
    assert held.verdict.manually_separated and not held.released
    assert held.wake_at == pytest.approx(last_recover + 60 + 172800 + 0.001)
    lifted = e.evaluate(CHIP, last_recover + 60 + 172800 + 1)
    assert lifted.released and not lifted.isolate
    assert not lifted.verdict.manually_separated and lifted.verdict.fault_level is FaultLevel.NORMAL_NPU
    assert not e.evaluate(CHIP, last_recover + 60 + 172800 + 2).released  # once


def test_an_operator_isolation_is_not_lifted_by_a_release_window() -> None:
    e = engine()
    e.isolate(CHIP)
    t = 0.0
    for _ in range(5):
        e.apply(CHIP, LINK_DOWN, "occur", 1, t)
        e.apply(CHIP, LINK_DOWN, "recover", 1, t + 25)
        t += 125
    ev = e.evaluate(CHIP, t + 172800 + 100)
    assert ev.verdict.manually_separated and not ev.released


def test_two_hbm_faults_in_a_day_isolate_and_an_admin_release_sticks() -> None:
    e = engine()
    day = 86400.0
    e.apply(CHIP, HBM_ECC, "occur", 2, 0.0)
    e.apply(CHIP, HBM_ECC, "recover", 2, 10.0)
    ev = e.evaluate(CHIP, 20.0)
    assert not ev.isolate and ev.verdict.fault_level is not FaultLevel.MANUALLY_SEPARATE_NPU
    e.apply(CHIP, HBM_ECC, "occur", 2, day / 2)
    e.apply(CHIP, HBM_ECC, "recover", 2, day / 2 + 10)
    ev = e.evaluate(CHIP, day / 2 + 20)
    assert ev.isolate and ev.verdict.manually_separated
    assert ev.verdict.fault_level is FaultLevel.MANUALLY_SEPARATE_NPU and not ev.verdict.schedulable
    assert ("FaultFrequency", HBM_ECC) in {(x.upgrade_type, x.code) for x in ev.escalations}
    # The administrator removes the chip from ManuallySeparateNPU: one new occurrence does not re-isolate.
    e.release(CHIP, day / 2 + 100)
    e.apply(CHIP, HBM_ECC, "occur", 2, day / 2 + 200)
    e.apply(CHIP, HBM_ECC, "recover", 2, day / 2 + 210)
    ev = e.evaluate(CHIP, day / 2 + 300)
    assert not ev.isolate and not ev.verdict.manually_separated and ev.verdict.schedulable


def test_code_levels_and_network_codes() -> None:
    e = engine()
    e.apply(CHIP, RESTART_NPU, "occur", 2, 0.0)
    ev = e.evaluate(CHIP, 1.0)
    assert ev.verdict.fault_level is FaultLevel.RESTART_NPU and not ev.verdict.schedulable
    assert ev.verdict.codes == [RESTART_NPU]
    e.apply(CHIP, RESTART_NPU, "recover", 2, 2.0)
    ev = e.evaluate(CHIP, 3.0)
    assert ev.verdict.fault_level is FaultLevel.NORMAL_NPU and ev.verdict.schedulable and not ev.codes


def test_unknown_code_falls_back_to_severity() -> None:
    e = engine()
    e.apply(CHIP, "ABCDEF12", "occur", 3, 0.0)
    assert e.evaluate(CHIP, 1.0).verdict.fault_level is FaultLevel.SEPARATE_NPU
    e.apply(CHIP, "ABCDEF12", "recover", 3, 2.0)
    e.apply(CHIP, "ABCDEF13", "occur", 1, 3.0)
    assert e.evaluate(CHIP, 4.0).verdict.fault_level is FaultLevel.NOT_HANDLE_FAULT


def test_card_drop_makes_no_reason() -> None:
    """Reference: FaultAutofill reasons come only from FixManuallySeparateReason, never from a code."""
    e = engine()
    e.apply(CHIP, "40F84E00", "occur", None, 100.0)
    ev = e.evaluate(CHIP, 101.0)
    assert ev.verdict.fault_level is FaultLevel.RESTART_NPU
    assert ev.escalations == ()


@pytest.mark.parametrize("by_rule", [True, False], ids=["rule-made", "operator-made"])
def test_an_isolation_without_a_reason_gets_an_autofill_reason_for_the_longest_release_window(by_rule: bool) -> None:
    """FixManuallySeparateReason: a FaultAutofill reason at ManuallySeparateNPU, released the longest
    ReleaseTimeWindow later (strictly after), which ends a rule-made isolation; an operator's stays."""
    e = engine()
    chip = e.chips[CHIP]
    chip.manual, chip.manual_by_rule = True, by_rule
    e.autofill(CHIP, 100.0)
    window = e.policy.customization.longest_release_window_s()  # 172800 s in the packaged rules
    ev = e.evaluate(CHIP, 101.0)
    assert [(x.code, x.level, x.upgrade_type, x.at_ms) for x in ev.escalations] == [
        ("AutofillFaultCode", FaultLevel.MANUALLY_SEPARATE_NPU, "FaultAutofill", 100_000)
    ]
    assert ev.isolate and ev.verdict.fault_level is FaultLevel.MANUALLY_SEPARATE_NPU
    assert ev.wake_at == pytest.approx(100.0 + window + 0.001)
    held = e.evaluate(CHIP, 100.0 + window)
    assert [x.upgrade_type for x in held.escalations] == ["FaultAutofill"] and not held.released
    after = e.evaluate(CHIP, 100.0 + window + 0.001)
    assert after.escalations == ()
    assert after.released is by_rule and after.verdict.manually_separated is not by_rule


def test_an_operator_release_drops_the_autofill_reason() -> None:
    e = engine()
    e.chips[CHIP].manual = True
    e.autofill(CHIP, 0.0)
    e.release(CHIP, 10.0)
    ev = e.evaluate(CHIP, 11.0)
    assert ev.escalations == () and not ev.verdict.manually_separated


def test_peek_answers_as_evaluate_without_changing_the_chip() -> None:
    """The start-up probe for FaultAutofill must not consume a release the service has to record."""
    e = engine()
    chip = e.chips[CHIP]
    chip.manual, chip.manual_by_rule = True, True
    e.autofill(CHIP, 0.0)
    window = e.policy.customization.longest_release_window_s()
    peeked = e.peek(CHIP, window + 1.0)
    assert peeked.released and peeked.escalations == ()
    assert chip.manual and chip.autofill_since == 0.0, "the chip's state is as it was"
    evaluated = e.evaluate(CHIP, window + 1.0)
    assert evaluated.released and not e.chips[CHIP].manual


# --- Adopted reasons (a first start on a node whose ConfigMap lists isolations) -------------------
WINDOW = 172_800  # LINK_DOWN's FaultFrequency ReleaseTimeWindow (packaged policy)
AUTOFILL_WINDOW = WINDOW  # the longest ReleaseTimeWindow


def adopted(reasons: list[tuple[str, FaultLevel, str, float]]) -> FaultEngine:
    e = engine()
    e.adopt(CHIP, [Escalation(code, level, kind, int(at * 1000)) for code, level, kind, at in reasons])
    return e


MS = FaultLevel.MANUALLY_SEPARATE_NPU


@pytest.mark.parametrize(
    ("reasons", "at", "isolated", "kept"),
    [
        # A FaultFrequency reason holds ReleaseTimeWindow after its upgrade time (strictly), then goes.
        ([(LINK_DOWN, MS, "FaultFrequency", 100.0)], 100.0 + WINDOW, True, [(LINK_DOWN, "FaultFrequency")]),
        ([(LINK_DOWN, MS, "FaultFrequency", 100.0)], 100.0 + WINDOW + 0.01, False, []),
        # Its level is the current rule's (LINK_DOWN's rule isolates), whatever the ConfigMap said.
        (
            [(LINK_DOWN, FaultLevel.PRE_SEPARATE_NPU, "FaultFrequency", 100.0)],
            200.0,
            True,
            [(LINK_DOWN, "FaultFrequency")],
        ),
        # HBM's rule never releases (no ReleaseTimeWindow): only an administrator lifts it.
        ([(HBM_ECC, MS, "FaultFrequency", 0.0)], 10.0 * WINDOW, True, [(HBM_ECC, "FaultFrequency")]),
        # No rule for the code (any more): no reason (CheckAndUpdateExistingUpgradeFaults), no isolation.
        ([(RESTART_NPU, MS, "FaultFrequency", 0.0)], 1.0, False, []),
        # A FaultDuration reason holds only while its code is present: here it is not. It never held the
        # isolation (not ManuallySeparateNPU): a chip listed without such a reason is an administrator's.
        ([(LINK_DOWN, FaultLevel.PRE_SEPARATE_NPU, "FaultDuration", 0.0)], 1.0, True, []),
        # A FaultAutofill reason follows the autofill rule: the longest ReleaseTimeWindow.
        (
            [("AutofillFaultCode", MS, "FaultAutofill", 0.0)],
            AUTOFILL_WINDOW,
            True,
            [("AutofillFaultCode", "FaultAutofill")],
        ),
        ([("AutofillFaultCode", MS, "FaultAutofill", 0.0)], AUTOFILL_WINDOW + 0.01, False, []),
    ],
)
def test_an_adopted_reason_follows_its_own_rule(
    reasons: list[tuple[str, FaultLevel, str, float]], at: float, isolated: bool, kept: list[tuple[str, str]]
) -> None:
    e = adopted(reasons)
    ev = e.evaluate(CHIP, at)
    assert [(r.code, r.upgrade_type) for r in ev.escalations] == kept
    assert ev.verdict.manually_separated is isolated
    assert ev.released is (not isolated)
    if not isolated:
        later = e.evaluate(CHIP, at + 1)
        assert not later.verdict.manually_separated and not later.released, "a release is for good, and once"


def test_an_adopted_isolation_without_a_reason_is_an_administrators() -> None:
    e = adopted([])
    for at in (0.0, 10.0 * WINDOW):
        ev = e.evaluate(CHIP, at)
        assert ev.verdict.manually_separated and not ev.released and not ev.verdict.schedulable


def test_an_adopted_frequency_reason_counts_its_window_from_the_last_recovery_and_not_while_present() -> None:
    e = adopted([(LINK_DOWN, MS, "FaultFrequency", 0.0)])
    e.apply(CHIP, LINK_DOWN, "occur", 1, 1000.0)
    assert e.evaluate(CHIP, 2.0 * WINDOW).verdict.manually_separated, "present: it cannot be released"
    e.apply(CHIP, LINK_DOWN, "recover", 1, 2.0 * WINDOW)
    assert e.evaluate(CHIP, 3.0 * WINDOW).verdict.manually_separated
    ev = e.evaluate(CHIP, 3.0 * WINDOW + 0.01)
    assert ev.released and not ev.verdict.manually_separated
    assert ev.wake_at is None


def test_an_adopted_reason_wakes_the_timer_when_it_ends() -> None:
    e = adopted([(LINK_DOWN, MS, "FaultFrequency", 100.0)])
    ev = e.evaluate(CHIP, 200.0)
    assert ev.wake_at is not None and 100.0 + WINDOW < ev.wake_at < 100.0 + WINDOW + 0.01
