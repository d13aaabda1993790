"""A3 switch faults through liblingqu-dcmi.so (its C double), and the A3 multi-die policy.

The reference: component/ascend-device-plugin/pkg/device/deviceswitch/ascend_switch.go (its tests
are ported below under their names) and pkg/server/manager.go (`ListenDevice`,
`subscribeSwitchFaultEvent`, `DoSetMultiDiePolicyForA3`).
"""

from __future__ import annotations

import asyncio
import ctypes
import logging
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any, TypeAlias

import pytest
from ascend_common.chips import ChipFamily
from ascend_common.schemas.exporter import Assertion, ChipState, EventType, SwitchFaultData
from dcmi_exporter.backends.base import RawFaultEvent, RawSwitchEvent
from dcmi_exporter.backends.dcmi.switch import (
    INVALID_NUM,
    LqDcmiEvent,
    LqDcmiEventFilter,
    SwitchLibrary,
    assemble_fault_code,
    is_fault_recovered_event,
)
from dcmi_exporter.backends.errors import DcmiError
from dcmi_exporter.runtime import Exporter
from dcmi_exporter.settings import ExporterSettings
from dcmi_exporter.tasks.die_policy import MULTI_DIE_INDEP, MULTI_DIE_UNION
from dcmi_exporter.tasks.switch import SWITCH_KEY

import tests.cdouble.fixtures as _fx
from tests.cdouble.fixtures import SwitchFault
from tests.support.waiting import until

cdouble_build_dir = _fx.cdouble_build_dir
dcmi_double_path = _fx.dcmi_double_path
dcmi_double_nosub_path = _fx.dcmi_double_nosub_path
dcmi_double = _fx.dcmi_double
dcmi_double_nosub = _fx.dcmi_double_nosub
lingqu_double_path = _fx.lingqu_double_path
lingqu_double = _fx.lingqu_double

# tests/cdouble/fixtures.py's control classes, loaded through the fixtures module.
Control: TypeAlias = Any

A3_BOARD = 0xB0  # an Atlas A3 board id: the chips are A3 whatever their name
LINK_DOWN = 0x08520003  # ascend_switch_test.go linkDownAlarmID
COMMON_FAULT = 0x00F10509  # commonFaultAlarmID
LANE_FAULT = 132333  # laneFaultID
HALF_LANE_FAULT = 132332  # halfLaneFaultID
INVALID_PORT_FAULT = 155912  # invalidPortFaultID
ENGINE_ALARM = 0x00F103B6  # enginAlarmID
ENGINE_FAULT = 155909  # enginFaultID
CPU, NPU, L2 = 0, 1, 2  # PeerDeviceChipOrCpuPort, PeerDeviceNpuPort, PeerDeviceL2Port


# ---- ported: TestSetExtraFaultInfo (5 cases), TestIsFaultRecoveredEvent (2) ----------------------


@pytest.mark.parametrize(
    ("event_type", "sub_type", "peer", "switch_port_id", "code"),
    [
        # 01 SwitchPortFault, PortDown: no fault id
        (LINK_DOWN, INVALID_NUM, CPU, 0, "[0x08520003,na,cpu,na]"),
        # 02 PortLaneReduceQuarter towards an NPU
        (COMMON_FAULT, LANE_FAULT, NPU, 0, "[0x00f10509,132333,npu,na]"),
        # 03 PortLaneReduceHalf towards L2
        (COMMON_FAULT, HALF_LANE_FAULT, L2, 0, "[0x00f10509,132332,L2,na]"),
        # 04 not a port's fault (port id 0xFFFFFFFF): the peer is na whatever its type
        (COMMON_FAULT, INVALID_PORT_FAULT, L2, INVALID_NUM, "[0x00f10509,155912,na,na]"),
        # 05 an engine fault of the whole chip
        (ENGINE_ALARM, ENGINE_FAULT, L2, INVALID_NUM, "[0x00f103b6,155909,na,na]"),
    ],
    ids=["01-port-down", "02-lane-quarter", "03-lane-half", "04-not-a-port", "05-engine"],
)
def test_set_extra_fault_info(event_type: int, sub_type: int, peer: int, switch_port_id: int, code: str) -> None:
    assert assemble_fault_code(event_type, sub_type, peer, switch_port_id) == code


