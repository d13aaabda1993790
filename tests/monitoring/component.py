"""The monitoring component (deploy/kustomize/components/monitoring) as the tests read it: the
alert rules from the PrometheusRule's spec.groups (the one source; promtool's rules file is
derived here), the dashboard's panels and queries, and where promtool and prometheus are."""

from __future__ import annotations

import copy
import json
import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
COMPONENT = ROOT / "deploy" / "kustomize" / "components" / "monitoring"
RULE_SOURCE = COMPONENT / "prometheusrule.yaml"
DASHBOARD = COMPONENT / "dashboards" / "ascend-node.json"
UNIT_TESTS = Path(__file__).with_name("alerts.test.yaml")
INSTALL = Path(__file__).with_name("install-prometheus.sh")
RULES_FILE = "ascend-rules.yaml"  # the name alerts.test.yaml's rule_files gives
# The services' job names: the PodMonitor's jobLabel (app.kubernetes.io/name of each pod).
JOBS = ("dcmi-exporter", "ascend-device-plugin", "fault-manager")
# Grafana's variables in the queries, as the dashboard would expand them for all nodes.
VARIABLES = {"$__rate_interval": "1m", "$node": ".*"}

Rule = dict[str, Any]


def rule_groups() -> list[dict[str, Any]]:
    groups: list[dict[str, Any]] = yaml.safe_load(RULE_SOURCE.read_text())["spec"]["groups"]
    return groups


def alerts() -> list[Rule]:
    return [rule for group in rule_groups() for rule in group["rules"] if "alert" in rule]


def write_rules(path: Path, for_override: str | None = None) -> Path:
    """promtool's / prometheus' rules file from the PrometheusRule; `for_override` replaces every
    alert's `for` (a live test cannot wait the shipped minutes)."""
    groups = copy.deepcopy(rule_groups())
    if for_override is not None:
        for group in groups:
            for rule in group["rules"]:
                if "for" in rule:
                    rule["for"] = for_override
    path.write_text(yaml.safe_dump({"groups": groups}, sort_keys=False))
    return path


def dashboard() -> dict[str, Any]:
    model: dict[str, Any] = json.loads(DASHBOARD.read_text())
    return model


@dataclass(frozen=True)
class Query:
    panel: str
    ref: str
    expr: str  # as the dashboard holds it

    def expanded(self) -> str:
        out = self.expr
        for name, value in VARIABLES.items():
            out = out.replace(name, value)
        return out


def panels() -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for panel in dashboard()["panels"]:
        out.append(panel)
        out.extend(panel.get("panels", []))  # a collapsed row's panels
    return [p for p in out if p.get("type") != "row"]


def queries() -> list[Query]:
    return [Query(p["title"], t["refId"], t["expr"]) for p in panels() for t in p["targets"]]


def metric_names(expr: str) -> set[str]:
    """The metric families an expression reads (identifiers that are neither functions,
    keywords, label names nor durations)."""
    without_strings = re.sub(r'"[^"]*"', '""', expr)
    without_labels = re.sub(r"\{[^}]*\}", "", without_strings)
    without_ranges = re.sub(r"\[[^\]]*\]", "", without_labels)
    without_groupings = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", "", without_ranges)
    words = set(re.findall(r"[a-zA-Z_:][a-zA-Z0-9_:]*", without_groupings))
    functions = {w for w in words if re.search(rf"\b{w}\s*\(", without_groupings)}
    keywords = {"and", "or", "unless", "bool", "offset"}
    return words - functions - keywords


def binary(name: str) -> Path:
    """/usr/bin/<name> of Debian's prometheus package, installed by install-prometheus.sh when
    missing and we are root; elsewhere the tier skips with the reason (CI set: it fails)."""
    found = shutil.which(name)
    if found is None:
        done = subprocess.run([str(INSTALL)], capture_output=True, text=True, timeout=900, check=False)
        found = shutil.which(name)
        if found is None:
            reason = f"{name} is not installed and {INSTALL.name} could not install it: {done.stderr.strip()}"
            if os.environ.get("CI"):
                pytest.fail(reason + " (CI must run the monitoring tier)")
            pytest.skip(reason)
    return Path(found)
