"""Scripted fault scenarios for the simulator: a YAML file of timed steps.

    name: link-flap
    steps:
      - {at: 0, action: network_down, chip: 0}
      - {at: 5, action: network_up, chip: 0}

Each step runs `at / time_scale` real seconds after the runner starts. Validation happens
twice, both times before anything runs: the file's shape (`load_scenario`, pydantic) and its
fit to the node (`ScenarioRunner`: chips, cards, features of the profile). Errors name the step
as `steps[<index>] (<action> at <at>s)`.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Annotated, Literal

import yaml
from ascend_common.clock import Clock
from ascend_common.schemas.exporter import MAX_BURST
from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationError, model_validator

from dcmi_exporter.backends.errors import RC_RESET_FAILED
from dcmi_exporter.backends.sim.backend import SimBackend
from dcmi_exporter.backends.sim.faults import normalise_code, parse_alarm_id

log = logging.getLogger(__name__)

WAIT_SLICE_S = 0.1  # the runner re-reads the clock this often (a ManualClock moves without notice)


class ScenarioError(ValueError):
    """A scenario that cannot run: bad YAML, a bad step, or a step that does not fit the node."""


def _code(value: object) -> str:
    if isinstance(value, str | int):
        return normalise_code(value)
    raise ValueError(f"invalid fault code {value!r}")


def _alarm(value: object) -> str:
    if isinstance(value, str | int):
        return f"0x{parse_alarm_id(value):08x}"
    raise ValueError(f"invalid switch alarm id {value!r}")


Code = Annotated[str, BeforeValidator(_code)]
AlarmId = Annotated[str, BeforeValidator(_alarm)]
Severity = Annotated[int, Field(ge=0, le=3)]
Id = Annotated[int, Field(ge=0)]


class _Step(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    at: float = Field(ge=0, allow_inf_nan=False, description="Seconds after the start (divided by the time scale).")


class _ChipStep(_Step):
    chip: Id = Field(description="Logic id of the chip.")


class InjectStep(_ChipStep):
    action: Literal["inject"]
    code: Code
    severity: Severity = 2
    persistent: bool = False  # survives a successful reset


class RecoverStep(_ChipStep):
    action: Literal["recover"]
    code: Code
    severity: Severity = 2


class OnceStep(_ChipStep):
    action: Literal["once"]
    code: Code
    severity: Severity = 2


class BurstStep(_ChipStep):
    action: Literal["burst"]
    code: Code
    count: Annotated[int, Field(ge=1, le=MAX_BURST)]
    mode: Literal["flap", "once"] = "flap"
    severity: Severity = 2


class CardStep(_Step):
    """drop_card / restore_card: name the card, or a chip whose card is meant."""

    action: Literal["drop_card", "restore_card"]
    card: Id | None = None
    chip: Id | None = None

    @model_validator(mode="after")
    def _one_target(self) -> CardStep:
        if (self.card is None) == (self.chip is None):
            raise ValueError("give exactly one of card or chip")
        return self


class NetworkStep(_ChipStep):
    action: Literal["network_down", "network_up"]


class UbPortStep(_ChipStep):
    """A 950 port as hccn_tool shows it (`SimBackend.set_ub_port`)."""

    action: Literal["ub_port_down", "ub_port_up"]
    udie: int = Field(0, ge=0, le=15)
    port: int = Field(ge=0, le=63)
    kind: Literal["UB", "ETH"] = "UB"
    enabled: bool = Field(True, description="port_enable on (wired)")
    event: bool = Field(True, description="false: the driver's event is lost")


class HangStep(_ChipStep):
    action: Literal["hang"]
    seconds: Annotated[float, Field(gt=0, allow_inf_nan=False)] | None = None  # None: until released


class ReleaseStep(_Step):
    action: Literal["release"]
    chip: Id | None = None  # None: every chip


class ProcessSpec(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    pid: Annotated[int, Field(gt=0)]
    memory_mb: Annotated[int, Field(ge=0)] | None = None
    memory_bytes: Annotated[int, Field(ge=0)] | None = None

    @model_validator(mode="after")
    def _one_size(self) -> ProcessSpec:
        if self.memory_mb is not None and self.memory_bytes is not None:
            raise ValueError("give memory_mb or memory_bytes, not both")
        return self

    @property
    def bytes(self) -> int:
        if self.memory_bytes is not None:
            return self.memory_bytes
        return (self.memory_mb or 0) * 1024 * 1024


class ProcessesStep(_ChipStep):
    action: Literal["processes"]
    processes: list[ProcessSpec] = Field(default_factory=list, max_length=32)  # empty: the chip goes idle


class FailResetStep(_ChipStep):
    action: Literal["fail_next_reset"]
    mode: Literal["error", "stuck"] = "error"
    code: Annotated[int, Field(lt=0)] = RC_RESET_FAILED


class SwitchFaultStep(_Step):
    action: Literal["switch_fault"]
    chip: Id | None = None
    alarm_id: AlarmId
    fault_id: Id | None = None
    position: Literal["cpu", "npu", "L2", "na"] = "na"
    assertion: Literal["occur", "recover", "once"] = "occur"
    severity: Severity = 2
    switch_chip_id: Id = 0
    switch_port_id: Id = 0
    peer_port_device: Id = 0
    peer_port_id: Id = 0
    event_type: Id = 0


Step = Annotated[
    InjectStep
    | RecoverStep
    | OnceStep
    | BurstStep
    | CardStep
    | NetworkStep
    | UbPortStep
    | HangStep
    | ReleaseStep
    | ProcessesStep
    | FailResetStep
    | SwitchFaultStep,
    Field(discriminator="action"),
]


class Scenario(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    name: Annotated[str, Field(min_length=1, max_length=128)]
    description: str = ""
    steps: Annotated[list[Step], Field(min_length=1)]

    @classmethod
    def parse(cls, data: object, source: str = "scenario") -> Scenario:
        """Validate loaded data; ScenarioError with one line per problem, naming the step."""
        try:
            return cls.model_validate(data)
        except ValidationError as exc:
            raise ScenarioError(f"{source}: invalid scenario\n" + _describe(exc, data)) from None


def _step_label(index: int, raw: object) -> str:
    if isinstance(raw, dict):
        return f"steps[{index}] ({raw.get('action', '?')} at {raw.get('at', '?')}s)"
    return f"steps[{index}]"


def _describe(exc: ValidationError, data: object) -> str:
    raw_steps = data.get("steps") if isinstance(data, dict) else None
    lines = []
    for err in exc.errors():
        loc = list(err["loc"])
        if len(loc) >= 2 and loc[0] == "steps" and isinstance(loc[1], int):
            index = loc[1]
            raw = raw_steps[index] if isinstance(raw_steps, list) and index < len(raw_steps) else None
            rest = loc[2:]
            if rest and isinstance(raw, dict) and rest[0] == raw.get("action"):
                rest = rest[1:]  # pydantic puts the discriminator's value in the location
            where = _step_label(index, raw) + (f": {'.'.join(map(str, rest))}" if rest else "")
        else:
            where = ".".join(map(str, loc)) or "scenario"
        lines.append(f"  {where}: {err['msg']}")
    return "\n".join(lines)


class _TextIntLoader(yaml.SafeLoader):
    """SafeLoader that leaves integers as text.

    Fault codes are hex: YAML would read `81078603` as a decimal int and `0x80E01801` as a
    number too, losing the digits the author wrote. Pydantic turns the text back into ints for
    the numeric fields, so only the codes see a difference.
    """


_TextIntLoader.yaml_implicit_resolvers = {
    first: [(tag, rx) for tag, rx in resolvers if tag != "tag:yaml.org,2002:int"]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}


def parse_scenario(text: str, source: str = "scenario") -> Scenario:
    try:
        data = yaml.load(text, Loader=_TextIntLoader)  # a SafeLoader subclass: no arbitrary objects
    except yaml.YAMLError as exc:
        raise ScenarioError(f"{source}: not valid YAML: {exc}") from None
    return Scenario.parse(data, source)


def load_scenario(path: str | Path) -> Scenario:
    """Read and validate a scenario file; ScenarioError (a ValueError) when it is unusable."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as exc:
        raise ScenarioError(f"{p}: cannot read scenario: {exc.strerror or exc}") from None
    return parse_scenario(text, str(p))


