"""Ingestion meets an event it cannot read: skip it, re-read the snapshot, go on."""

from __future__ import annotations

from pathlib import Path

import pytest
from ascend_common import sse
from ascend_common.adapters.kube.configmaps import OfflineConfigMaps
from ascend_common.clock import SystemClock
from ascend_common.faults import default_fault_code_table, default_fault_customization, default_switch_fault_table
from ascend_common.schemas.exporter import ChipList
from fault_manager.engine import FaultEngine, Policy
from fault_manager.service import FaultManager
from fault_manager.store import Store


class SnapshotOnly:
    """The one exporter call a skipped event leads to."""

    def __init__(self) -> None:
        self.reads = 0

    async def chips(self) -> ChipList:
        self.reads += 1
        return ChipList(last_event_id="run-7", chips=[])


UNREADABLE = [
    '{"id":"run-7","type":"fault","time":1.0,"chip":"Ascend910-0","fault":{"code":"80E01801"}}',  # fields missing
    '{"id":"run-7","type":"warp-core-breach","time":1.0}',  # a type this version does not know
    "not json at all",
]


@pytest.mark.parametrize("data", UNREADABLE)
async def test_an_unreadable_event_is_skipped_and_the_snapshot_re_read(
    tmp_path: Path, data: str, caplog: pytest.LogCaptureFixture
) -> None:
    exporter = SnapshotOnly()
    store = Store(tmp_path / "fm.db")
    fm = FaultManager(
        store=store,
        engine=FaultEngine(
            Policy(default_fault_code_table(), default_fault_customization(), default_switch_fault_table())
        ),
        exporter=exporter,  # type: ignore[arg-type]
        configmaps=OfflineConfigMaps(tmp_path / "kube"),
        clock=SystemClock(),
        node_name="node-a",
    )
    try:
        # Resuming at the same id would meet the same event forever: it must be passed.
        assert await fm._on_message(sse.SseMessage(event="fault", data=data, id="run-7"), "run") == "run-7"
        assert exporter.reads == 1
        assert isinstance(fm._queue.get_nowait(), ChipList), "the snapshot reconciles what the event carried"
        [record] = [r for r in caplog.records if "unreadable exporter event skipped" in r.getMessage()]
        assert record.event_id == "run-7"  # type: ignore[attr-defined]
    finally:
        store.close()
