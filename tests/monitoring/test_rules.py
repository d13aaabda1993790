"""The alert rules under promtool (Debian's prometheus package): the rules file derived from the
PrometheusRule passes `promtool check rules`, and the unit tests of alerts.test.yaml pass, with a
case per alert where it fires and one where it does not; every family a rule or a panel reads is
one the services serve (docs/wire-formats.md)."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.monitoring.component import (
    ROOT,
    RULES_FILE,
    UNIT_TESTS,
    alerts,
    metric_names,
    queries,
    write_rules,
)

WIRE_FORMATS = ROOT / "docs" / "wire-formats.md"


def _promtool(promtool: Path, *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(promtool), *args], cwd=cwd, capture_output=True, text=True, timeout=120, check=False)


def _unit_tests(directory: Path, text: str | None = None) -> Path:
    """alerts.test.yaml (or `text`) next to the derived rules file, in `directory`."""
    write_rules(directory / RULES_FILE)
    target = directory / UNIT_TESTS.name
    target.write_text(UNIT_TESTS.read_text() if text is None else text)
    return target


def test_promtool_checks_the_rules(promtool: Path, tmp_path: Path) -> None:
    rules = write_rules(tmp_path / RULES_FILE)
    done = _promtool(promtool, "check", "rules", str(rules), cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"SUCCESS: {len(alerts())} rules found" in done.stdout


def test_promtool_unit_tests_pass(promtool: Path, tmp_path: Path) -> None:
    tests = _unit_tests(tmp_path)
    done = _promtool(promtool, "test", "rules", tests.name, cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "SUCCESS" in done.stdout


def test_promtool_unit_tests_fail_on_a_wrong_expectation(promtool: Path, tmp_path: Path) -> None:
    """The unit tests really compare: an annotation or a not-fired case changed makes them fail."""
    text = UNIT_TESTS.read_text()
    for i, (old, new) in enumerate(
        (
            ("summary: NPU chip 0 on n1 is unhealthy", "summary: NPU chip 0 on n1 is fine"),
            # a not-fired case where it fires
            (
                "{eval_time: 15m, alertname: AscendNPUHotResetNotRecovering",
                "{eval_time: 16m, alertname: AscendNPUHotResetNotRecovering",
            ),
            ('values: "8 8 7x10"', 'values: "8 8 6x10"'),  # n2 now publishes 7 of 8
            ('values: "0x2 1x43"', 'values: "0x45"'),  # n2's refused reset gone: its expected alert missing
        )
    ):
        assert old in text
        directory = tmp_path / str(i)
        directory.mkdir()
        tests = _unit_tests(directory, text.replace(old, new))
        done = _promtool(promtool, "test", "rules", tests.name, cwd=directory)
        assert done.returncode != 0, (old, done.stdout)
        assert "FAILED" in done.stdout + done.stderr


def _cases() -> list[dict[str, Any]]:
    doc = yaml.safe_load(UNIT_TESTS.read_text())
    assert doc["rule_files"] == [RULES_FILE]
    return [case for test in doc["tests"] for case in test["alert_rule_test"]]


@pytest.mark.parametrize("alert", [a["alert"] for a in alerts()])
def test_every_alert_has_a_fired_and_a_not_fired_case(alert: str) -> None:
    cases = [c for c in _cases() if c["alertname"] == alert]
    assert any(c["exp_alerts"] for c in cases), f"{alert}: no case where it fires"
    assert any(not c["exp_alerts"] for c in cases), f"{alert}: no case where it does not fire"


def _served() -> set[str]:
    """The family names docs/wire-formats.md's metrics section lists (in backticks)."""
    text = WIRE_FORMATS.read_text()
    section = text[text.index("## Prometheus metrics") : text.index("## The chip library")]
    names = set(re.findall(r"`([a-z_:][a-z0-9_:]*)", section))
    # A numbered run is written as its ends: `x_1` .. `x_9`.
    for stem, first, last in re.findall(r"`([a-z_:][a-z0-9_:]*?)_(\d+)` \.\. `\1_(\d+)`", section):
        names |= {f"{stem}_{n}" for n in range(int(first), int(last) + 1)}
    return names


SERVED_BY_PROMETHEUS = {"up"}


@pytest.mark.parametrize("alert", [a["alert"] for a in alerts()])
def test_alerts_read_served_families(alert: str) -> None:
    (rule,) = [a for a in alerts() if a["alert"] == alert]
    names = metric_names(rule["expr"])
    assert names, rule["expr"]
    assert names <= _served() | SERVED_BY_PROMETHEUS, names - _served()


def test_dashboard_reads_served_families() -> None:
    for query in queries():
        names = metric_names(query.expr)
        assert names, query
        assert names <= _served() | SERVED_BY_PROMETHEUS, (query, names - _served())


def test_the_family_check_sees_an_unserved_family() -> None:
    """metric_names finds the families in an expression, and an unserved one is not in _served."""
    names = metric_names('sum by (node) (rate(npu_chip_info_hccs_tx{node=~"$node"}[5m])) > on(node) machine_npu_nums')
    assert names == {"npu_chip_info_hccs_tx", "machine_npu_nums"}
    assert "npu_chip_info_hccs_tx" not in _served()
    assert "machine_npu_nums" in _served()


def test_the_promtool_tier_has_its_installer() -> None:
    script = ROOT / "tests" / "monitoring" / "install-prometheus.sh"
    assert script.stat().st_mode & 0o111
    assert "apt-get install" in script.read_text()
    ci = (ROOT / ".ci" / "run").read_text()
    assert "tests/monitoring/install-prometheus.sh" in ci
    assert shutil.which("bash")