@dataclass(frozen=True)
class StepResult:
    index: int  # position in the scenario file
    action: str
    at: float  # scheduled sim seconds
    ran_after_s: float  # clock seconds after the runner started
    error: str | None = None  # the step raised (e.g. a chip call that the node refused)

    @property
    def ok(self) -> bool:
        return self.error is None


class ScenarioRunner:
    """Run a scenario's steps on a daemon thread; `stop()` ends it early."""

    def __init__(self, backend: SimBackend, scenario: Scenario, clock: Clock | None = None) -> None:
        self.backend = backend
        self.scenario = scenario
        self.clock: Clock = clock if clock is not None else backend.clock
        check_fits(backend, scenario)
        # Stable sort: steps with one `at` run in file order.
        self._plan = sorted(enumerate(scenario.steps), key=lambda item: item[1].at)
        self._stop = threading.Event()
        self._finished = threading.Event()
        self._lock = threading.Lock()
        self._ran: list[StepResult] = []
        self._thread: threading.Thread | None = None
        self._started_at = 0.0

    @property
    def ran(self) -> list[StepResult]:
        """The steps that ran so far, in the order they ran."""
        with self._lock:
            return list(self._ran)

    @property
    def done(self) -> bool:
        """True once every step ran (False when stopped early)."""
        return self._finished.is_set() and len(self.ran) == len(self._plan)

    def start(self) -> None:
        if self._thread is not None:
            raise RuntimeError("scenario runner already started")
        self._started_at = self.clock.monotonic()
        self._thread = threading.Thread(target=self._run, name=f"sim-scenario-{self.scenario.name}", daemon=True)
        self._thread.start()

    def wait(self, timeout: float) -> bool:
        """Wait up to `timeout` real seconds for the runner to finish; True when it did."""
        return self._finished.wait(timeout)

    def stop(self, timeout: float = 5.0) -> bool:
        """Stop before the next step and join the thread; True when the thread ended."""
        self._stop.set()
        thread = self._thread
        if thread is None:
            return True
        thread.join(timeout)
        return not thread.is_alive()

    def __enter__(self) -> ScenarioRunner:
        self.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    def _run(self) -> None:
        try:
            for index, step in self._plan:
                if not self._sleep_until(self._started_at + step.at / self.clock.time_scale):
                    return
                error: str | None = None
                try:
                    apply_step(self.backend, step)
                except Exception as exc:  # one failing step must not end the drill
                    error = f"{type(exc).__name__}: {exc}"
                    log.warning("scenario step failed", extra={"scenario": self.scenario.name, "step": index})
                result = StepResult(index, step.action, step.at, self.clock.monotonic() - self._started_at, error)
                with self._lock:
                    self._ran.append(result)
        finally:
            self._finished.set()

    def _sleep_until(self, deadline: float) -> bool:
        """False when stopped first."""
        while not self._stop.is_set():
            remaining = deadline - self.clock.monotonic()
            if remaining <= 0:
                return True
            self._stop.wait(min(remaining, WAIT_SLICE_S))
        return False