def _data(assertion: Assertion, **kw: int) -> SwitchFaultData:
    fields: dict[str, Any] = dict(
        event_type=LINK_DOWN, assembled_fault_code="[0x08520003,na,npu,na]", peer_port_device=NPU, peer_port_id=3,
        switch_chip_id=1, switch_port_id=7, severity=2, alarm_raised_time=1,
    )  # fmt: skip
    return SwitchFaultData(assertion=assertion, **{**fields, **kw})


def test_is_fault_recovered_event() -> None:
    # 01 a fault and its recovery
    assert is_fault_recovered_event(_data(Assertion.OCCUR), _data(Assertion.RECOVER))
    # 02 no recovery
    assert not is_fault_recovered_event(_data(Assertion.OCCUR), _data(Assertion.OCCUR))
    # (ours) a recovery of another port recovers nothing
    assert not is_fault_recovered_event(_data(Assertion.OCCUR), _data(Assertion.RECOVER, switch_port_id=8))


# ---- the binding over the double -------------------------------------------------------------


def test_struct_layout_matches_the_c_header(lingqu_double: Control) -> None:
    """Every offset the binding reads, as the C compiler lays out library.h's structs."""
    assert lingqu_double.layout("LqDcmiEvent") == ctypes.sizeof(LqDcmiEvent) == 112
    assert lingqu_double.layout("lq_dcmi_event_filter") == ctypes.sizeof(LqDcmiEventFilter)
    for field in ("subType", "peerportDevice", "switchPortid", "severity", "assertion", "eventSerialNum",
                  "alarmRaisedTime", "additionalParam", "additionalInfo"):  # fmt: skip
        assert lingqu_double.layout(f"LqDcmiEvent.{field}") == getattr(LqDcmiEvent, field).offset, field
    for field in ("severity", "chipId"):
        assert lingqu_double.layout(f"lq_dcmi_event_filter.{field}") == getattr(LqDcmiEventFilter, field).offset


def test_get_switch_faults_reads_every_field_and_leaves_recoveries_out(lingqu_double: Control) -> None:
    lingqu_double.add_fault(SwitchFault(LINK_DOWN, INVALID_NUM, NPU, 5, 2, 9, severity=3, alarm_ms=1_700_000_000_123))
    lingqu_double.add_fault(SwitchFault(COMMON_FAULT, LANE_FAULT, NPU, 1, 1, 2, assertion=0))  # a recovery
    lingqu_double.add_fault(SwitchFault(ENGINE_ALARM, ENGINE_FAULT, L2, 0, 3, 4, assertion=2))  # once
    lib = SwitchLibrary(lingqu_double.path, clock=lambda: 1234.5)
    lib.init()
    faults = lib.faults()
    assert faults == [
        SwitchFaultData(
            event_type=LINK_DOWN, assembled_fault_code="[0x08520003,na,npu,na]", peer_port_device=NPU,
            peer_port_id=5, switch_chip_id=2, switch_port_id=9, severity=3, assertion=Assertion.OCCUR,
            alarm_raised_time=1_700_000_000_123,
        ),
        # Every assertion but 0 is an occurrence to the reference; no alarm time: the read's time.
        SwitchFaultData(
            event_type=ENGINE_ALARM, assembled_fault_code="[0x00f103b6,155909,L2,na]", peer_port_device=L2,
            peer_port_id=0, switch_chip_id=3, switch_port_id=4, severity=1, assertion=Assertion.OCCUR,
            alarm_raised_time=1_234_500,
        ),
    ]  # fmt: skip
    assert lingqu_double.call_count("lq_dcmi_get_fault_info") == 1


