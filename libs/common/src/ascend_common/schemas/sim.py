"""Request bodies of the simulator's control API (`/v1/sim/...`, scope `sim`)."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field

from ascend_common.schemas.exporter import MAX_BURST, Assertion

FaultCode = Annotated[str, Field(pattern=r"^(0[xX])?[0-9A-Fa-f]{1,9}$", description="hex fault code, up to 9 digits")]
Severity = Annotated[int, Field(ge=0, le=3, description="0 warning .. 3 critical")]


class Body(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class InjectFault(Body):
    code: FaultCode
    assertion: Assertion = Assertion.OCCUR
    severity: Severity = 2
    persistent: bool = Field(False, description="survives a successful reset")


class Burst(Body):
    code: FaultCode
    count: Annotated[int, Field(ge=1, le=MAX_BURST)]
    mode: Literal["flap", "once"] = "flap"
    severity: Severity = 2


class CardDrop(Body):
    dropped: bool = True


class NetworkState(Body):
    healthy: bool
    event: bool = Field(True, description="false: the driver's link event (81078603) is lost, no code is listed")


class UbPort(Body):
    """A 950 port as `hccn_tool -g -dev_info` / `-port_info` shows it."""

    kind: Literal["UB", "ETH"] = Field(description="UB: hyper plane; ETH: a UBoE bonding port")
    up: bool
    enabled: bool = Field(True, description="port_enable on (wired); an unwired UB port never counts")
    event: bool = Field(True, description="false: the driver's event is lost (the exporter must find it)")


class Hang(Body):
    seconds: Annotated[float, Field(gt=0, le=3600)] | None = Field(None, description="None: until released")


class SimProcess(Body):
    pid: Annotated[int, Field(ge=1, le=4_194_304)]
    memory_bytes: Annotated[int, Field(ge=0, le=1 << 40)] = 0


class Processes(Body):
    processes: Annotated[list[SimProcess], Field(max_length=64)]


class IdleJob(Body):
    """A hung job: these pids hold the chip, AI core 0, network counters and CPU time still."""

    pids: Annotated[list[Annotated[int, Field(ge=1, le=4_194_304)]], Field(min_length=1, max_length=32)]


class ResetFailure(Body):
    mode: Literal["error", "stuck"] = "error"
    code: Annotated[int, Field(ge=-8255, le=-8001)] = -8015


class SwitchFault(Body):
    alarm_id: Annotated[int, Field(ge=0, le=0xFFFFFFFF)]
    fault_id: Annotated[int, Field(ge=0, le=0xFFFFFFFF)] | None = None
    position: Literal["cpu", "npu", "L2", "na"] = "na"
    switch_chip_id: Annotated[int, Field(ge=0, le=255)] = 0
    switch_port_id: Annotated[int, Field(ge=0, le=255)] = 0
    assertion: Assertion = Assertion.OCCUR
    severity: Severity = 2
