"""The reactor alone changes the engine: inputs in order, each asked one answered once applied and published."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from ascend_common.schemas.exporter import Chip, ChipList
from ascend_common.schemas.reading import Reading
from fault_manager.deviceinfo.configmap import UNWATCHED_SWITCH
from fault_manager.publishing.reports import device_info
from fault_manager.reactor.ingest import reconcile_rows
from fault_manager.reactor.inputs import Inbox, Snapshot
from fault_manager.reactor.published import Published
from fault_manager.reactor.reactor import Reactor

from tests.support.chips import exporter_chip
from tests.support.reactor import running_reactor

RESTART_NPU = "8C1FA006"


def listing(codes: dict[int, list[str]], last_event_id: str = "run-9") -> ChipList:
    return ChipList(last_event_id=last_event_id, chips=[exporter_chip(i, i, codes=codes.get(i)) for i in range(4)])


def test_reconcile_rows_are_the_difference_with_deterministic_ids() -> None:
    snapshot = listing({1: [RESTART_NPU, "80E01801"]})
    present = {"Ascend910-1": {"80E01801", "81078603"}}
    rows = reconcile_rows(snapshot, present, now_ms=5)
    assert [(r.event_id, r.assertion, r.source) for r in rows] == [
        (f"run-9-r-Ascend910-1-{RESTART_NPU}-occur", "occur", "reconcile"),
        ("run-9-r-Ascend910-1-81078603-recover", "recover", "reconcile"),
    ]
    assert reconcile_rows(snapshot, present, now_ms=7)[0].event_id == rows[0].event_id, (
        "a second reconcile doubles nothing"
    )


@pytest.fixture
async def running(tmp_path: Path) -> AsyncIterator[tuple[Reactor, Inbox, Published]]:
    async with running_reactor(tmp_path) as rig:
        yield rig


async def test_a_snapshot_publishes_the_node_and_an_asked_input_is_answered_once_published(
    running: tuple[Reactor, Inbox, Published],
) -> None:
    _, inbox, published = running
    inbox.put(Snapshot(listing({2: [RESTART_NPU]}), switch_faults=None))
    async with asyncio.timeout(5):
        await published.inventory.wait()
    assert published.chips() == {f"Ascend910-{i}" for i in range(4)}
    assert published.verdicts()["Ascend910-2"].fault_level.value == "RestartNPU"
    # Asked: by the time the answer comes, the verdict and the ConfigMap's state show it.
    await inbox.set_manual("Ascend910-0", True, "api")
    assert published.verdicts()["Ascend910-0"].manually_separated
    assert device_info(published.state).manual == ("Ascend910-0",)


async def test_an_administrators_edit_is_applied_by_the_reactor_and_answered_with_the_listing(
    running: tuple[Reactor, Inbox, Published],
) -> None:
    _, inbox, published = running
    inbox.put(Snapshot(listing({}), switch_faults=None))
    now_listed = await inbox.admin_edits(set(), {"Ascend910-3", "Ascend910-99"})
    assert now_listed == {"Ascend910-3"}, "a chip the node does not have is not listed"
    assert published.verdicts()["Ascend910-3"].manually_separated
    now_listed = await inbox.admin_edits({"Ascend910-3"}, set())
    assert now_listed == set() and not published.verdicts()["Ascend910-3"].manually_separated
    assert published.take_released(published.released_pending()) == {"Ascend910-3": []}


async def test_a_failing_asked_input_fails_the_asker_not_the_reactor(running: tuple[Reactor, Inbox, Published]) -> None:
    reactor, inbox, published = running
    inbox.put(Snapshot(listing({}), switch_faults=None))
    reactor.store.close()  # the next write fails
    with pytest.raises(Exception):  # noqa: B017, PT011 - whatever the store raises reaches the asker
        await inbox.set_manual("Ascend910-1", True, "api")
    assert not published.verdicts()["Ascend910-1"].manually_separated


def a5_chip(logic: int, *, super_pod_type: int, rack: int = 3) -> Chip:
    """A 950 chip of super pod 5, server 1 (phy = logic + 4 mod 8, as the sim's a5-superpod-8)."""
    chip = exporter_chip(logic, (logic + 4) % 8, name="Ascend950DT", board=0x20, card_id=-1)
    static = chip.static.model_copy(
        update={
            "super_pod_id": Reading[int].ok(5),
            "server_index": Reading[int].ok(1),
            "rack_id": Reading[int].ok(rack),
            "super_pod_type": Reading[int].ok(super_pod_type),
        }
    )
    return chip.model_copy(update={"static": static})


@pytest.mark.parametrize(("super_pod_type", "rack"), [(2, 3), (1, 3), (0, None), (5, None)])
async def test_a_950_node_publishes_npu_lists_its_rack_in_a_pod_and_an_unwatched_switch(
    running: tuple[Reactor, Inbox, Published], super_pod_type: int, rack: int | None
) -> None:
    _, inbox, published = running
    chips = [a5_chip(logic, super_pod_type=super_pod_type) for logic in range(8)]
    inbox.put(Snapshot(ChipList(last_event_id="run-9", chips=chips), switch_faults=None))
    async with asyncio.timeout(5):
        await published.inventory.wait()
    assert published.state.rtype == "npu" and published.state.switch == UNWATCHED_SWITCH
    data = device_info(published.state).render(update_time_s=1718000000)
    cfg = json.loads(data["DeviceInfoCfg"])
    assert (cfg["SuperPodID"], cfg["ServerIndex"], cfg.get("RackID")) == (5, 1, rack)
    assert cfg["DeviceInfo"]["DeviceList"]["huawei.com/npu"] == ",".join(f"npu-{phy}" for phy in range(8))
    assert json.loads(data["SwitchInfoCfg"])["FaultCode"] is None