def test_a_failing_call_raises_its_code(lingqu_double: Control) -> None:
    lib = SwitchLibrary(lingqu_double.path)
    lingqu_double.set_rc("lq_dcmi_init", -8005)
    with pytest.raises(DcmiError) as err:
        lib.init()
    assert (err.value.op, err.value.code) == ("lq_dcmi_init", -8005)
    lingqu_double.set_rc("lq_dcmi_init", 0)
    lib.init()
    lingqu_double.set_rc("lq_dcmi_get_fault_info", -8001)
    with pytest.raises(DcmiError) as err:
        lib.faults()
    assert (err.value.op, err.value.code) == ("lq_dcmi_get_fault_info", -8001)


def test_a_count_past_the_list_is_refused(lingqu_double: Control) -> None:
    lingqu_double.add_fault(SwitchFault(LINK_DOWN))
    lingqu_double.set_count(129)
    lib = SwitchLibrary(lingqu_double.path)
    lib.init()
    with pytest.raises(DcmiError, match="invalid switch fault count 129"):
        lib.faults()


def test_a_library_that_cannot_be_loaded_raises(tmp_path: Path) -> None:
    with pytest.raises(DcmiError, match="cannot load"):
        SwitchLibrary(tmp_path / "liblingqu-dcmi.so").init()


def test_the_callback_delivers_the_event_from_the_drivers_thread(lingqu_double: Control) -> None:
    got: list[RawFaultEvent | RawSwitchEvent] = []
    lib = SwitchLibrary(lingqu_double.path, clock=lambda: 10.0)
    lib.init()
    lib.subscribe(got.append)
    assert lingqu_double.subscribed()
    assert lingqu_double.fire(SwitchFault(COMMON_FAULT, LANE_FAULT, CPU, 2, 1, 6, severity=2)) == 0
    assert got == [
        RawSwitchEvent(
            logic_id=None,
            data=SwitchFaultData(
                event_type=COMMON_FAULT, assembled_fault_code="[0x00f10509,132333,cpu,na]", peer_port_device=CPU,
                peer_port_id=2, switch_chip_id=1, switch_port_id=6, severity=2, assertion=Assertion.OCCUR,
                alarm_raised_time=10_000,
            ),
        )
    ]  # fmt: skip
    lib.close()
    assert lingqu_double.fire(SwitchFault(COMMON_FAULT, LANE_FAULT)) == 0
    assert len(got) == 1, "a closed library drops late events"


# ---- the exporter: the switch task and the die policy -----------------------------------------


def a3(dcmi: Control) -> None:
    dcmi.set_int("board_id", -1, A3_BOARD)


async def start(dcmi: Control, tmp_path: Path, lingqu: Path | None, *, interval: float = 3600, **kw: Any) -> Exporter:
    settings = ExporterSettings(
        backend="dcmi",
        library=dcmi.path,
        socket=tmp_path / "sock",
        poll_period=0.1,
        call_timeout=0.3,
        hang_interval=3600,
        switch_library=lingqu if lingqu is not None else tmp_path / "none.so",
        switch_fault_interval=interval,
        **kw,
    )
    exp = Exporter.from_settings(settings)
    await exp.start()
    await until(lambda: exp.poller.snapshot.node.ready, what="the first read of every chip")
    return exp


@pytest.fixture
async def a3_exporter(dcmi_double: Control, lingqu_double: Control, tmp_path: Path) -> AsyncIterator[Exporter]:
    a3(dcmi_double)
    lingqu_double.add_fault(SwitchFault(LINK_DOWN, INVALID_NUM, NPU, 4, 1, 12, severity=3, alarm_ms=1_700_000_000_000))
    exp = await start(dcmi_double, tmp_path, lingqu_double.path)
    try:
        yield exp
    finally:
        await exp.stop()


