"""The reference's own fault-policy test tables, ported: each test is named after the Go test
(component/ascend-device-plugin/pkg/common/fault_code_test.go) whose cases it carries, with that
test's inputs and expected values, and is run twice: against our pure functions and through
`fault-manager replay` (the service's engine).

What the Go tests assert about the reference's internal caches (its duration queue, the frequency
cache's slices) has no counterpart here: our state is recomputed from each code's timeline. Those
cases are carried by what the caches decide (timed out or not, since when, the occurrence and
recovery times handed to FaultFrequency), which is what a node publishes.
"""

from __future__ import annotations

import io
import json
from typing import Any

import pytest
from ascend_common.faults import (
    DurationRule,
    FaultLevel,
    chip_level,
    chip_network_level,
    counting_spans,
    duration_state,
    frequency_state,
    load_fault_code_table,
    load_fault_customization,
    occurrences,
)
from fault_manager.cli import replay_main
from fault_manager.policy.keeper import build
from fault_manager.reactor.replay import Replayer, parse_timeline

CHIP = "Ascend910-0"
LINK_DOWN = "81078603"


def replay(files: dict[str, Any], lines: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Every query's answer for CHIP, through the replay command's own code path."""
    policy = build({name: json.dumps(doc) for name, doc in files.items()})
    out = Replayer(policy).run(parse_timeline(json.dumps(line) for line in lines))
    return [answer["chips"][CHIP] for answer in out]


def event(t: float, code: str, assertion: str, severity: int | None = None) -> dict[str, Any]:
    line: dict[str, Any] = {"t": t, "chip": CHIP, "code": code, "assertion": assertion}
    if severity is not None:
        line["severity"] = severity
    return line


def query(t: float) -> dict[str, Any]:
    return {"t": t, "query": True}


# --- TestHandleFaultQueueCase01..06: FaultDuration, FaultTimeout 30 s, RecoverTimeout 60 s ---------------

QUEUE_RULE = {"EventId": [LINK_DOWN], "FaultTimeout": 30, "RecoverTimeout": 60, "FaultHandling": "PreSeparateNPU"}
# A case that starts "already timed out" (the Go test presets TimeoutStatus true) gets an occur at 0,
# which timed out at 30 and lasts until the case's first event, a recover.
ALREADY_TIMED_OUT = [(0, "occur")]


@pytest.mark.parametrize(
    ("case", "events", "timed_out", "spans"),
    [
        # 01: a 31 s fault times out; its FaultAlarmTime (= the frequency occurrence) is occur + 30 s
        ("TestHandleFaultQueueCase01", [(50, "occur"), (81, "recover"), (82, "occur")], True, [(80, None)]),
        # 02: exactly 30 s is not a timeout (strict)
        ("TestHandleFaultQueueCase02", [(50, "occur"), (80, "recover")], False, []),
        # 03: two 30 s faults are not summed
        ("TestHandleFaultQueueCase03", [(50, "occur"), (80, "recover"), (82, "occur"), (112, "recover")], False, []),
        # 04: timed out; healthy for exactly 60 s is not a recovery (strict)
        ("TestHandleFaultQueueCase04", [*ALREADY_TIMED_OUT, (50, "recover"), (110, "occur")], True, [(30, None)]),
        # 05: healthy 61 s recovers (recovery time 50 + 60 = 110); then a 1 s fault does not time out
        (
            "TestHandleFaultQueueCase05",
            [*ALREADY_TIMED_OUT, (50, "recover"), (111, "occur"), (112, "recover")],
            False,
            [(30, 110)],
        ),
        # 06: recovers at 110, then a 31 s fault times out again at 111 + 30 = 141
        (
            "TestHandleFaultQueueCase06",
            [*ALREADY_TIMED_OUT, (50, "recover"), (111, "occur"), (142, "recover")],
            True,
            [(30, 110), (141, None)],
        ),
    ],
)
def test_handle_fault_queue_cases(
    case: str, events: list[tuple[float, str]], timed_out: bool, spans: list[tuple[float, float | None]]
) -> None:
    """Go asserts TimeoutStatus (here `timed_out`) and, through FaultAlarmTime, when the code started
    counting and when its recovery was confirmed (here the counting `spans`, whose starts are the
    occurrences FaultFrequency counts). In case 06 the reference, handling the whole queue in one
    call, hands FaultFrequency neither the recovery at 110 nor the occurrence at 141 (its status is
    true before and after the call); evaluated as the events come, both happen, as here."""
    from ascend_common.faults import CodeEvent

    rule = DurationRule(frozenset({LINK_DOWN}), 30, 60, FaultLevel.PRE_SEPARATE_NPU)
    timeline = [CodeEvent(float(t), kind) for t, kind in events]  # type: ignore[arg-type]
    now = float(events[-1][0])
    state = duration_state(rule, timeline, now)
    assert state.counting is timed_out, case
    assert counting_spans(rule, timeline, now) == spans, case
    assert occurrences(timeline, duration=rule, now=now) == [start for start, _ in spans]

    (answer,) = replay(
        {"faultCustomization.json": {"FaultDuration": [QUEUE_RULE]}},
        [*(event(t, LINK_DOWN, kind, 1) for t, kind in events), query(now)],
    )
    assert answer["network_level"] == (
        "PreSeparateNPU" if timed_out else "NotHandleFault" if events[-1][1] == "occur" else "NormalNPU"
    )
    assert answer["level"] == "NormalNPU" and answer["healthy"] is True  # a network code: chip level untouched


# --- TestGetFaultTypeByCode ------------------------------------------------------------------------------

BY_CODE_CASES = [
    # (leaf, faultCode.json lists, codes, expected)
    ("fault type NormalNPU", {"NotHandleFaultCodes": ["1"]}, [], "NormalNPU"),
    ("fault type NotHandleFault", {"NotHandleFaultCodes": ["1"]}, ["1"], "NotHandleFault"),
    ("fault type SeparateNPU", {"SeparateNPUCodes": ["1"]}, ["1"], "SeparateNPU"),
    ("fault type SeparateNPU (no list, unknown severity)", {}, ["1"], "SeparateNPU"),
    ("fault type RestartNPU", {"RestartNPUCodes": ["1"]}, ["1"], "RestartNPU"),
    ("fault type FreeRestartNPU", {"FreeRestartNPUCodes": ["1"]}, ["1"], "FreeRestartNPU"),
    ("fault type RestartBusiness", {"RestartBusinessCodes": ["1"]}, ["1"], "RestartBusiness"),
    ("fault type RestartRequest", {"RestartRequestCodes": ["1"]}, ["1"], "RestartRequest"),
    ("fault type PreSeparateNPU", {"PreSeparateNPUCodes": ["1"]}, ["1"], "PreSeparateNPU"),
    ("fault type SubHealthFault", {"SubHealthFaultCodes": ["1"]}, ["1"], "SubHealthFault"),
    (
        "SubHealthFault priority higher than NotHandleFault",
        {"SubHealthFaultCodes": ["1"], "NotHandleFaultCodes": ["2"]},
        ["2", "1"],
        "SubHealthFault",
    ),
]


@pytest.mark.parametrize(("leaf", "lists", "codes", "expected"), BY_CODE_CASES, ids=[c[0] for c in BY_CODE_CASES])
def test_get_fault_type_by_code(leaf: str, lists: dict[str, list[str]], codes: list[str], expected: str) -> None:
    """TestGetFaultTypeByCode: 10 leaves, 11 assertions (the SeparateNPU leaf has two)."""
    table = load_fault_code_table(lists)
    assert chip_level(table, [(code, None) for code in codes]).value == expected
    lines = [event(i, code, "occur") for i, code in enumerate(codes)]
    if not codes:  # a chip with a code come and gone: no code present
        lines = [event(0, "3", "occur"), event(0, "3", "recover")]
    (answer,) = replay({"faultCode.json": lists}, [*lines, query(10)])
    assert answer["level"] == expected
    assert answer["network_level"] == "NormalNPU"


def test_a_listed_code_does_not_hide_an_unknown_severe_one() -> None:
    """Deliberately different (docs/compatibility.md): the reference's GetFaultTypeByCode falls back to
    severity only when no code of the chip is listed, so a listed NotHandleFault code would hide an
    unknown critical code; ours judges each code, and the unknown critical one separates the chip."""
    table = load_fault_code_table({"NotHandleFaultCodes": ["1"]})
    assert chip_level(table, [("1", None), ("ABCDEF12", 3)]) is FaultLevel.SEPARATE_NPU
    assert chip_level(table, [("1", None), ("ABCDEF13", 1)]) is FaultLevel.NOT_HANDLE_FAULT


# --- TestGetNetworkFaultTypeByCode -----------------------------------------------------------------------

NETWORK_CASES = [
    # (leaf, faultCode.json lists, codes, expected)
    ("fault type NormalNetwork", {"NotHandleFaultCodes": ["1"]}, [], "NormalNPU"),
    (
        "fault type NotHandleFault",
        {"NotHandleFaultNetworkCodes": [LINK_DOWN], "NotHandleFaultCodes": ["1"]},
        [LINK_DOWN],
        "NotHandleFault",
    ),
    (
        "fault type SeparateNPU",
        {"SeparateNPUNetworkCodes": [LINK_DOWN], "NotHandleFaultCodes": ["1"]},
        [LINK_DOWN],
        "SeparateNPU",
    ),
    (
        "fault type PreSeparateNPU",
        {"PreSeparateNPUNetworkCodes": [LINK_DOWN], "NotHandleFaultCodes": ["1"]},
        [LINK_DOWN],
        "PreSeparateNPU",
    ),
    (
        "fault type SubHealthFault",
        {"SubHealthFaultNetworkCodes": ["110000002"], "NotHandleFaultCodes": ["1"]},
        ["110000002"],
        "SubHealthFault",
    ),
    ("read json failed (no list names the code)", {}, [LINK_DOWN], "PreSeparateNPU"),
]


@pytest.mark.parametrize(("leaf", "lists", "codes", "expected"), NETWORK_CASES, ids=[c[0] for c in NETWORK_CASES])
def test_get_network_fault_type_by_code(
    leaf: str, lists: dict[str, list[str]], codes: list[str], expected: str
) -> None:
    """TestGetNetworkFaultTypeByCode: 6 leaves. The first returns "NormalNetwork" from the by-code
    helper in Go; GetNetworkFaultType, whose result is what gets published, turns it into
    "NormalNPU" (getMostSeriousFaultType), which is what we carry. The last one's lists failed to
    load in Go; an empty table gives the same default."""
    table = load_fault_code_table(lists)
    assert chip_network_level(table, [(code, None) for code in codes]).value == expected
    lines = [event(i, code, "occur", 1) for i, code in enumerate(codes)] or [event(0, "3", "once", 1)]
    (answer,) = replay({"faultCode.json": lists}, [*lines, query(10)])
    assert answer["network_level"] == expected
    assert answer["network_healthy"] is (expected in ("NormalNPU", "NotHandleFault"))


# --- TestGetFaultTypeFromFaultFrequency ---------------------------------------------------------------------

FREQUENCY_3_MS = {"EventId": ["80e18005"], "TimeWindow": 86400, "Times": 3, "FaultHandling": "ManuallySeparateNPU"}


def test_get_fault_type_from_fault_frequency() -> None:
    """TestGetFaultTypeFromFaultFrequency: two cases, four assertions."""
    (rule,) = load_fault_customization({"FaultFrequency": [FREQUENCY_3_MS]}).frequencies
    now = 100_000.0
    # case 1: a chip code's frequency rule plays no part in the network level
    (answer,) = replay(
        {"faultCustomization.json": {"FaultFrequency": [FREQUENCY_3_MS]}},
        [event(now - 2, "80E18005", "once", 1), query(now)],
    )
    assert answer["network_level"] == "NormalNPU"
    # case 2: three occurrences in the window reach Times 3: ManuallySeparateNPU, the chip in
    # ManuallySeparateNPU (FirstHandle), and the window consumed (recoverFaultFrequencyMap)
    state = frequency_state(rule, [now - 10, now - 8, now - 2], now)
    assert state.escalated and rule.handling is FaultLevel.MANUALLY_SEPARATE_NPU
    assert state.count_in_window == 0
    (answer,) = replay(
        {"faultCustomization.json": {"FaultFrequency": [FREQUENCY_3_MS]}},
        [*(event(now - ago, "80E18005", "once", 1) for ago in (10, 8, 2)), query(now)],
    )
    assert answer["level"] == "ManuallySeparateNPU"
    assert answer["manually_separated"] is True
    assert answer["reasons"] == [{"code": "80E18005", "level": "ManuallySeparateNPU", "type": "FaultFrequency"}]


# --- TestGetFaultType ----------------------------------------------------------------------------------------


def test_get_fault_type() -> None:
    """TestGetFaultType: 80E0180F has a FaultFrequency rule (3 in a day: ManuallySeparateNPU) with three
    occurrences and a FaultDuration rule (120 s: RestartBusiness) that holds; 80C98002 is present too.
    Go asserts ManuallySeparateNPU, the chip in ManuallySeparateNPU and the window consumed. A code with
    a FaultDuration rule occurs for FaultFrequency when it times out, so the timeline times out thrice."""
    custom = {
        "FaultFrequency": [
            {"EventId": ["80e0180f"], "TimeWindow": 86400, "Times": 3, "FaultHandling": "ManuallySeparateNPU"}
        ],
        "FaultDuration": [
            {"EventId": ["80e0180f"], "FaultTimeout": 120, "RecoverTimeout": 0, "FaultHandling": "RestartBusiness"}
        ],
    }
    lines = [
        event(0, "80C98002", "occur", 2),
        event(0, "80E0180F", "occur", 2),
        event(121, "80E0180F", "recover"),  # timed out at 120
        event(122, "80E0180F", "occur", 2),
        event(243, "80E0180F", "recover"),  # timed out at 242
        event(244, "80E0180F", "occur", 2),  # times out at 364 and holds
        query(400),
    ]
    (answer,) = replay({"faultCustomization.json": custom}, lines)
    assert answer["level"] == "ManuallySeparateNPU"
    assert answer["manually_separated"] is True
    assert {(r["code"], r["level"], r["type"]) for r in answer["reasons"]} == {
        ("80E0180F", "ManuallySeparateNPU", "FaultFrequency"),
        ("80E0180F", "RestartBusiness", "FaultDuration"),
    }


# --- the replay command, with the packaged policy ------------------------------------------------------------


def run_cli(lines: list[dict[str, Any]], *args: str) -> tuple[int, list[dict[str, Any]], str]:
    out, err = io.StringIO(), io.StringIO()
    stdin = io.StringIO("".join(json.dumps(line) + "\n" for line in lines))
    import contextlib

    with contextlib.redirect_stderr(err):
        code = replay_main([*args, "-"], out=out, stdin=stdin)
    return code, [json.loads(line) for line in out.getvalue().splitlines()], err.getvalue()


def link_down(start: float, seconds: float) -> list[dict[str, Any]]:
    return [event(start, LINK_DOWN, "occur", 1), event(start + seconds, LINK_DOWN, "recover", 1)]


def test_replay_link_down_of_exactly_20_s_is_not_timed_out_and_20_001_is() -> None:
    code, answers, _ = run_cli([*link_down(0, 20.0), query(100), *link_down(1000, 20.001), query(1030)])
    assert code == 0
    assert [a["chips"][CHIP]["network_level"] for a in answers] == ["NormalNPU", "PreSeparateNPU"]


def test_replay_link_down_for_25_s_is_a_network_fault_only() -> None:
    _, answers, _ = run_cli([event(0, LINK_DOWN, "occur", 1), query(25)])
    chip = answers[0]["chips"][CHIP]
    assert (chip["network_level"], chip["level"], chip["healthy"]) == ("PreSeparateNPU", "NormalNPU", True)
    assert chip["network_healthy"] is False


def test_replay_five_5_second_flaps_never_separate() -> None:
    lines = [line for i in range(5) for line in link_down(i * 10, 5)]
    _, answers, _ = run_cli([*lines, query(60), query(3600)])
    for answer in answers:
        assert answer["chips"][CHIP]["manually_separated"] is False
        assert answer["chips"][CHIP]["network_level"] == "NormalNPU"


def test_replay_five_long_link_downs_separate_and_the_release_window_lifts_it() -> None:
    lines = [line for i in range(5) for line in link_down(i * 100, 25)]  # 75 s up between: > RecoverTimeout
    last_recover = 4 * 100 + 25
    released = last_recover + 60 + 172_800
    _, answers, _ = run_cli([*lines, query(last_recover), query(released - 1), query(released + 1)])
    separated = [a["chips"][CHIP]["manually_separated"] for a in answers]
    assert separated == [True, True, False]
    assert [a["chips"][CHIP]["level"] for a in answers] == ["ManuallySeparateNPU", "ManuallySeparateNPU", "NormalNPU"]
    assert answers[0]["chips"][CHIP]["healthy"] is False
    assert answers[2]["chips"][CHIP]["reasons"] == []


def test_replay_runs_the_services_engine(monkeypatch: pytest.MonkeyPatch) -> None:
    lines = [event(0, LINK_DOWN, "occur", 1), query(25)]
    assert run_cli(lines)[1][0]["chips"][CHIP]["network_level"] == "PreSeparateNPU"
    from ascend_common.faults import duration_state as real

    # The engine's FaultDuration rule, changed: nothing ever times out. Replay follows it.
    monkeypatch.setattr("fault_manager.policy.engine.duration_state", lambda rule, events, now: real(rule, [], now))
    assert run_cli(lines)[1][0]["chips"][CHIP]["network_level"] == "NotHandleFault"


@pytest.mark.parametrize(
    ("lines", "message"),
    [
        (['{"t": 5, "query": true}', '{"t": 4, "query": true}'], "line 2: t 4 is before"),
        (['{"t": 1, "query": true}', "{not json"], "line 2: not JSON"),
        (['{"t": "soon", "query": true}'], 'line 1: "t" must be'),
        (['{"t": 1, "chip": "Ascend910-0", "code": "81078603", "assertion": "maybe"}'], 'line 1: "assertion"'),
        (['{"t": 1, "chip": "Ascend910-0", "code": "xyz", "assertion": "occur"}'], "line 1:"),
        (['{"t": 1, "chip": "Ascend910-0", "code": "81078603", "assertion": "occur", "extra": 1}'], "unknown key"),
        (['{"t": 1, "query": false}'], "line 1: a query is exactly"),
    ],
)
def test_replay_refuses_a_bad_line_naming_it(lines: list[str], message: str) -> None:
    out, err = io.StringIO(), io.StringIO()
    import contextlib

    with contextlib.redirect_stderr(err):
        code = replay_main(["-"], out=out, stdin=io.StringIO("\n".join(lines) + "\n"))
    assert code == 2
    assert message in err.getvalue()


def test_replay_refuses_a_bad_policy_dir(tmp_path: Any) -> None:
    (tmp_path / "faultCustomization.json").write_text(
        '{"FaultDuration": [{"EventId": ["81078603"], "FaultTimeout": -1}]}'
    )
    code, _, err = run_cli([query(1)], "--policy-dir", str(tmp_path))
    assert code == 2 and "policy" in err
    code, _, err = run_cli([query(1)], "--policy-dir", str(tmp_path / "missing"))
    assert code == 2 and "not a directory" in err


def test_replay_uses_a_candidate_policy_dir(tmp_path: Any) -> None:
    (tmp_path / "faultCustomization.json").write_text(
        json.dumps({"FaultDuration": [{**QUEUE_RULE, "FaultTimeout": 60}]})
    )
    lines = [event(0, LINK_DOWN, "occur", 1), query(25)]
    assert run_cli(lines)[1][0]["chips"][CHIP]["network_level"] == "PreSeparateNPU"
    assert run_cli(lines, "--policy-dir", str(tmp_path))[1][0]["chips"][CHIP]["network_level"] == "NotHandleFault"
