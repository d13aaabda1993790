"""Scenario files: loading, validation errors that name the step, and timed runs."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from ascend_common.clock import ManualClock, SystemClock
from ascend_common.schemas.exporter import Assertion, ResetChannel
from dcmi_exporter.backends.base import RawFaultEvent, RawSwitchEvent
from dcmi_exporter.backends.errors import ResetFailed
from dcmi_exporter.backends.sim import SimBackend
from dcmi_exporter.backends.sim.scenario import Scenario, ScenarioError, ScenarioRunner, load_scenario, parse_scenario

from tests.support.waiting import WAIT_S, until

pytestmark = pytest.mark.timeout(60)

SCENARIO_DIR = Path(__file__).resolve().parents[1] / "scenarios"

Event = RawFaultEvent | RawSwitchEvent


@pytest.fixture
def cleanup() -> Iterator[list[SimBackend | ScenarioRunner]]:
    """Stop every runner and close every backend a test made, even when it fails."""
    things: list[SimBackend | ScenarioRunner] = []
    yield things
    for thing in reversed(things):
        if isinstance(thing, ScenarioRunner):
            assert thing.stop(timeout=WAIT_S), "scenario thread did not stop"
        else:
            thing.close()


# ----- loading ---------------------------------------------------------------------------


def test_sim_sample_scenarios_exist() -> None:
    names = {p.name for p in SCENARIO_DIR.glob("*.yaml")}
    assert {"link-flap.yaml", "restart-npu-reset.yaml"} <= names


@pytest.mark.parametrize("path", sorted(SCENARIO_DIR.glob("*.yaml")), ids=lambda p: p.name)
def test_sim_sample_scenarios_load_and_fit_the_default_profile(path: Path) -> None:
    scenario = load_scenario(path)
    assert scenario.name == path.stem
    backend = SimBackend("910b-8")
    ScenarioRunner(backend, scenario)  # checks chips and features; does not start


def test_sim_yaml_codes_keep_their_hex_digits() -> None:
    scenario = parse_scenario(
        """
name: codes
steps:
  - {at: 0, action: inject, chip: 1, code: 81078603}
  - {at: 1, action: once, chip: 1, code: 0x80e01801}
  - {at: 2, action: recover, chip: 1, code: "8c1fa006"}
  - {at: 3, action: burst, chip: 1, code: 110000002, count: 4}
