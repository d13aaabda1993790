"""`fault-manager replay --db` over a node whose isolations were adopted from its ConfigMap."""

from __future__ import annotations

from pathlib import Path

from ascend_common.faults import default_fault_code_table, default_fault_customization, default_switch_fault_table
from fault_manager.policy.engine import BY_ADOPTION, Policy
from fault_manager.reactor.replay import compare_store
from fault_manager.store import Store

LINK_DOWN = "81078603"  # FaultFrequency -> ManuallySeparateNPU, ReleaseTimeWindow 172800 s
A, B = "Ascend910-2", "Ascend910-6"
T0_MS = 1_800_000_000_000


def policy() -> Policy:
    return Policy(default_fault_code_table(), default_fault_customization(), default_switch_fault_table())


def adopted_node(db: Path) -> None:
    """What the service stores when it adopts A (with its FaultFrequency reason) and B (none: it gets
    the FaultAutofill reason a start gives an isolation without one)."""
    store = Store(db)
    try:
        for chip in (A, B):
            store.manual.set_separated(chip, True, BY_ADOPTION, T0_MS)
            store.states.save(chip, "ManuallySeparateNPU", False, "ManuallySeparated", T0_MS, [], T0_MS)
        store.isolations.add(A, LINK_DOWN, "ManuallySeparateNPU", "FaultFrequency", T0_MS - 10_000)
        store.isolations.add(B, "AutofillFaultCode", "ManuallySeparateNPU", "FaultAutofill", T0_MS + 5)
    finally:
        store.close()


def test_replay_db_replays_an_adoption_as_the_service_made_it(tmp_path: Path) -> None:
    db = tmp_path / "fm.db"
    adopted_node(db)
    assert list(compare_store(db, policy(), T0_MS / 1000 + 60)) == []


def test_replay_db_releases_an_adopted_reason_by_its_rule(tmp_path: Path) -> None:
    """Past A's ReleaseTimeWindow the rule has released it; a store that still holds it differs, B does not."""
    db = tmp_path / "fm.db"
    adopted_node(db)
    [diff] = compare_store(db, policy(), T0_MS / 1000 - 10 + 172_800 + 1)
    assert diff["chip"] == A
    assert diff["stored"]["manually_separated"] is True and diff["replayed"]["manually_separated"] is False
