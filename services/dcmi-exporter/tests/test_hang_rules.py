"""Hung-job detection, the pure core: issue 24's "Must show" tables, and the reference's
hang_detector_test.go / hang_config_test.go tables, named after the Go tests they come from."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

import pytest
from dcmi_exporter.backends.dcmi import procstat
from dcmi_exporter.tasks.hang_rule import HangConfig, HangState, Sample, Transition, condition_met, step

BASE = Sample(pids=(42,), aicore=3, hbm=40, traffic=(1000, 500), cpu=7)
DEFAULT = HangConfig()


def run(samples: Sequence[Sample | None], cfg: HangConfig = DEFAULT) -> list[Transition | None]:
    """The transition after each sample, from a fresh state."""
    state, out = HangState(), []
    for sample in samples:
        state, transition = step(state, sample, cfg)
        out.append(transition)
    return out


def at(transitions: list[Transition | None], kind: Transition) -> list[int]:
    """1-based sample numbers at which `kind` happened."""
    return [i + 1 for i, t in enumerate(transitions) if t == kind]


# ---------------------------------------------------------------------- occur and recover


def test_occur_exactly_at_sample_6_then_recover_at_7() -> None:
    out = run([BASE] * 6 + [replace(BASE, aicore=10)])
    assert at(out, "occur") == [6]
    assert at(out, "recover") == [7]


def test_detect_duration_1_occurs_at_sample_2() -> None:
    out = run([BASE] * 3, replace(DEFAULT, detect_duration=1))
    assert at(out, "occur") == [2]
    assert at(out, "recover") == []


def test_a_fault_is_raised_once_while_the_job_stays_idle() -> None:
    out = run([BASE] * 12)
    assert at(out, "occur") == [6] and at(out, "recover") == []


# ---------------------------------------------------------------------- boundaries


@pytest.mark.parametrize(
    ("name", "now", "met"),
    [
        ("aicore 4 met", replace(BASE, aicore=4), True),
        ("aicore 5 not", replace(BASE, aicore=5), False),
        ("hbm 40->40 met", replace(BASE, hbm=40), True),
        ("hbm 40->37 met", replace(BASE, hbm=37), True),
        ("hbm 40->41 not", replace(BASE, hbm=41), False),
        ("traffic delta 99 met", replace(BASE, traffic=(1000 + 60, 500 + 39)), True),
        ("traffic delta 100 not", replace(BASE, traffic=(1000 + 60, 500 + 40)), False),
        ("cpu delta 4 met", replace(BASE, cpu=7 + 4), True),
        ("cpu delta 5 not", replace(BASE, cpu=7 + 5), False),
        ("cpu delta -2 met", replace(BASE, cpu=7 - 2), True),
        ("tx 1000->900 not", replace(BASE, traffic=(900, 500)), False),
        ("tx 1000->990 rx 500->520 not (the reference meets)", replace(BASE, traffic=(990, 520)), False),
    ],
)
def test_boundaries(name: str, now: Sample, met: bool) -> None:
    assert condition_met(BASE, now, DEFAULT) is met, name
    # Through step too: one round after a baseline.
    state, _ = step(HangState(), BASE, DEFAULT)
    state, _ = step(state, now, DEFAULT)
    assert state.count == (1 if met else 0), name


def reference_traffic_delta(before: tuple[int, int], now: tuple[int, int]) -> int:
    """The reference's `(tx-tx0)+(rx-rx0)` in uint64."""
    return ((now[0] - before[0]) + (now[1] - before[1])) % 2**64


def test_wrapped_traffic_is_flat_for_the_reference_and_not_for_us() -> None:
    assert reference_traffic_delta((1000, 500), (990, 520)) == 10 < DEFAULT.traffic_delta
    assert not condition_met(BASE, replace(BASE, traffic=(990, 520)), DEFAULT)


def test_traffic_unreadable_in_both_rounds_is_flat_and_in_one_round_is_not() -> None:
    dark = replace(BASE, traffic=None)
    assert condition_met(dark, dark, DEFAULT)
    assert not condition_met(BASE, dark, DEFAULT)
    assert not condition_met(dark, BASE, DEFAULT)
    assert at(run([dark] * 6), "occur") == [6]


# ---------------------------------------------------------------------- resets


def test_a_new_pid_at_sample_4_moves_the_occur_to_9() -> None:
    two = replace(BASE, pids=(42, 77))
    out = run([BASE] * 3 + [two] * 7)
    assert at(out, "occur") == [9]


