"""The event log's resume rules, table-driven."""

from __future__ import annotations

import json

import pytest
from ascend_common.schemas.exporter import (
    Assertion,
    ChipChangeData,
    ChipState,
    EventSource,
    EventType,
    ExporterEvent,
    FaultEventData,
    GapData,
    JobState,
    ResetChannel,
    ResetJob,
)
from dcmi_exporter.node.events import EventLog


def filled(capacity: int, n: int) -> EventLog:
    log = EventLog(capacity, run_id="run")
    for i in range(n):
        log.publish(EventType.CHIP, float(i), logic_id=i % 4)
    return log


@pytest.mark.parametrize(
    ("n", "last_id", "seq", "gap"),
    [
        (10, None, 10, None),  # a new reader starts live
        (10, "run-10", 10, None),
        (10, "run-3", 3, None),
        (10, "run-0", 0, None),  # from before the first event: replay everything
        (30, "run-14", 14, None),  # oldest kept is 15: resuming after 14 loses nothing
        (30, "run-13", 30, "evicted"),
        (30, "other-5", 30, "other_run"),
        (10, "run-11", 10, "malformed"),  # from the future
        (10, "run-x", 10, "malformed"),
        (10, "garbage", 10, "malformed"),
    ],
)
def test_resume(n: int, last_id: str | None, seq: int, gap: str | None) -> None:
    log = filled(16, n)
    start = log.resume(last_id)
    assert start.seq == seq
    assert (start.gap.reason if start.gap else None) == gap
    if start.gap:
        assert start.gap.resume_after == f"run-{n}"


def test_after_returns_exactly_the_missing_events_in_order() -> None:
    log = filled(16, 30)
    batch = log.after(20)
    assert batch is not None
    assert [s.seq for s in batch] == list(range(21, 31))
    assert [s.item.id for s in batch] == [f"run-{i}" for i in range(21, 31)]
    assert log.after(30) == []
    assert log.after(5) is None  # evicted: the reader must take a gap


def test_wire_frame_is_sse_with_id_and_type() -> None:
    log = filled(16, 1)
    [stored] = log.after(0) or []
    text = stored.wire.decode()
    assert text.startswith("id: run-1\nevent: chip\ndata: {")
    assert text.endswith("\n\n")


# Nulls a reader's schema requires: a polled fault has no severity, an unknown chip no health,
# a reset job's chip may not have answered yet. Encoding once dropped them (exclude_none) and
# the fault-manager could not read a polled card-drop event (found by the card-drop drill).
NULLS_INSIDE = [
    (EventType.FAULT, {"logic_id": 1, "chip": "Ascend910-1", "fault": FaultEventData(
        code="40F84E00", assertion=Assertion.OCCUR, severity=None, source=EventSource.POLL, raised_at_ms=1)}),
    (EventType.CHIP, {"logic_id": 2, "chip": "Ascend910-2", "change": ChipChangeData(
        state=ChipState.UNKNOWN, healthy=None, network_healthy=None, boot_status=None)}),
    (EventType.JOB, {"job": ResetJob(
        id="j1", logic_ids=[0, 1], phy_ids=[0, 1], channel=ResetChannel.INBAND, state=JobState.RUNNING,
        boot_status={0: None, 1: 16}, created_at=1.0)}),
    (EventType.GAP, {"gap": GapData(reason="evicted", requested="run-1", resume_after=None)}),
]  # fmt: skip


@pytest.mark.parametrize(("type_", "fields"), NULLS_INSIDE, ids=[t.value for t, _ in NULLS_INSIDE])
def test_every_event_reads_back_as_it_was_published(type_: EventType, fields: dict[str, object]) -> None:
    log = EventLog(16, run_id="run")
    event = log.publish(type_, 5.0, **fields)
    [stored] = log.after(0) or []
    data = stored.wire.decode().split("data: ", 1)[1].strip()
    assert ExporterEvent.model_validate_json(data) == event
    assert "phy_id" not in json.loads(data), "fields left unset stay off the wire"
