"""The monitoring component (deploy/kustomize/components/monitoring) on every pool: the PodMonitor
and the PrometheusRule validate strictly (unknown fields refused) against the Prometheus
Operator's CRD schemas (v0.93.0, ../shared/data/prometheus-operator, or
$PROMETHEUS_OPERATOR_CRDS), the rest against Kubernetes' with kubernetes-validate --strict; the
PodMonitor and the scrape annotations reach each service's metrics port; the dashboard is a
Grafana model in a ConfigMap Grafana's sidecar picks up."""

from __future__ import annotations

import copy
import json
import os
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

from tests.deploy.test_kustomize import (
    EXPORTER,
    FAULT_MANAGER,
    KUSTOMIZE,
    OVERLAYS,
    PLUGIN,
    Manifest,
    _daemonsets,
    _docs,
    render_pools,
    validate,
)
from tests.monitoring.component import JOBS, ROOT, panels, queries

COMPONENT = KUSTOMIZE / "components" / "monitoring"
# The CRDs (tests/deploy/crds: the workspace's shared/data/prometheus-operator, copied), or where
# PROMETHEUS_OPERATOR_CRDS says.
CRDS = Path(os.environ.get("PROMETHEUS_OPERATOR_CRDS") or Path(__file__).parent / "crds")
# The shared copy beside the workspace (of the main checkout, or one level further up for a worktree).
_SHARED = [p / "shared" / "data" / "prometheus-operator" for p in (ROOT.parent, ROOT.parent.parent)]
CRD_FILES = {
    "PodMonitor": "monitoring.coreos.com_podmonitors.yaml",
    "PrometheusRule": "monitoring.coreos.com_prometheusrules.yaml",
    "ServiceMonitor": "monitoring.coreos.com_servicemonitors.yaml",
}
OPERATOR_KINDS = set(CRD_FILES)
PORTS = {EXPORTER: 8082, PLUGIN: 8083, FAULT_MANAGER: 8084}
OBJECT_META = {"name", "namespace", "labels", "annotations"}


@pytest.fixture(scope="module")
def monitored(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    return render_pools(tmp_path_factory.mktemp("monitoring"), OVERLAYS, COMPONENT)


def strict(schema: Any) -> Any:
    """The schema with every object that lists its properties closed to others (the API server
    prunes unknown fields; a manifest that has one is a mistake), unless it keeps unknown fields."""
    if isinstance(schema, list):
        return [strict(s) for s in schema]
    if not isinstance(schema, dict):
        return schema
    out = {k: strict(v) for k, v in schema.items() if k != "properties"}
    if "properties" in schema:
        out["properties"] = {k: strict(v) for k, v in schema["properties"].items()}
        if "additionalProperties" not in schema and not schema.get("x-kubernetes-preserve-unknown-fields"):
            out["additionalProperties"] = False
    return out


def _validator(kind: str, version: str) -> jsonschema.protocols.Validator:
    path = CRDS / CRD_FILES[kind]
    if not path.is_file():
        pytest.fail(f"{path} missing: the Prometheus Operator's CRDs (set PROMETHEUS_OPERATOR_CRDS)")
    crd = yaml.safe_load(path.read_text())
    assert crd["spec"]["names"]["kind"] == kind
    (served,) = [v for v in crd["spec"]["versions"] if v["name"] == version]
    schema = strict(served["schema"]["openAPIV3Schema"])
    cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft7Validator)
    return cls(schema)


def crd_problems(doc: Manifest) -> list[str]:
    """What the kind's CRD schema (strict) and ObjectMeta refuse in `doc` ([] when it passes)."""
    group, version = doc["apiVersion"].split("/")
    assert group == "monitoring.coreos.com"
    problems = [
        f"{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in _validator(doc["kind"], version).iter_errors(doc)
    ]
    problems += [f"metadata.{k}: not ObjectMeta's" for k in set(doc["metadata"]) - OBJECT_META]
    return problems


def _operator_docs(path: Path) -> list[Manifest]:
    return [d for d in _docs(path) if d["kind"] in OPERATOR_KINDS]