def switch_events(exp: Exporter) -> list[SwitchFaultData]:
    return [e.item.switch_fault for e in exp.events.after(0) or [] if e.item.type is EventType.SWITCH_FAULT
            and e.item.switch_fault is not None]  # fmt: skip


async def test_an_a3_node_lists_the_librarys_switch_fault(a3_exporter: Exporter, lingqu_double: Control) -> None:
    exp = a3_exporter
    assert {c.family for c in exp.poller.snapshot.chips} == {ChipFamily.ASCEND910A3}
    node = await until(lambda: exp.poller.snapshot.node if exp.poller.snapshot.node.switch_faults else None)
    [fault] = node.model_dump()["switch_faults"]
    assert fault == {
        "event_type": LINK_DOWN, "assembled_fault_code": "[0x08520003,na,npu,na]", "peer_port_device": NPU,
        "peer_port_id": 4, "switch_chip_id": 1, "switch_port_id": 12, "severity": 3, "assertion": "occur",
        "alarm_raised_time": 1_700_000_000_000,
    }  # fmt: skip
    assert [e.assembled_fault_code for e in switch_events(exp)] == ["[0x08520003,na,npu,na]"]
    assert exp.switch is not None and exp.switch.subscribed and lingqu_double.subscribed()
    assert (lingqu_double.call_count("lq_dcmi_init"), lingqu_double.call_count("lq_dcmi_get_fault_info")) == (1, 1)

    # An event through the callback adds its fault; its recovery takes it away again.
    lane = SwitchFault(COMMON_FAULT, LANE_FAULT, NPU, 2, 0, 3)
    assert lingqu_double.fire(lane) == 0
    await until(lambda: len(exp.poller.switch_faults) == 2, what="the callback's fault listed")
    assert lingqu_double.fire(lane._replace(assertion=0)) == 0
    await until(lambda: len(exp.poller.switch_faults) == 1, what="the callback's recovery applied")

    # The library no longer holds the link-down: the next query publishes its recovery.
    lingqu_double.clear_faults()
    await exp.switch.tick()
    assert exp.poller.switch_faults == []
    last = switch_events(exp)[-1]
    assert (last.assembled_fault_code, last.assertion) == ("[0x08520003,na,npu,na]", Assertion.RECOVER)


async def test_update_switch_fault_code(a3_exporter: Exporter, lingqu_double: Control) -> None:
    """TestUpdateSwitchFaultCode: 01 a round with nothing known skips the query, 02 a query replaces
    what is known with what the library holds, 03 a failed query leaves it as it was."""
    exp = a3_exporter
    task = exp.switch
    assert task is not None
    await until(lambda: len(exp.poller.switch_faults) == 1)
    # 02: two known, the library holds one of them
    lingqu_double.fire(SwitchFault(COMMON_FAULT, LANE_FAULT, NPU, 2, 0, 3))
    await until(lambda: len(exp.poller.switch_faults) == 2)
    await task.tick()
    assert [f.assembled_fault_code for f in exp.poller.switch_faults] == ["[0x08520003,na,npu,na]"]
    # 03: the query fails, nothing changes
    lingqu_double.set_rc("lq_dcmi_get_fault_info", -8005)
    lingqu_double.clear_faults()
    await task.tick()
    assert len(exp.poller.switch_faults) == 1
    # 01: nothing known (and the subscription live): the round asks the library nothing
    lingqu_double.set_rc("lq_dcmi_get_fault_info", 0)
    await task.tick()
    assert exp.poller.switch_faults == []
    asked = lingqu_double.call_count("lq_dcmi_get_fault_info")
    await task.tick()
    assert lingqu_double.call_count("lq_dcmi_get_fault_info") == asked


