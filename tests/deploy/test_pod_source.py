"""The pod-source-kubelet components (deploy/kustomize/components/pod-source-kubelet[-fine-grained]):
they render and validate strictly, switch both services to --pod-source kubelet with settings their
own parsers accept, take every pod read off their API-server RBAC, grant only get on nodes/proxy
(or nodes/pods on 1.33+), and change nothing else."""

from __future__ import annotations

import copy
import os
from pathlib import Path

import pytest
from ascend_common.adapters.pod_source import PodSourceSettings
from ascend_common.adapters.settings import load_settings
from ascend_device_plugin.settings import PluginSettings
from fault_manager.settings import FaultManagerSettings

from tests.deploy.test_kustomize import (
    EXPORTER,
    FAULT_MANAGER,
    KUSTOMIZE,
    PLUGIN,
    Manifest,
    _daemonsets,
    _docs,
    _image_user,
    _of_kind,
    _render,
    access_problems,
    render_pools,
    validate,
)

COMPONENT = KUSTOMIZE / "components" / "pod-source-kubelet"
FINE = KUSTOMIZE / "components" / "pod-source-kubelet-fine-grained"
POOLS = ("simulated", "ascend-910b")
ADDED_ARGS = ["--pod-source", "kubelet", "--kubelet-ca", "/etc/ascend/kubelet-ca/ca.crt"]
SERVICES: dict[str, type[PodSourceSettings]] = {PLUGIN: PluginSettings, FAULT_MANAGER: FaultManagerSettings}
ROLE = "ascend-kubelet-pods"


def _overlay(directory: Path, *components: Path, extra: str = "", files: dict[str, str] | None = None) -> str:
    """An operator's overlay of the simulated pool with `components` (in order), rendered."""
    directory.mkdir()
    for name, text in (files or {}).items():
        (directory / name).write_text(text)
    rel = [os.path.relpath(c, directory) for c in components]
    (directory / "kustomization.yaml").write_text(
        "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\n"
        f"resources: [{os.path.relpath(KUSTOMIZE / 'overlays' / 'simulated', directory)}]\n"
        f"components: [{', '.join(rel)}]\n" + extra
    )
    return _render(directory)