@pytest.mark.parametrize("name", sorted(CRD_FILES.values()))
def test_the_crds_here_are_the_shared_ones(name: str) -> None:
    shared = next((p for p in _SHARED if p.is_dir()), None)
    if shared is None:
        pytest.skip(f"no shared/data/prometheus-operator beside the workspace ({', '.join(map(str, _SHARED))})")
    assert (CRDS / name).read_bytes() == (shared / name).read_bytes()


@pytest.mark.parametrize("pool", OVERLAYS)
def test_operator_objects_validate_against_the_crds_strictly(monitored: dict[str, Path], pool: str) -> None:
    docs = _operator_docs(monitored[pool])
    assert sorted(d["kind"] for d in docs) == ["PodMonitor", "PrometheusRule"]
    for doc in docs:
        assert crd_problems(doc) == [], doc["kind"]


@pytest.mark.parametrize(
    ("kind", "path", "value", "named"),
    [
        ("PodMonitor", ("spec", "podMetricsEndpoints", 0, "intervall"), "30s", "'intervall' was unexpected"),
        (
            "PodMonitor",
            ("spec", "podMetricsEndpoints", 0, "relabelings", 0, "action"),
            "rename",
            "'rename' is not one of",
        ),
        ("PodMonitor", ("metadata", "labelz"), {"a": "b"}, "metadata.labelz"),
        ("PrometheusRule", ("spec", "groups", 0, "rules", 0, "labelz"), {"a": "b"}, "'labelz' was unexpected"),
        ("PrometheusRule", ("spec", "groups", 0, "rules", 0, "for"), "one minute", "'one minute' does not match"),
    ],
)
def test_crd_validation_refuses_what_the_operator_would(
    monitored: dict[str, Path], kind: str, path: tuple[str | int, ...], value: Any, named: str
) -> None:
    (doc,) = [d for d in _operator_docs(monitored["simulated"]) if d["kind"] == kind]
    bad = copy.deepcopy(doc)
    target: Any = bad
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    problems = crd_problems(bad)
    assert len(problems) == 1 and named in problems[0], problems


@pytest.mark.parametrize("pool", OVERLAYS)
def test_the_rest_validates_strictly(monitored: dict[str, Path], pool: str, tmp_path: Path) -> None:
    rest = [d for d in _docs(monitored[pool]) if d["kind"] not in OPERATOR_KINDS]
    target = tmp_path / "rest.yaml"
    target.write_text(yaml.safe_dump_all(rest))
    assert validate(target) == ""


@pytest.mark.parametrize("pool", OVERLAYS)
def test_the_component_adds_only_monitoring(monitored: dict[str, Path], pool: str) -> None:
    """The pool's objects are unchanged but for the pods' scrape annotations."""
    plain = {(d["kind"], d["metadata"]["name"]): d for d in _docs(monitored[f"{pool}-plain"])}
    with_it = {(d["kind"], d["metadata"]["name"]): d for d in _docs(monitored[pool])}
    added = set(with_it) - set(plain)
    assert added == {
        ("PodMonitor", "ascend-node-stack"),
        ("PrometheusRule", "ascend-node-stack"),
        ("ConfigMap", "ascend-node-dashboard"),
    }
    assert set(plain) <= set(with_it)
    for key, doc in plain.items():
        changed = copy.deepcopy(with_it[key])
        if key[0] == "DaemonSet":
            changed["spec"]["template"]["metadata"].pop("annotations")
        assert changed == doc, key


@pytest.mark.parametrize("pool", OVERLAYS)
def test_scrape_annotations_name_each_services_metrics_port(monitored: dict[str, Path], pool: str) -> None:
    for service, ds in _daemonsets(_docs(monitored[pool])).items():
        template = ds["spec"]["template"]
        (c,) = template["spec"]["containers"]
        (port,) = [p for p in c["ports"] if p["name"] == "metrics"]
        assert port["containerPort"] == PORTS[service]
        assert template["metadata"]["annotations"] == {
            "prometheus.io/scrape": "true",
            "prometheus.io/port": str(PORTS[service]),
            "prometheus.io/path": "/metrics",
        }