async def test_a_hung_switch_call_costs_the_switch_its_round_and_no_chip_its_health(
    a3_exporter: Exporter, dcmi_double: Control, lingqu_double: Control
) -> None:
    exp = a3_exporter
    await until(lambda: len(exp.poller.switch_faults) == 1)
    dcmi_double.set_codes(1, [0x80E01801])
    await until(lambda: exp.poller.snapshot.by_logic[1].dynamic is not None
                and exp.poller.snapshot.by_logic[1].dynamic.error_codes.value == ["80E01801"])  # fmt: skip
    before = {c.logic_id: (c.state, c.healthy, c.network_healthy) for c in exp.poller.snapshot.chips}

    lingqu_double.hang("lq_dcmi_get_fault_info")
    assert exp.switch is not None
    round_started = time.time()
    await exp.switch.tick()  # returns after the call timeout, the call abandoned
    assert time.time() - round_started < 2.0
    assert lingqu_double.hanging() == 1
    assert exp.guard.hung_keys() == {SWITCH_KEY}
    assert len(exp.poller.switch_faults) == 1, "a hung query changes nothing"

    hung_at = time.time()
    await until(lambda: min(c.updated_at for c in exp.poller.snapshot.chips) > hung_at + 0.3,
                what="every chip read again while the switch call hangs")  # fmt: skip
    after = {c.logic_id: (c.state, c.healthy, c.network_healthy) for c in exp.poller.snapshot.chips}
    assert after == before and all(state is ChipState.OK for state, _, _ in after.values())
    chip1 = exp.poller.snapshot.by_logic[1].dynamic
    assert chip1 is not None and chip1.error_codes.value == ["80E01801"]

    # The next round fails fast while the call is out; once it returns, rounds query again.
    await exp.switch.tick()
    assert lingqu_double.call_count("lq_dcmi_get_fault_info") == 2
    lingqu_double.release()
    await until(lambda: not exp.guard.hung_keys(), what="the abandoned call returned")
    await exp.switch.tick()
    assert lingqu_double.call_count("lq_dcmi_get_fault_info") == 3


async def test_without_the_subscription_every_poll_period_queries(
    dcmi_double: Control, lingqu_double: Control, tmp_path: Path
) -> None:
    a3(dcmi_double)
    lingqu_double.set_rc("lq_dcmi_subscribe_fault_event", -8255)
    exp = await start(dcmi_double, tmp_path, lingqu_double.path)  # an hour between queries: the poll period rules
    try:
        task = exp.switch
        assert task is not None
        await until(lambda: task.watching and lingqu_double.call_count("lq_dcmi_subscribe_fault_event") == 3,
                    what="three subscription tries")  # fmt: skip
        assert not task.subscribed
        asked = lingqu_double.call_count("lq_dcmi_get_fault_info")
        await until(lambda: lingqu_double.call_count("lq_dcmi_get_fault_info") >= asked + 2,
                    what="rounds that query with no fault known")  # fmt: skip
        lingqu_double.add_fault(SwitchFault(COMMON_FAULT, LANE_FAULT, CPU))
        lane = "[0x00f10509,132333,cpu,na]"
        await until(lambda: [f.assembled_fault_code for f in exp.poller.switch_faults] == [lane])
    finally:
        await exp.stop()


async def test_switch_faults_are_watched_on_a3_nodes_only(
    dcmi_double: Control, lingqu_double: Control, tmp_path: Path
) -> None:
    exp = await start(dcmi_double, tmp_path, lingqu_double.path)
    try:
        assert ChipFamily.ASCEND910A3 not in {c.family for c in exp.poller.snapshot.chips}
        await asyncio.sleep(0.2)
        assert exp.switch is not None and not exp.switch.watching
        assert lingqu_double.call_count("lq_dcmi_init") == 0
    finally:
        await exp.stop()


