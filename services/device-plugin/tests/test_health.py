"""The health rule: verdicts decide; without the fault-manager only worse, never better."""

from __future__ import annotations

import pytest
from ascend_common.faults import FaultLevel, default_fault_code_table
from ascend_common.schemas.exporter import Chip, ChipDynamic, ChipState, ChipStatic
from ascend_common.schemas.reading import Reading
from ascend_common.schemas.verdict import ChipVerdict, VerdictReason
from ascend_device_plugin.resources.health import HealthSource, decide

TABLE = default_fault_code_table()


def chip(state: ChipState = ChipState.OK, codes: list[str] | None = None, healthy: bool | None = True) -> Chip:
    err = Reading[int].error(-8255)
    static = ChipStatic(
        chip_type=Reading[str].ok("Ascend"),
        chip_name=Reading[str].ok("910B3"),
        chip_version=Reading[str].ok("V1"),
        aicore=Reading[int].ok(20),
        board_id=Reading[int].ok(0x22),
        product_type=Reading[str].ok(""),
        partner_card=err,
        numa_node=Reading[int].ok(0),
        device_ip=Reading[str].ok("1.1.1.1"),
    )
    dynamic = ChipDynamic(
        health=Reading[int].ok(0),
        error_codes=Reading[list[str]].ok(codes or []),
        network_health=Reading[int].ok(0),
        hbm=Reading.error(-8255),
        temperature_c=err,
        power_w=Reading.error(-8255),
        utilization=Reading.error(-8255),
        processes=Reading.ok([]),
        boot_status=Reading[int].ok(16),
        vnpus=Reading.ok([]),
    )
    return Chip(
        logic_id=0, phy_id=0, card_id=0, device_id=0, name="Ascend910-0", family="Ascend910B",
        resource_type="Ascend910", state=state, healthy=healthy, network_healthy=True, static=static,
        dynamic=dynamic, updated_at=1.0,
    )  # fmt: skip


def verdict(ok: bool, level: FaultLevel = FaultLevel.NORMAL_NPU) -> ChipVerdict:
    return ChipVerdict(
        chip="Ascend910-0", logic_id=0, phy_id=0, fault_level=level, schedulable=ok,
        reason=VerdictReason.FAULT_CODE, since=0.0,
    )  # fmt: skip


RESTART_NPU = "8C1FA006"  # a RestartNPU code of the reference table
NOT_HANDLE = "80E21007"
PRE_SEPARATE = "8118043C"
FREE_RESTART = "8C0E4E00"
PRE_SEP, FREE, LAST = FaultLevel.PRE_SEPARATE_NPU, FaultLevel.FREE_RESTART_NPU, HealthSource.LAST_VERDICT


@pytest.mark.parametrize(
    ("c", "v", "connected", "in_use", "healthy", "source"),
    [
        (chip(), None, False, False, True, HealthSource.CODE_POLICY),
        (chip(codes=[NOT_HANDLE]), None, False, False, True, HealthSource.CODE_POLICY),
        (chip(codes=[RESTART_NPU]), None, False, False, False, HealthSource.CODE_POLICY),
        (chip(healthy=False), None, False, False, False, HealthSource.CODE_POLICY),
        (chip(ChipState.UNKNOWN), verdict(True), True, False, False, HealthSource.EXPORTER),
        (chip(ChipState.CARD_DROP), None, False, False, False, HealthSource.EXPORTER),
        # Connected: the verdict decides, in both directions.
        (chip(codes=[RESTART_NPU]), verdict(True), True, False, True, HealthSource.VERDICT),
        (chip(), verdict(False, FaultLevel.SEPARATE_NPU), True, False, False, HealthSource.VERDICT),
        # Disconnected: an isolated chip stays isolated even with no codes left...
        (chip(), verdict(False, FaultLevel.MANUALLY_SEPARATE_NPU), False, False, False, HealthSource.LAST_VERDICT),
        # ...and a schedulable one can only get worse.
        (chip(codes=[RESTART_NPU]), verdict(True), False, False, False, HealthSource.LAST_VERDICT),
        (chip(), verdict(True), False, False, True, HealthSource.LAST_VERDICT),
        # In use for health: a PreSeparateNPU chip stays Healthy for the pod that uses it...
        (chip(codes=[PRE_SEPARATE]), None, False, True, True, HealthSource.CODE_POLICY),
        (chip(codes=[PRE_SEPARATE]), None, False, False, False, HealthSource.CODE_POLICY),
        (chip(codes=[PRE_SEPARATE]), verdict(True, PRE_SEP), False, True, True, LAST),
        # ...a FreeRestartNPU one only with GraceToleranceOn, which the plugin knows from the last verdict.
        (chip(codes=[FREE_RESTART]), None, False, True, False, HealthSource.CODE_POLICY),
        (chip(codes=[FREE_RESTART]), verdict(True, FREE), False, True, True, LAST),
        (chip(codes=[FREE_RESTART]), verdict(True, FREE), False, False, False, LAST),
        (chip(codes=[FREE_RESTART]), verdict(False, FREE), False, True, False, LAST),
    ],
)
def test_decide(
    c: Chip, v: ChipVerdict | None, connected: bool, in_use: bool, healthy: bool, source: HealthSource
) -> None:
    decision = decide(c, v, connected, TABLE, in_use)
    assert (decision.healthy, decision.source) == (healthy, source)
    assert decision.reason


@pytest.mark.parametrize(
    ("c", "v", "connected", "fault"),
    [
        pytest.param(chip(), None, False, "", id="healthy: none"),
        pytest.param(chip(codes=[RESTART_NPU]), None, False, "RestartNPU", id="codes: their level"),
        pytest.param(chip(healthy=False), None, False, "library_unhealthy", id="library without a code"),
        pytest.param(chip(ChipState.CARD_DROP), None, False, "card_drop", id="exporter: its state"),
        pytest.param(chip(ChipState.UNKNOWN), verdict(True), True, "unknown", id="exporter before the verdict"),
        pytest.param(chip(), verdict(False, FaultLevel.SEPARATE_NPU), True, "SeparateNPU", id="verdict: its level"),
        pytest.param(chip(codes=[RESTART_NPU]), verdict(True), True, "", id="verdict schedulable: none"),
        pytest.param(chip(), verdict(False, FaultLevel.MANUALLY_SEPARATE_NPU), False, "ManuallySeparateNPU",
                     id="last verdict isolates"),
        pytest.param(chip(codes=[RESTART_NPU]), verdict(True), False, "RestartNPU", id="last verdict, worse codes"),
    ],
)  # fmt: skip
def test_an_unhealthy_decision_says_why_in_one_word(
    c: Chip, v: ChipVerdict | None, connected: bool, fault: str
) -> None:
    # The value of the chip's DRA taint (dra.slice_devices.unhealthy_taint): a label value, empty when healthy.
    decision = decide(c, v, connected, TABLE, False)
    assert decision.fault == fault
    assert decision.healthy == (fault == "")