def _selects(selector: Manifest, labels: dict[str, str]) -> bool:
    ok = all(labels.get(k) == v for k, v in selector.get("matchLabels", {}).items())
    for expr in selector.get("matchExpressions", []):
        assert expr["operator"] == "In"
        ok = ok and labels.get(expr["key"]) in expr["values"]
    return ok


@pytest.mark.parametrize("pool", OVERLAYS)
def test_the_podmonitor_scrapes_the_three_services_as_the_rules_expect(monitored: dict[str, Path], pool: str) -> None:
    docs = _docs(monitored[pool])
    (pm,) = [d for d in docs if d["kind"] == "PodMonitor"]
    spec = pm["spec"]
    dss = _daemonsets(docs)
    assert spec["namespaceSelector"] == {"matchNames": ["ascend-system"]}
    selected = {s for s, ds in dss.items() if _selects(spec["selector"], ds["spec"]["template"]["metadata"]["labels"])}
    assert selected == set(dss) == set(JOBS)
    # The job is the pod's app.kubernetes.io/name: the names the rules' `up` selector lists.
    assert spec["jobLabel"] == "app.kubernetes.io/name"
    for ds in dss.values():
        assert ds["spec"]["template"]["metadata"]["labels"]["app.kubernetes.io/name"] in JOBS
        assert ds["metadata"]["namespace"] == "ascend-system"
    (endpoint,) = spec["podMetricsEndpoints"]
    assert endpoint["port"] == "metrics"
    assert endpoint["path"] == "/metrics"
    # The node label the rules join on and the dashboard's variable reads.
    assert {"sourceLabels": ["__meta_kubernetes_pod_node_name"], "targetLabel": "node", "action": "replace"} in (
        endpoint["relabelings"]
    )


@pytest.mark.parametrize("pool", OVERLAYS)
def test_the_dashboard_configmap_is_for_grafanas_sidecar(monitored: dict[str, Path], pool: str) -> None:
    (cm,) = [
        d
        for d in _docs(monitored[pool])
        if d["kind"] == "ConfigMap" and d["metadata"]["name"] == "ascend-node-dashboard"
    ]
    assert cm["metadata"]["labels"]["grafana_dashboard"] == "1"
    assert set(cm["data"]) == {"ascend-node.json"}
    model = json.loads(cm["data"]["ascend-node.json"])
    assert model == json.loads((COMPONENT / "dashboards" / "ascend-node.json").read_text())


def test_the_dashboard_is_a_grafana_model_with_a_node_variable() -> None:
    model = json.loads((COMPONENT / "dashboards" / "ascend-node.json").read_text())
    assert model["schemaVersion"] >= 39
    assert model["uid"] and model["title"]
    variables = {v["name"]: v for v in model["templating"]["list"]}
    assert variables["datasource"]["type"] == "datasource" and variables["datasource"]["query"] == "prometheus"
    assert variables["node"]["definition"] == "label_values(machine_npu_nums, node)"
    ids = [p["id"] for p in panels()]
    assert len(ids) == len(set(ids))
    for panel in panels():
        assert panel["datasource"] == {"type": "prometheus", "uid": "${datasource}"}, panel["title"]
        assert panel["targets"], panel["title"]
    for query in queries():
        assert 'node=~"$node"' in query.expr, query


def test_the_dashboard_has_the_issues_panels() -> None:
    """Chips by health and fault level, utilisation, HBM, temperature, power, network and HCCS
    (bandwidth, and the CRC errors of every port, 1..7)."""
    by_type = {(p["type"], p["title"]) for p in panels()}
    assert {("table", "Chips by health"), ("table", "Chips by fault level")} <= by_type
    exprs = " ".join(q.expr for q in queries())
    for family in (
        "npu_chip_info_health_status",
        "fault_manager_chips",
        "npu_chip_info_utilization",
        "npu_chip_info_hbm_used_memory",
        "npu_chip_info_temperature",
        "npu_chip_info_power",
        "npu_chip_info_bandwidth_tx",
        "npu_chip_info_hccs_bandwidth_info_total_tx",
        "npu_chip_info_hccs_bandwidth_info_total_rx",
        *(f"npu_chip_info_hccs_statistic_info_crc_err_cnt_{port}" for port in range(1, 8)),
    ):
        assert family in exprs, family