def check_fits(backend: SimBackend, scenario: Scenario) -> None:
    """Every chip and card exists and the profile has the features the steps use."""
    problems: list[str] = []
    for index, step in enumerate(scenario.steps):
        label = f"steps[{index}] ({step.action} at {step.at:g}s)"
        chip = getattr(step, "chip", None)
        try:
            if chip is not None:
                backend.card_of(chip)
            if isinstance(step, CardStep) and step.card is not None:
                backend.check_card(step.card)
            if isinstance(step, SwitchFaultStep) and not backend.layout.switch_faults:
                raise ValueError(f"profile {backend.layout.name} has no switch")
            if isinstance(step, NetworkStep) and not backend.layout.has_network:
                raise ValueError(f"profile {backend.layout.name} has no chip network")
            if isinstance(step, UbPortStep) and not backend.layout.library_v2:
                raise ValueError(f"profile {backend.layout.name} has no UB ports")
        except (KeyError, ValueError) as exc:
            problems.append(f"  {label}: {exc.args[0] if exc.args else exc}")
    if problems:
        head = f"scenario {scenario.name!r} does not fit profile {backend.layout.name}"
        raise ScenarioError(head + "\n" + "\n".join(problems))


def apply_step(backend: SimBackend, step: _Step) -> None:
    """Perform one step on the backend (raises what the backend raises)."""
    b = backend
    match step:
        case InjectStep():
            b.inject_fault(step.chip, step.code, "occur", severity=step.severity, persistent=step.persistent)
        case RecoverStep():
            b.inject_fault(step.chip, step.code, "recover", severity=step.severity)
        case OnceStep():
            b.inject_fault(step.chip, step.code, "once", severity=step.severity)
        case BurstStep():
            b.burst(step.chip, step.code, step.count, mode=step.mode, severity=step.severity)
        case CardStep():
            card = step.card
            if card is None:
                assert step.chip is not None  # the model requires exactly one of card and chip
                card = b.card_of(step.chip)
            b.drop_card(card, dropped=step.action == "drop_card")
        case NetworkStep():
            b.set_network(step.chip, healthy=step.action == "network_up")
        case UbPortStep():
            up = step.action == "ub_port_up"
            b.set_ub_port(step.chip, step.udie, step.port, step.kind, up, enabled=step.enabled, event=step.event)
        case HangStep():
            b.hang(step.chip, step.seconds)
        case ReleaseStep():
            if step.chip is None:
                b.release_all()
            else:
                b.release(step.chip)
        case ProcessesStep():
            b.set_processes(step.chip, [(p.pid, p.bytes) for p in step.processes])
        case FailResetStep():
            b.fail_next_reset(step.chip, mode=step.mode, code=step.code)
        case SwitchFaultStep():
            b.switch_fault(
                step.alarm_id,
                fault_id=step.fault_id,
                position=step.position,
                assertion=step.assertion,
                severity=step.severity,
                switch_chip_id=step.switch_chip_id,
                switch_port_id=step.switch_port_id,
                peer_port_device=step.peer_port_device,
                peer_port_id=step.peer_port_id,
                event_type=step.event_type,
                logic_id=step.chip,
            )
        case _:
            raise TypeError(f"no handler for {type(step).__name__}")