async def test_a3_without_the_library_runs_on_without_switch_faults(
    dcmi_double: Control, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    a3(dcmi_double)
    with caplog.at_level(logging.WARNING, "dcmi_exporter.tasks.switch"):
        exp = await start(dcmi_double, tmp_path, None)
        try:
            await until(lambda: any("switch library unusable" in r.message for r in caplog.records))
            assert exp.switch is not None and not exp.switch.watching
            assert exp.poller.snapshot.node.switch_faults == []
            assert all(c.state is ChipState.OK for c in exp.poller.snapshot.chips)
        finally:
            await exp.stop()


# ---- the die policy: DoSetMultiDiePolicyForA3 --------------------------------------------------


@pytest.mark.parametrize(("single_die", "policy"), [(True, MULTI_DIE_INDEP), (False, MULTI_DIE_UNION)])
async def test_do_set_multi_die_policy_for_a3(
    dcmi_double: Control, tmp_path: Path, single_die: bool, policy: int
) -> None:
    a3(dcmi_double)
    exp = await start(dcmi_double, tmp_path, None, switch_faults=False, use_single_die_mode=single_die)
    try:
        await until(lambda: dcmi_double.die_policies() == [policy], what=f"dcmi_set_multi_die_policy({policy})")
    finally:
        await exp.stop()


async def test_no_die_policy_is_set_on_other_families(dcmi_double: Control, tmp_path: Path) -> None:
    exp = await start(dcmi_double, tmp_path, None, use_single_die_mode=True)
    try:
        await asyncio.sleep(0.3)
        assert dcmi_double.die_policies() == []
    finally:
        await exp.stop()


async def test_a_refused_die_policy_is_logged_and_the_exporter_goes_on(
    dcmi_double: Control, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    a3(dcmi_double)
    dcmi_double.set_rc("dcmi_set_multi_die_policy", -1, -8255)
    with caplog.at_level(logging.WARNING, "dcmi_exporter.tasks.die_policy"):
        exp = await start(dcmi_double, tmp_path, None, use_single_die_mode=True)
        try:
            await until(lambda: any("multi-die policy failed" in r.message for r in caplog.records))
            assert dcmi_double.die_policies() == [MULTI_DIE_INDEP]
            read = time.time()
            await until(lambda: min(c.updated_at for c in exp.poller.snapshot.chips) > read)
            assert all(c.state is ChipState.OK for c in exp.poller.snapshot.chips)
        finally:
            await exp.stop()


async def test_a_driver_without_the_die_policy_call_is_logged_and_the_exporter_goes_on(
    dcmi_double_nosub: Control, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    a3(dcmi_double_nosub)
    with caplog.at_level(logging.WARNING, "dcmi_exporter.tasks.die_policy"):
        exp = await start(dcmi_double_nosub, tmp_path, None, use_single_die_mode=True)
        try:
            [record] = await until(lambda: [r for r in caplog.records if "multi-die policy failed" in r.message])
            assert record.code == -8255  # type: ignore[attr-defined]
            assert all(c.state is ChipState.OK for c in exp.poller.snapshot.chips)
        finally:
            await exp.stop()


async def test_a_failing_query_is_logged_once_per_spell(
    dcmi_double: Control, lingqu_double: Control, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Without the subscription the query runs every poll period: its failure is one error line."""
    a3(dcmi_double)
    lingqu_double.set_rc("lq_dcmi_subscribe_fault_event", -8255)
    lingqu_double.set_rc("lq_dcmi_get_fault_info", -8005)
    with caplog.at_level(logging.INFO, "dcmi_exporter.tasks.switch"):
        exp = await start(dcmi_double, tmp_path, lingqu_double.path)
        try:
            await until(lambda: lingqu_double.call_count("lq_dcmi_get_fault_info") >= 4, what="four failed queries")
            failed = [r for r in caplog.records if r.message == "switch fault query failed"]
            assert [(r.levelno, r.code) for r in failed if r.levelno >= logging.ERROR] == [  # type: ignore[attr-defined]
                (logging.ERROR, -8005)
            ]
            lingqu_double.set_rc("lq_dcmi_get_fault_info", 0)
            await until(lambda: any(r.message == "switch fault query answers again" for r in caplog.records))
        finally:
            await exp.stop()