def test_a_new_pid_while_faulted_recovers_at_that_sample() -> None:
    two = replace(BASE, pids=(42, 77))
    out = run([BASE] * 6 + [two] * 6)
    assert at(out, "occur") == [6, 12]
    assert at(out, "recover") == [7]


def test_no_processes_recovers_and_the_next_sample_is_a_baseline() -> None:
    none = replace(BASE, pids=())
    out = run([BASE] * 6 + [none] + [BASE] * 6)
    assert at(out, "recover") == [7]
    # sample 8 is the baseline, 9..13 meet: occur at 13
    assert at(out, "occur") == [6, 13]


def test_disabled_never_occurs() -> None:
    cfg = replace(DEFAULT, enabled=False)
    state = HangState()
    for _ in range(20):
        state, transition = step(state, BASE, cfg)
        assert transition is None and state.count == 0


def test_unreadable_round_counts_nothing_keeps_no_baseline_and_keeps_the_fault() -> None:
    out = run([BASE] * 3 + [None] + [BASE] * 6)
    assert at(out, "occur") == [10]  # 5 = baseline, 6..10 meet
    state = HangState()
    for sample in [BASE] * 6:
        state, _ = step(state, sample, DEFAULT)
    assert state.faulted
    state, transition = step(state, None, DEFAULT)
    assert transition is None and state.faulted and state.count == 0 and state.baseline is None
    # The job is still idle: no second occur once the chip reads again.
    transitions = []
    for sample in [BASE] * 8:
        state, transition = step(state, sample, DEFAULT)
        transitions.append(transition)
    assert transitions == [None] * 8 and state.faulted


# ---------------------------------------------------------------------- Go tables


def test_is_hang_condition_met() -> None:  # TestIsHangConditionMet
    # 01: no last metrics -> not met (step keeps no count without a baseline)
    state, _ = step(HangState(), Sample((1,), 0, 0, (0, 0), 0), DEFAULT)
    assert state.count == 0
    # 02: all conditions met
    last = Sample((1,), aicore=0, hbm=5, traffic=(50, 50), cpu=60)
    cur = Sample((1,), aicore=4, hbm=5, traffic=(60, 60), cpu=60)
    assert condition_met(last, cur, DEFAULT)


def test_npu_hang_event_occur() -> None:  # TestNpuHangEventOccur: DetectDuration 3
    cfg = replace(DEFAULT, detect_duration=3)
    state = HangState()
    for _ in range(4):
        state, _ = step(state, BASE, cfg)
    assert state.count == 3 and state.faulted


def test_npu_hang_event_disappear() -> None:  # TestNpuHangEventDisappear
    cfg = replace(DEFAULT, detect_duration=1)
    state, _ = step(HangState(), BASE, cfg)
    state, transition = step(state, BASE, cfg)
    assert transition == "occur" and state.faulted
    state, transition = step(state, replace(BASE, aicore=90), cfg)
    assert transition == "recover" and state.count == 0 and not state.faulted


def test_refre_hang_state_if_process_changed() -> None:  # TestRefreHangStateIfProcessChanged
    # 01: first round records the pids, no baseline to compare with
    state, _ = step(HangState(), replace(BASE, pids=(1, 2)), DEFAULT)
    assert state.pids == (1, 2) and state.count == 0
    # 02: unchanged pids keep the baseline: the next round counts
    state2, _ = step(state, replace(BASE, pids=(1, 2)), DEFAULT)
    assert state2.count == 1
    # 03: changed pids drop it: the round does not count, and the new pids are recorded
    state3, _ = step(state2, replace(BASE, pids=(3, 4)), DEFAULT)
    assert state3.pids == (3, 4) and state3.count == 0


# ---------------------------------------------------------------------- config

SHIPPED = (
    b'{"HangDetection":{"Enabled":true,"Threshold":{"AICoreUtilization":5,"HbmMemoryDelta":0,'
    b'"TrafficDelta":100,"CPUTimeDelta":5,"DetectDuration":5}}}'
)


def thresholds(cfg: HangConfig) -> tuple[int, int, int, int, int]:
    return (cfg.aicore_utilization, cfg.hbm_memory_delta, cfg.traffic_delta, cfg.cpu_time_delta, cfg.detect_duration)


def test_the_shipped_file_is_the_defaults() -> None:
    assert HangConfig.load(SHIPPED) == HangConfig()