"""
    )
    assert [getattr(s, "code", None) for s in scenario.steps] == ["81078603", "80E01801", "8C1FA006", "110000002"]
    assert [s.at for s in scenario.steps] == [0, 1, 2, 3]


BAD_SCENARIOS = [
    # yaml text, substrings the error must contain
    ("name: x\nsteps:\n  - {at: 0, action: explode, chip: 0}\n", ["steps[0]", "explode"]),
    ("name: x\nsteps:\n  - {at: 0, action: inject, chip: 0}\n", ["steps[0] (inject at 0s): code", "Field required"]),
    ("name: x\nsteps:\n  - {at: 0, action: once, chip: 0, code: zz}\n", ["steps[0]", "code", "invalid fault code"]),
    (
        "name: x\nsteps:\n  - {at: 0, action: inject, chip: 0, code: 80E01801}\n"
        "  - {at: 5, action: inject, chip: 0, code: 80E01801, sevrity: 3}\n",
        ["steps[1] (inject at 5s): sevrity", "Extra inputs"],
    ),
    ("name: x\nsteps:\n  - {at: -1, action: release}\n", ["steps[0] (release at -1s): at"]),
    ("name: x\nsteps:\n  - {at: 0, action: burst, chip: 0, code: 1, count: 0}\n", ["steps[0]", "count"]),
    (
        "name: x\nsteps:\n  - {at: 0, action: drop_card, chip: 0, card: 0}\n",
        ["steps[0]", "exactly one of card or chip"],
    ),
    ("name: x\nsteps:\n  - {at: 0, action: hang, chip: 0, seconds: 0}\n", ["steps[0]", "seconds"]),
    ("name: x\nsteps:\n  - {at: 0, action: inject, chip: 0, code: 1, persistent: maybe}\n", ["persistent"]),
    ("name: x\nsteps:\n  - {at: 0, action: fail_next_reset, chip: 0, mode: later}\n", ["steps[0]", "mode"]),
    ("name: x\nsteps:\n  - {at: 0, action: switch_fault, alarm_id: nope}\n", ["steps[0]", "alarm_id"]),
    (
        "name: x\nsteps:\n  - {at: 0, action: processes, chip: 0,"
        " processes: [{pid: 1, memory_mb: 1, memory_bytes: 1}]}\n",
        ["steps[0]", "memory_mb or memory_bytes"],
    ),
    ("name: x\nsteps: []\n", ["steps"]),
    ("steps:\n  - {at: 0, action: release}\n", ["name", "Field required"]),
    ("- just\n- a list\n", ["scenario"]),
    ("name: [unclosed\n", ["not valid YAML"]),
]


@pytest.mark.parametrize(("text", "expected"), BAD_SCENARIOS)
def test_sim_bad_scenarios_are_rejected_with_the_step_named(text: str, expected: list[str]) -> None:
    with pytest.raises(ScenarioError) as info:
        parse_scenario(text, "drill.yaml")
    message = str(info.value)
    assert message.startswith("drill.yaml")
    for part in expected:
        assert part in message, message


def test_sim_load_scenario_missing_file(tmp_path: Path) -> None:
    with pytest.raises(ScenarioError, match="cannot read"):
        load_scenario(tmp_path / "absent.yaml")


def test_sim_load_scenario_from_file(tmp_path: Path) -> None:
    path = tmp_path / "one.yaml"
    path.write_text("name: one\nsteps:\n  - {at: 0.5, action: network_down, chip: 2}\n", encoding="utf-8")
    scenario = load_scenario(path)
    assert scenario.name == "one"
    assert scenario.steps[0].action == "network_down"


@pytest.mark.parametrize(
    ("profile", "steps", "expected"),
    [
        (
            "910b-8",
            [{"at": 0, "action": "inject", "chip": 8, "code": "1"}],
            "steps[0] (inject at 0s): unknown logic id 8",
        ),
        ("910b-8", [{"at": 0, "action": "drop_card", "card": 8}], "unknown card id 8"),
        ("910b-8", [{"at": 3, "action": "switch_fault", "alarm_id": 1}], "steps[0] (switch_fault at 3s)"),
        ("310p-4", [{"at": 0, "action": "network_down", "chip": 0}], "no chip network"),
        ("310p-4", [{"at": 0, "action": "release"}, {"at": 1, "action": "hang", "chip": 4}], "steps[1] (hang at 1s)"),
    ],
)
def test_sim_runner_rejects_steps_that_do_not_fit_the_node(
    profile: str, steps: list[dict[str, Any]], expected: str
) -> None:
    scenario = Scenario.parse({"name": "misfit", "steps": steps})
    with pytest.raises(ScenarioError) as info:
        ScenarioRunner(SimBackend(profile), scenario)
    assert expected in str(info.value)
    assert profile in str(info.value)


# ----- running ---------------------------------------------------------------------------


def test_sim_link_flap_runs_at_high_time_scale(cleanup: list[SimBackend | ScenarioRunner]) -> None:
    backend = SimBackend("910b-8", clock=SystemClock(time_scale=1000.0))
    cleanup.append(backend)
    events: list[Event] = []
    lock = threading.Lock()

    def sink(event: Event) -> None:
        with lock:
            events.append(event)

    backend.subscribe(sink)
    scenario = load_scenario(SCENARIO_DIR / "link-flap.yaml")
    runner = ScenarioRunner(backend, scenario)
    cleanup.append(runner)
    runner.start()
    assert runner.wait(WAIT_S), "scenario did not finish"
    assert runner.done
    ran = runner.ran
    assert [r.index for r in ran] == list(range(len(scenario.steps)))
    assert all(r.ok for r in ran), ran
    with lock:
        got = [(e.code, e.assertion) for e in events if isinstance(e, RawFaultEvent)]
    downs = sum(1 for s in scenario.steps if s.action == "network_down")
    assert got == [("81078603", Assertion.OCCUR), ("81078603", Assertion.RECOVER)] * downs
    chip0 = next(c for c in backend.discover() if c.logic_id == 0)
    assert backend.read_dynamic(chip0).network_health.value == 0


def test_sim_restart_npu_drill_runs(cleanup: list[SimBackend | ScenarioRunner]) -> None:
    backend = SimBackend("910b-8", clock=SystemClock(time_scale=1000.0))
    cleanup.append(backend)
    runner = ScenarioRunner(backend, load_scenario(SCENARIO_DIR / "restart-npu-reset.yaml"))
    cleanup.append(runner)
    runner.start()
    assert runner.wait(WAIT_S)
    assert runner.done
    assert all(r.ok for r in runner.ran), runner.ran
    chips = {c.logic_id: c for c in backend.discover()}
    assert backend.read_dynamic(chips[2]).error_codes.value == ["8C1FA006"]
    with pytest.raises(ResetFailed):
        backend.reset(chips[2], ResetChannel.INBAND)
    backend.reset(chips[2], ResetChannel.INBAND)
    backend.reset(chips[3], ResetChannel.INBAND)
    assert backend.read_dynamic(chips[2]).error_codes.value == []
    assert backend.read_dynamic(chips[3]).error_codes.value == ["80E18402"]  # persistent
    backend.read_dynamic(chips[6])  # card restored


async def test_sim_runner_follows_a_manual_clock(cleanup: list[SimBackend | ScenarioRunner]) -> None:
    clock = ManualClock(time_scale=2.0)
    backend = SimBackend("a3-16", clock=clock)
    cleanup.append(backend)
    scenario = Scenario.parse(
        {
            "name": "manual",
            "steps": [
                {"at": 20, "action": "recover", "chip": 5, "code": "80E01801"},
                {"at": 0, "action": "inject", "chip": 5, "code": "80E01801"},
                {"at": 10, "action": "switch_fault", "alarm_id": "0x00f1fef5", "fault_id": 155913, "position": "npu"},
            ],
        }
    )
    runner = ScenarioRunner(backend, scenario, clock)
    cleanup.append(runner)
    runner.start()
    await until(lambda: len(runner.ran) == 1, what="the step at 0 s")
    await asyncio.sleep(0.2)  # the behaviour under test: real time passes, the manual clock does not
    assert [r.index for r in runner.ran] == [1]  # the clock has not moved
    clock.advance(5.0)  # sim 10 s at time scale 2
    await until(lambda: len(runner.ran) == 2, what="the step at 10 s")
    assert backend.active_switch_faults()[0].assembled_fault_code == "[0x00f1fef5,155913,npu,na]"
    clock.advance(5.0)
    assert runner.wait(WAIT_S)
    assert runner.done
    assert [r.index for r in runner.ran] == [1, 2, 0]
    chip5 = next(c for c in backend.discover() if c.logic_id == 5)
    assert backend.read_dynamic(chip5).error_codes.value == []


async def test_sim_runner_stops_early(cleanup: list[SimBackend | ScenarioRunner]) -> None:
    backend = SimBackend("910b-8")
    cleanup.append(backend)
    scenario = Scenario.parse(
        {
            "name": "long",
            "steps": [
                {"at": 0, "action": "hang", "chip": 1},
                {"at": 3600, "action": "release", "chip": 1},
            ],
        }
    )
    runner = ScenarioRunner(backend, scenario)
    cleanup.append(runner)
    runner.start()
    await until(lambda: len(runner.ran) == 1, what="the hang step")
    assert backend.is_hung(1)
    assert runner.stop(timeout=WAIT_S)
    assert [r.action for r in runner.ran] == ["hang"]
    assert not runner.done
    with pytest.raises(RuntimeError):
        runner.start()


def test_sim_runner_records_a_failing_step_and_goes_on(cleanup: list[SimBackend | ScenarioRunner]) -> None:
    backend = SimBackend("910b-8", clock=SystemClock(time_scale=1000.0))
    cleanup.append(backend)
    scenario = Scenario.parse(
        {
            "name": "partly-bad",
            "steps": [
                # duplicate pids pass the file check but the backend refuses them
                {"at": 0, "action": "processes", "chip": 0, "processes": [{"pid": 5}, {"pid": 5}]},
                {"at": 1, "action": "once", "chip": 0, "code": "80E01801"},
                {"at": 2, "action": "drop_card", "chip": 7},
                {"at": 3, "action": "hang", "chip": 2, "seconds": 1},
                {"at": 4, "action": "fail_next_reset", "chip": 3, "mode": "stuck"},
                {"at": 5, "action": "release"},
            ],
        }
    )
    with ScenarioRunner(backend, scenario) as runner:
        cleanup.append(runner)
        assert runner.wait(WAIT_S)
    ran = runner.ran
    assert [r.ok for r in ran] == [False, True, True, True, True, True]
    assert ran[0].error is not None
    assert "duplicate pid" in ran[0].error
    assert not backend.is_hung(2)
    chip7 = next(c for c in backend.discover() if c.logic_id == 7)
    with pytest.raises(Exception, match="not ready"):
        backend.read_dynamic(chip7)