@pytest.fixture(scope="module")
def rendered(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    out = tmp_path_factory.mktemp("pod-source")
    files = render_pools(out, POOLS, COMPONENT)
    files["fine"] = out / "fine.yaml"
    files["fine"].write_text(_overlay(out / "fine", COMPONENT, FINE))
    # The operator's CA, as the component's comment tells: a configMapGenerator beside it.
    extra = "configMapGenerator:\n  - name: kubelet-serving-ca\n    namespace: ascend-system\n    files: [ca.crt]\n"
    pem = "-----BEGIN CERTIFICATE-----\nplaceholder\n-----END CERTIFICATE-----\n"
    files["with-ca"] = out / "with-ca.yaml"
    files["with-ca"].write_text(_overlay(out / "with-ca", COMPONENT, extra=extra, files={"ca.crt": pem}))
    return files


def _grants(docs: list[Manifest], kind: str, name: str) -> dict[str, set[str]]:
    (role,) = [d for d in _of_kind(docs, kind) if d["metadata"]["name"] == name]
    out: dict[str, set[str]] = {}
    for rule in role["rules"]:
        for resource in rule["resources"]:
            out.setdefault(resource, set()).update(rule["verbs"])
    return out


def _all_grants(docs: list[Manifest]) -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for role in _of_kind(docs, "Role", "ClusterRole"):
        for rule in role["rules"]:
            for resource in rule["resources"]:
                out.setdefault(resource, set()).update(rule["verbs"])
    return out


@pytest.mark.parametrize("variant", [*POOLS, "fine", "with-ca"])
def test_validates_strictly(rendered: dict[str, Path], variant: str) -> None:
    assert validate(rendered[variant]) == ""


@pytest.mark.parametrize("pool", POOLS)
@pytest.mark.parametrize("service", [PLUGIN, FAULT_MANAGER])
def test_both_services_read_pods_from_the_kubelet_they_run_on(
    rendered: dict[str, Path], pool: str, service: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    ds = _daemonsets(_docs(rendered[pool]))[service]
    (c,) = ds["spec"]["template"]["spec"]["containers"]
    env = {e["name"]: e for e in c["env"]}
    assert env["HOST_IP"]["valueFrom"]["fieldRef"]["fieldPath"] == "status.hostIP"  # the reference's variable
    assert env["KUBELET_PORT"]["value"] == "10250"
    # What the downward API and the kubelet give the container: HOST_IP and KUBELET_PORT, and the flags.
    monkeypatch.setenv("HOST_IP", "10.87.0.1")
    monkeypatch.setenv("KUBELET_PORT", env["KUBELET_PORT"]["value"])
    args = [a.replace("$(NODE_NAME)", "node-a") for a in c["args"]]
    settings = load_settings(SERVICES[service], args, prog=service)
    kubelet = settings.kubelet_source()
    assert kubelet is not None and kubelet.url == "https://10.87.0.1:10250/pods"
    assert kubelet.ca_file == Path("/etc/ascend/kubelet-ca/ca.crt") and not kubelet.insecure_skip_verify
    volumes = {v["name"]: v for v in ds["spec"]["template"]["spec"]["volumes"]}
    (mount,) = [m for m in c["volumeMounts"] if m["mountPath"] == "/etc/ascend/kubelet-ca"]
    assert mount["readOnly"] is True
    assert volumes[mount["name"]]["configMap"] == {
        "name": "kubelet-serving-ca",
        "items": [{"key": "ca.crt", "path": "ca.crt"}],
    }
    assert access_problems(ds, _image_user()) == []


@pytest.mark.parametrize("pool", POOLS)
def test_no_pod_read_on_the_api_server_and_nodes_proxy_get_only(rendered: dict[str, Path], pool: str) -> None:
    docs = _docs(rendered[pool])
    plain = _docs(rendered[f"{pool}-plain"])
    plugin = _grants(docs, "ClusterRole", PLUGIN)
    assert plugin["pods"] == {"patch"}, "the plugin's annotations stay on the API server"
    assert "pods" not in _grants(docs, "ClusterRole", FAULT_MANAGER)
    assert _grants(docs, "ClusterRole", ROLE) == {"nodes/proxy": {"get"}}
    (binding,) = [b for b in _of_kind(docs, "ClusterRoleBinding") if b["roleRef"]["name"] == ROLE]
    assert {(s["namespace"], s["name"]) for s in binding["subjects"]} == {
        ("ascend-system", PLUGIN),
        ("ascend-system", FAULT_MANAGER),
    }
    # Nothing else in RBAC moved: the rest of each role is the plain pool's.
    before, after = _all_grants(plain), _all_grants(docs)
    assert before.pop("pods") == {"get", "list", "watch", "patch"}
    assert after.pop("pods") == {"patch"} and after.pop("nodes/proxy") == {"get"}
    assert after == before


def test_fine_grained_grants_nodes_pods_instead_of_nodes_proxy(rendered: dict[str, Path]) -> None:
    docs = _docs(rendered["fine"])
    assert _grants(docs, "ClusterRole", ROLE) == {"nodes/pods": {"get"}}
    assert "nodes/proxy" not in _all_grants(docs)


def test_the_operators_ca_configmap_is_the_one_mounted(rendered: dict[str, Path]) -> None:
    docs = _docs(rendered["with-ca"])
    (cm,) = [d for d in _of_kind(docs, "ConfigMap") if d["metadata"]["name"].startswith("kubelet-serving-ca")]
    assert cm["metadata"]["namespace"] == "ascend-system" and "ca.crt" in cm["data"]
    for service in SERVICES:
        volumes = _daemonsets(docs)[service]["spec"]["template"]["spec"]["volumes"]
        (ca,) = [v for v in volumes if v["name"] == "kubelet-ca"]
        assert ca["configMap"]["name"] == cm["metadata"]["name"], "the hash-suffixed name reaches the volume"


@pytest.mark.parametrize("pool", POOLS)
def test_changes_nothing_else(rendered: dict[str, Path], pool: str) -> None:
    with_it = _daemonsets(_docs(rendered[pool]))
    plain = _daemonsets(_docs(rendered[f"{pool}-plain"]))
    assert with_it[EXPORTER] == plain[EXPORTER]
    for service in SERVICES:
        undone = copy.deepcopy(with_it[service])
        spec = undone["spec"]["template"]["spec"]
        (c,) = spec["containers"]
        assert c["args"][-len(ADDED_ARGS) :] == ADDED_ARGS
        del c["args"][-len(ADDED_ARGS) :]
        c["env"] = [e for e in c["env"] if e["name"] not in ("HOST_IP", "KUBELET_PORT")]
        c["volumeMounts"] = [m for m in c["volumeMounts"] if m["name"] != "kubelet-ca"]
        spec["volumes"] = [v for v in spec["volumes"] if v["name"] != "kubelet-ca"]
        assert undone == plain[service]