def test_empty_object_gives_the_defaults_with_a_warning(caplog: pytest.LogCaptureFixture) -> None:
    # The reference zeroes every field: Enabled false, detection off.
    with caplog.at_level(logging.WARNING, logger="dcmi_exporter.tasks.hang_rule"):
        cfg = HangConfig.load(b"{}")
    assert cfg == HangConfig() and cfg.enabled
    assert any("HangDetection" in r.getMessage() for r in caplog.records)


def test_partial_config_ours_7_0_100_5_5(caplog: pytest.LogCaptureFixture) -> None:
    data = (
        b'{"HangDetection":{"Enabled":true,"Threshold":{"TrafficDelta":-1,"DetectDuration":0,"AICoreUtilization":7}}}'
    )
    with caplog.at_level(logging.WARNING, logger="dcmi_exporter.tasks.hang_rule"):
        cfg = HangConfig.load(data)
    # The reference: 7 / 0 / 100 / 0 / 5 (the missing CPUTimeDelta is Go's zero).
    assert thresholds(cfg) == (7, 0, 100, 5, 5)
    assert cfg.enabled
    messages = " ".join(r.getMessage() for r in caplog.records)
    assert "CPUTimeDelta" in messages and "HbmMemoryDelta" in messages


def test_bad_json_gives_the_defaults_with_the_error_logged(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.ERROR, logger="dcmi_exporter.tasks.hang_rule"):
        cfg = HangConfig.load(b'{"HangDetection":')
    assert cfg == HangConfig()
    assert [r for r in caplog.records if r.levelno == logging.ERROR and "error" in r.__dict__]


def test_load_hang_detection_config_from_file() -> None:  # TestLoadHangDetectionConfigFromFile 02
    data = (
        b'{"HangDetection":{"Enabled":false,"Threshold":{"AICoreUtilization":-1,"HbmMemoryDelta":-1,'
        b'"TrafficDelta":-1,"CPUTimeDelta":-1,"DetectDuration":0}}}'
    )
    cfg = HangConfig.load(data)
    assert not cfg.enabled
    assert thresholds(cfg) == (5, 0, 100, 5, 5)


@pytest.mark.parametrize(
    "data",
    [
        b"[]",
        b'{"HangDetection":[]}',
        b'{"HangDetection":{"Enabled":"yes"}}',
        b'{"HangDetection":{"Threshold":{"TrafficDelta":true}}}',
    ],
)
def test_wrong_types_fall_back_to_the_defaults(data: bytes) -> None:
    assert HangConfig.load(data) == HangConfig()


# ---------------------------------------------------------------------- parsers (procstat)


def test_procstat_parse_issue_line() -> None:
    line = "42 (a) b) S 1 42 42 0 -1 4194560 100 0 0 0 250 120 0 0 20 0 1 0 100 0 0"
    assert procstat.parse(line, 100) == 3


@pytest.mark.parametrize(  # TestGetProcessCPUTime
    ("name", "text", "seconds"),
    [
        ("01-current process", "1234 (test  test)  S 1 2 3 4 5 6 7 8 9 10 1100 1200 100 200 13 14 15", 23),
        ("03-nested parentheses", "1234 (test (v2)) S 1 2 3 4 5 6 7 8 9 10 1100 1200 100 200 13 14 15", 23),
    ],
)
def test_get_process_cpu_time(name: str, text: str, seconds: int) -> None:
    assert procstat.parse(text, 100) == seconds, name


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("1234 test S 1 2 3 4 5 6 7 8 9 10 11 12 100 200 13 14 15", "missing comm field"),  # 04
        ("1234 (x) S 1 2 3", "fields after the command name"),
        ("1234 (x) S 1 2 3 4 5 6 7 8 9 10 x 12", "invalid literal"),
    ],
)
def test_get_process_cpu_time_errors(text: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        procstat.parse(text, 100)


def test_cpu_seconds_sums_pids_and_a_missing_pid_adds_nothing(tmp_path: Path) -> None:
    for pid, ticks in ((42, 250), (77, 530)):
        (tmp_path / str(pid)).mkdir()
        (tmp_path / str(pid) / "stat").write_text(f"{pid} (python) S 1 1 1 0 -1 0 0 0 0 0 {ticks} 0 0 0\n")
    assert procstat.cpu_seconds(tmp_path, [42, 77, 99], 100) == (2 + 5, [99])


def test_after_an_unreadable_round_a_busy_job_still_recovers() -> None:
    out = run([BASE] * 6 + [None, BASE, replace(BASE, aicore=50)])
    assert at(out, "occur") == [6] and at(out, "recover") == [9]
