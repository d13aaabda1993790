"""The verdict schema and the consumer's resume rules."""

from __future__ import annotations

import pytest
from ascend_common.faults import FaultLevel
from ascend_common.schemas.verdict import (
    ChipVerdict,
    CursorAction,
    VerdictCursor,
    VerdictList,
    VerdictReason,
)
from pydantic import ValidationError


@pytest.mark.parametrize(
    ("cursor", "epoch", "revision", "action"),
    [
        (VerdictCursor(), "e1", 1, CursorAction.RESYNC),  # never listed: read the list first
        (VerdictCursor("e1", 5), "e1", 6, CursorAction.APPLY),
        (VerdictCursor("e1", 5), "e1", 5, CursorAction.SKIP),  # replayed after a reconnect
        (VerdictCursor("e1", 5), "e1", 2, CursorAction.SKIP),
        (VerdictCursor("e1", 5), "e1", 7, CursorAction.RESYNC),  # revision 6 was lost
        (VerdictCursor("e1", 5), "e2", 6, CursorAction.RESYNC),  # the fault-manager restarted
        (VerdictCursor("e1", 5), "e2", 1, CursorAction.RESYNC),
    ],
)
def test_cursor_rules(cursor: VerdictCursor, epoch: str, revision: int, action: CursorAction) -> None:
    assert cursor.decide(epoch, revision) is action


def test_cursor_follows_a_list_and_its_events() -> None:
    verdict = ChipVerdict(
        chip="Ascend910-3",
        logic_id=7,
        phy_id=3,
        fault_level=FaultLevel.RESTART_NPU,
        schedulable=False,
        reason=VerdictReason.FAULT_CODE,
        since=1.0,
        codes=["80E01801"],
    )
    listing = VerdictList(epoch="e1", revision=41, verdicts=[verdict])
    cursor = VerdictCursor.from_list(listing)
    assert cursor.last_event_id() == "41"
    assert cursor.decide("e1", 42) is CursorAction.APPLY
    assert cursor.applied(42).last_event_id() == "42"
    assert VerdictCursor().last_event_id() is None
    wire = listing.model_dump_json()
    assert '"fault_level":"RestartNPU"' in wire
    assert VerdictList.model_validate_json(wire) == listing


def test_verdict_rejects_unknown_levels_and_ignores_unknown_fields() -> None:
    base = {"chip": "Ascend910-0", "logic_id": 0, "phy_id": 0, "schedulable": True, "reason": "Normal", "since": 0}
    with pytest.raises(ValidationError, match="fault_level"):
        ChipVerdict.model_validate({**base, "fault_level": "Broken"})
    # A field this build does not know is one a newer fault-manager added (a rolling update): ignored,
    # while a value it cannot read, as above, is still refused.
    read = ChipVerdict.model_validate({**base, "fault_level": "NormalNPU", "colour": "red"})
    assert read == ChipVerdict.model_validate({**base, "fault_level": "NormalNPU"})
    assert "colour" not in read.model_dump()
