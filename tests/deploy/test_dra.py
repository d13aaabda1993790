"""The DRA components on top of every pool, one per resource.k8s.io level: components/dra (v1,
Kubernetes 1.34+) and components/dra-v1beta1 (1.32, 1.33). Each renders, validates strictly against
the Kubernetes versions it is for and would be refused by the others, switches the plugin to the DRA
driver with flags its real settings accept, mounts the three host paths where the settings put the
sockets, checkpoint and CDI specs, grants exactly the resource.k8s.io calls the driver makes, and its
ValidatingAdmissionPolicy (evaluated here with cel-python) lets the plugin write its own node's
ResourceSlice only."""

from __future__ import annotations

import copy
import os
import re
import subprocess
import sys
import textwrap
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import celpy
import pytest
from ascend_common.adapters.settings import load_settings
from ascend_device_plugin.dra.slice_devices import API_VERSIONS, DRIVER, resource_slice, slice_name
from ascend_device_plugin.settings import PluginSettings
from celpy.adapter import json_to_cel

from tests.deploy.test_kustomize import (
    EXPORTER,
    FAULT_MANAGER,
    KUSTOMIZE,
    OVERLAYS,
    PLUGIN,
    ROOT,
    Manifest,
    _daemonsets,
    _docs,
    _image_user,
    _of_kind,
    access_problems,
    render_pools,
    render_with_component,
)

COMPONENTS = KUSTOMIZE / "components"
DRIVER_KUBE = ROOT / "services" / "device-plugin" / "src" / "ascend_device_plugin" / "dra" / "resource_api.py"
DOCS = ROOT / "docs" / "dra.md"
# The resource.k8s.io versions an apiserver serves with DRA switched on as docs/dra.md says. The
# schemas cannot tell: each release's OpenAPI documents every version it has, served or not (1.36's
# has v1beta1). Read in kube-apiserver (pkg/controlplane/instance.go,
# betaAPIGroupVersionsDisabledByDefault lists resource v1beta1, and from 1.33 v1beta2, in 1.32
# through 1.36): before 1.34 DRA is off and is switched on with
# --runtime-config=resource.k8s.io/v1beta1=true (1.33's scheduler, kubelet and controllers still
# use v1beta1); from 1.34 v1 is GA and on, the betas stay off.
SERVED = {"1.32": {"v1beta1"}, "1.33": {"v1beta1"}, "1.34": {"v1"}, "1.35": {"v1"}, "1.36": {"v1"}}


@dataclass(frozen=True)
class Level:
    """A DRA component and the Kubernetes versions it is for (`versions`) and not for (`refused`)."""

    component: str
    api: str  # the resource.k8s.io version of its DeviceClass
    versions: tuple[str, ...]
    refused: tuple[str, ...]

    @property
    def path(self) -> Path:
        return COMPONENTS / self.component


LEVELS = (
    Level("dra", "v1", ("1.34.0", "1.35.0", "1.36.0"), ("1.32.0", "1.33.0")),
    Level("dra-v1beta1", "v1beta1", ("1.32.0", "1.33.0"), ("1.34.0", "1.36.0")),
)
REGISTRY = "/var/lib/kubelet/plugins_registry"
DRIVER_DIR = f"/var/lib/kubelet/plugins/{DRIVER}"
CDI = "/var/run/cdi"
ADDED_ARGS = ["--kubelet-api", "dra"]
SERVICE_ACCOUNT = "system:serviceaccount:ascend-system:ascend-device-plugin"
NODE_NAME_KEY = "authentication.kubernetes.io/node-name"
HTTP_VERBS = {"GET": "get", "POST": "create", "PUT": "update", "PATCH": "patch", "DELETE": "delete"}


@pytest.fixture(scope="module")
def levels(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Path]]:
    """Each pool rendered with each level's component, and without it, into files (by component)."""
    return {lv.component: render_pools(tmp_path_factory.mktemp(lv.component), OVERLAYS, lv.path) for lv in LEVELS}


@pytest.fixture(scope="module", params=LEVELS, ids=lambda lv: lv.component)
def level(request: pytest.FixtureRequest) -> Level:
    found: Level = request.param
    return found


@pytest.fixture(scope="module")
def dra(levels: dict[str, dict[str, Path]], level: Level) -> dict[str, Path]:
    """Each pool rendered with the level's component, and without it."""
    return levels[level.component]


def validate(path: Path, version: str) -> str:
    """kubernetes-validate's complaints about a rendered file against `version` ("" when it passes)."""
    done = subprocess.run(
        [sys.executable, "-m", "kubernetes_validate", "--strict", "--no-warn", "-k", version, str(path)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    return "" if done.returncode == 0 else done.stdout + done.stderr


def checked(path: Path, version: str) -> set[str]:
    """The resources kubernetes-validate found a schema for and passed (`kind/name`)."""
    done = subprocess.run(
        [sys.executable, "-m", "kubernetes_validate", "--strict", "-k", version, str(path)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    return set(re.findall(r"passed for resource (\S+) against version", done.stdout + done.stderr))


def _named(doc: Manifest) -> str:
    """A document as kubernetes-validate names it (`kind/name`)."""
    return f"{doc['kind'].lower()}/{doc['metadata']['name']}"


def not_applied(path: Path, version: str) -> list[str]:
    """The documents of a rendered file that an apiserver of `version` with DRA on would refuse for
    what they are, beyond what `validate` reports: a kind or version its schemas lack (which
    --no-warn lets pass) or a resource.k8s.io version it does not serve."""
    passed = checked(path, version)
    served = SERVED[".".join(version.split(".")[:2])]
    problems = []
    for doc in _docs(path):
        group, _, api = doc["apiVersion"].rpartition("/")
        if _named(doc) not in passed:
            problems.append(f"{_named(doc)}: {doc['apiVersion']} {doc['kind']} did not pass {version}'s schemas")
        elif group == "resource.k8s.io" and api not in served:
            problems.append(f"{_named(doc)}: {version} does not serve {doc['apiVersion']} (served: {sorted(served)})")
    return problems


def _plugin(path: Path) -> Manifest:
    return _daemonsets(_docs(path))[PLUGIN]


def _one(docs: list[Manifest], kind: str) -> Manifest:
    (found,) = _of_kind(docs, kind)
    return found


def _settings(ds: Manifest, monkeypatch: pytest.MonkeyPatch) -> PluginSettings:
    """The plugin's settings as its own parser reads the DaemonSet's args (no environment)."""
    for name in [n for n in os.environ if n.startswith("ASCEND_DEVICE_PLUGIN_")]:
        monkeypatch.delenv(name)
    (c,) = ds["spec"]["template"]["spec"]["containers"]
    return load_settings(PluginSettings, c["args"], prog="ascend-device-plugin")


# ---- rendering and validation -----------------------------------------------------------------


@pytest.mark.parametrize("pool", OVERLAYS)
def test_pool_with_dra_validates_strictly(level: Level, dra: dict[str, Path], pool: str) -> None:
    """Every document has a schema in each version the level is for, passes it strictly and is of
    an API version that version serves."""
    for version in level.versions:
        assert validate(dra[pool], version) == "", version
        assert not_applied(dra[pool], version) == [], version


def test_a_level_is_refused_outside_its_versions(level: Level, dra: dict[str, Path]) -> None:
    """The DeviceClass is the one object that needs its level. A v1beta1 DeviceClass (what
    components/dra shipped for every version) passes the 1.34 and 1.36 schemas, which document the
    betas too, but those apiservers do not serve it, so `kubectl apply` fails; a v1 one does not
    exist before 1.34."""
    for version in level.refused:
        (problem,) = not_applied(dra["simulated"], version)
        if level.api == "v1":
            assert problem == f"deviceclass/{DRIVER}: resource.k8s.io/v1 DeviceClass did not pass {version}'s schemas"
        else:
            assert validate(dra["simulated"], version) == ""
            assert problem.startswith(f"deviceclass/{DRIVER}: {version} does not serve resource.k8s.io/v1beta1 ")


def test_the_levels_differ_in_the_device_class_version_only(levels: dict[str, dict[str, Path]]) -> None:
    """components/dra-v1beta1 is components/dra with its DeviceClass in v1beta1: the plugin, RBAC
    and policy are written once, and the DeviceClass spec is valid in both versions."""
    for pool in OVERLAYS:
        renders = {}
        for lv in LEVELS:
            docs = _docs(levels[lv.component][pool])
            assert _one(docs, "DeviceClass")["apiVersion"] == f"resource.k8s.io/{lv.api}"
            _one(docs, "DeviceClass")["apiVersion"] = "resource.k8s.io/<level>"
            renders[lv.component] = docs
        assert renders["dra"] == renders["dra-v1beta1"], pool


def test_the_validator_knows_the_dra_kinds(level: Level, dra: dict[str, Path], tmp_path: Path) -> None:
    """The DeviceClass and the policy are checked, not waved through: a misspelt field fails, and
    before 1.32 the DeviceClass kind does not exist at all."""
    text = dra["simulated"].read_text()
    bad = tmp_path / "bad.yaml"
    bad.write_text(text.replace("  selectors:\n  - cel:", "  selector:\n  - cel:"))
    assert bad.read_text() != text
    assert "selector" in validate(bad, level.versions[0])
    bad.write_text(text.replace("validationActions:", "validationAction:"))
    assert "validationAction" in validate(bad, level.versions[0])
    # With --no-warn a kind without a schema passes silently, as DeviceClass does against 1.30; every
    # document is checked against each of the level's versions, each named as passed.
    assert validate(dra["simulated"], "1.30.0") == ""
    assert "deviceclass/npu.huawei.com" not in checked(dra["simulated"], "1.30.0")
    for version in level.versions:
        assert checked(dra["simulated"], version) == {_named(d) for d in _docs(dra["simulated"])}


@pytest.mark.parametrize("pool", OVERLAYS)
def test_the_cluster_objects_are_the_same_for_every_pool(dra: dict[str, Path], pool: str) -> None:
    """Several pools with the component applied to one cluster: the DRA objects are identical."""
    kinds = ("DeviceClass", "ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding")
    ours = [d for d in _docs(dra[pool]) if d["kind"] in kinds or d["metadata"]["name"].endswith("-dra")]
    first = [d for d in _docs(dra[OVERLAYS[0]]) if d["kind"] in kinds or d["metadata"]["name"].endswith("-dra")]
    assert len(ours) == 5
    assert ours == first


# ---- the plugin -------------------------------------------------------------------------------


@pytest.mark.parametrize("pool", OVERLAYS)
def test_the_plugin_runs_the_dra_driver(dra: dict[str, Path], pool: str, monkeypatch: pytest.MonkeyPatch) -> None:
    settings = _settings(_plugin(dra[pool]), monkeypatch)
    assert settings.kubelet_api == "dra"
    assert settings.kube == "api"


@pytest.mark.parametrize("pool", OVERLAYS)
def test_the_driver_paths_are_host_paths_at_the_same_place(
    dra: dict[str, Path], pool: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The kubelet dials the sockets at the paths the driver registers, and the runtime reads the
    CDI specs at the host's /var/run/cdi: each directory the settings name is a read-write hostPath
    mounted where it is on the host, and the one for the plugins dir is the driver's own."""
    ds = _plugin(dra[pool])
    settings = _settings(ds, monkeypatch)
    spec = ds["spec"]["template"]["spec"]
    volumes = {v["name"]: v for v in spec["volumes"]}
    (c,) = spec["containers"]
    mounts = {m["mountPath"]: m for m in c["volumeMounts"]}
    for path in (settings.plugins_registry_dir, settings.kubelet_plugins_dir / DRIVER, settings.cdi_root):
        mount = mounts[str(path)]
        assert volumes[mount["name"]]["hostPath"]["path"] == str(path)
        assert not mount.get("readOnly") and not mount.get("subPath")
    assert str(settings.kubelet_plugins_dir) not in mounts, "the CSI drivers' sockets stay out of reach"


@pytest.mark.parametrize("pool", OVERLAYS)
def test_dra_changes_nothing_else(dra: dict[str, Path], pool: str) -> None:
    """Least privilege: the flag, the three mounts and their volumes are the whole change to the
    plugin; the other services are untouched."""
    with_it = _daemonsets(_docs(dra[pool]))
    plain = _daemonsets(_docs(dra[f"{pool}-plain"]))
    for service in (EXPORTER, FAULT_MANAGER):
        assert with_it[service] == plain[service]
    undone = copy.deepcopy(with_it[PLUGIN])
    spec = undone["spec"]["template"]["spec"]
    (c,) = spec["containers"]
    assert c["args"][-len(ADDED_ARGS) :] == ADDED_ARGS
    del c["args"][-len(ADDED_ARGS) :]
    added = {"plugins-registry": REGISTRY, "dra-plugin": DRIVER_DIR, "cdi": CDI}
    assert {m["name"]: m["mountPath"] for m in c["volumeMounts"] if m["name"] in added} == added
    assert {v["name"]: v["hostPath"]["path"] for v in spec["volumes"] if v["name"] in added} == added
    types = {v["name"]: v["hostPath"]["type"] for v in spec["volumes"] if v["name"] in added}
    # The kubelet makes plugins_registry; the driver's dir and the CDI dir may not exist yet.
    assert types == {"plugins-registry": "Directory", "dra-plugin": "DirectoryOrCreate", "cdi": "DirectoryOrCreate"}
    c["volumeMounts"] = [m for m in c["volumeMounts"] if m["name"] not in added]
    spec["volumes"] = [v for v in spec["volumes"] if v["name"] not in added]
    assert undone == plain[PLUGIN]


@pytest.mark.parametrize("pool", OVERLAYS)
def test_the_plugin_can_write_its_dra_paths(dra: dict[str, Path], pool: str) -> None:
    assert access_problems(_plugin(dra[pool]), _image_user()) == []


def test_the_write_check_sees_the_dra_paths(dra: dict[str, Path]) -> None:
    ds = _plugin(dra["simulated"])
    ds["spec"]["template"]["spec"]["securityContext"]["runAsUser"] = 10001
    problems = access_problems(ds, _image_user())
    for path in (REGISTRY, DRIVER_DIR, CDI):
        assert any(f"{path}: cannot write" in p for p in problems), problems


def _both_recipe() -> str:
    """The `patches:` block components/dra's header tells an operator to add for `both`."""
    lines = (COMPONENTS / "dra" / "kustomization.yaml").read_text().splitlines()
    start = lines.index("#   patches:")
    block = []
    for line in lines[start:]:
        if not line.startswith("#   "):
            break
        block.append(line[1:])
    return textwrap.dedent("\n".join(block)) + "\n"


def test_the_documented_recipe_for_both_apis_gives_both(
    level: Level, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    recipe = _both_recipe()
    assert "--kubelet-api=both" in recipe
    rendered = tmp_path / "both.yaml"
    rendered.write_text(render_with_component(tmp_path / "both", "ascend-910b", level.path, recipe))
    assert validate(rendered, level.versions[0]) == ""
    ds = _plugin(rendered)
    settings = _settings(ds, monkeypatch)
    assert settings.kubelet_api == "both"
    # The device-plugin half needs the kubelet's device-plugins dir, which the base mounts.
    (c,) = ds["spec"]["template"]["spec"]["containers"]
    assert str(settings.plugin_dir) in {m["mountPath"] for m in c["volumeMounts"]}


# ---- RBAC -------------------------------------------------------------------------------------


def _driver_calls() -> set[str]:
    """The RBAC verbs of the requests the driver's resource.k8s.io client sends."""
    methods = set(re.findall(r'\.request\(\s*"([A-Z]+)"', DRIVER_KUBE.read_text()))
    assert methods, f"no request calls found in {DRIVER_KUBE}"
    return {HTTP_VERBS[m] for m in methods}


@pytest.mark.parametrize("pool", OVERLAYS)
def test_rbac_grants_the_drivers_calls_and_no_more(dra: dict[str, Path], pool: str) -> None:
    docs = _docs(dra[pool])
    (role,) = [r for r in _of_kind(docs, "ClusterRole") if r["metadata"]["name"] == "ascend-device-plugin-dra"]
    grants: dict[str, set[str]] = {}
    for rule in role["rules"]:
        assert rule["apiGroups"] == ["resource.k8s.io"]
        assert "resourceNames" not in rule
        for resource in rule["resources"]:
            grants.setdefault(resource, set()).update(rule["verbs"])
    assert grants == {"resourceslices": {"get", "create", "update"}, "resourceclaims": {"get"}}
    assert set().union(*grants.values()) == _driver_calls()  # GET, POST, PUT: nothing listed or watched
    (binding,) = [b for b in _of_kind(docs, "ClusterRoleBinding") if b["roleRef"]["name"] == role["metadata"]["name"]]
    sa = _plugin(dra[pool])["spec"]["template"]["spec"]["serviceAccountName"]
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": sa, "namespace": "ascend-system"}]
    # The DRA grants come on top of the plugin's own, which stay as they are.
    plain = _of_kind(_docs(dra[f"{pool}-plain"]), "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding")
    assert [d for d in _of_kind(docs, "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding")
            if not d["metadata"]["name"].endswith("-dra")] == plain  # fmt: skip


def test_the_device_class_selects_the_driver(level: Level, dra: dict[str, Path]) -> None:
    device_class = _one(_docs(dra["simulated"]), "DeviceClass")
    assert device_class["apiVersion"] == f"resource.k8s.io/{level.api}"
    assert device_class["metadata"] == {"name": DRIVER, "labels": {"app.kubernetes.io/part-of": "ascend-node-stack"}}
    (selector,) = device_class["spec"]["selectors"]
    program = _program(selector["cel"]["expression"])
    assert program.evaluate({"device": json_to_cel({"driver": DRIVER})}) == celpy.celtypes.BoolType(True)
    assert program.evaluate({"device": json_to_cel({"driver": "gpu.example.com"})}) == celpy.celtypes.BoolType(False)


# ---- the ValidatingAdmissionPolicy, evaluated ---------------------------------------------------


def _program(expression: str) -> Any:
    env = celpy.Environment()
    return env.program(env.compile(expression))


def _admit(policy: Manifest, request: Mapping[str, Any], obj: Any, old: Any) -> tuple[bool, str | None]:
    """(matched, denial message or None) of the policy for one request, as the apiserver evaluates
    it: matchConditions, then the variables in order, then each validation until one fails."""
    spec = policy["spec"]
    activation: dict[str, Any] = {
        "request": json_to_cel(dict(request)),
        "object": json_to_cel(obj),
        "oldObject": json_to_cel(old),
    }
    if not all(_program(c["expression"]).evaluate(activation) for c in spec["matchConditions"]):
        return False, None
    variables: dict[str, Any] = {}
    for variable in spec["variables"]:
        activation["variables"] = json_to_cel(variables)
        variables[variable["name"]] = _to_json(_program(variable["expression"]).evaluate(activation))
    activation["variables"] = json_to_cel(variables)
    for validation in spec["validations"]:
        if not _program(validation["expression"]).evaluate(activation):
            if "messageExpression" in validation:
                return True, str(_program(validation["messageExpression"]).evaluate(activation))
            return True, " ".join(str(validation["message"]).split())
    return True, None


def _to_json(value: Any) -> Any:
    """A CEL value back as plain JSON (celpy's map and list types wrap dict and list)."""
    if isinstance(value, Mapping):
        return {str(k): _to_json(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_to_json(v) for v in value]
    if isinstance(value, celpy.celtypes.StringType):
        return str(value)
    if isinstance(value, celpy.celtypes.BoolType):
        return bool(value)
    if isinstance(value, celpy.celtypes.IntType):
        return int(value)
    return value


def _request(operation: str, node: str | None, user: str = SERVICE_ACCOUNT) -> dict[str, Any]:
    user_info: dict[str, Any] = {"username": user}
    if node is not None:
        user_info["extra"] = {NODE_NAME_KEY: [node], "authentication.kubernetes.io/pod-name": ["p"]}
    return {"operation": operation, "userInfo": user_info}


@pytest.fixture(scope="module")
def policy(dra: dict[str, Path]) -> Manifest:
    return _one(_docs(dra["ascend-910b"]), "ValidatingAdmissionPolicy")


def _slice(node: str, level: Level) -> dict[str, Any]:
    """The slice the driver writes for `node` (dra.slice_devices, as the publisher sends it) in the version a
    cluster of the level serves."""
    return resource_slice(node, [], 1, level.api)


def test_the_policy_matches_the_plugins_service_account(dra: dict[str, Path], policy: Manifest) -> None:
    ds = _plugin(dra["ascend-910b"])
    sa = f"system:serviceaccount:{ds['metadata']['namespace']}:{ds['spec']['template']['spec']['serviceAccountName']}"
    assert sa == SERVICE_ACCOUNT
    (rule,) = policy["spec"]["matchConstraints"]["resourceRules"]
    assert rule["apiGroups"] == ["resource.k8s.io"] and rule["resources"] == ["resourceslices"]
    # Every version the plugin may write: with matchPolicy Equivalent one would do, but only for
    # versions the apiserver serves; "*" or the list leaves nothing to that.
    assert rule["apiVersions"] == ["*"] or set(API_VERSIONS) <= set(rule["apiVersions"])
    assert set(rule["operations"]) >= {"CREATE", "UPDATE"}
    assert policy["spec"]["failurePolicy"] == "Fail"  # a policy that cannot be evaluated denies
    binding = _one(_docs(dra["ascend-910b"]), "ValidatingAdmissionPolicyBinding")
    assert binding["spec"] == {"policyName": policy["metadata"]["name"], "validationActions": ["Deny"]}


@pytest.mark.parametrize("operation", ["CREATE", "UPDATE"])
def test_the_plugin_writes_its_own_nodes_slice(level: Level, policy: Manifest, operation: str) -> None:
    mine = _slice("node-a", level)
    assert mine["metadata"]["name"] == slice_name("node-a")
    assert _admit(policy, _request(operation, "node-a"), mine, mine if operation == "UPDATE" else None) == (True, None)


@pytest.mark.parametrize("operation", ["CREATE", "UPDATE"])
def test_another_nodes_slice_is_refused_naming_both(level: Level, policy: Manifest, operation: str) -> None:
    matched, denied = _admit(policy, _request(operation, "node-a"), _slice("node-b", level), None)
    assert matched
    assert denied == (
        "the device plugin on node node-a may write only its own node's ResourceSlices, not one of node node-b"
    )


def test_a_slice_of_no_node_is_refused(level: Level, policy: Manifest) -> None:
    no_node = _slice("node-a", level)
    del no_node["spec"]["nodeName"]
    _, denied = _admit(policy, _request("CREATE", "node-a"), no_node, None)
    assert denied is not None and denied.endswith("not a slice of no node")


def test_a_token_without_a_node_is_refused(level: Level, policy: Manifest) -> None:
    _, denied = _admit(policy, _request("CREATE", None), _slice("node-a", level), None)
    assert denied is not None and "pod-bound service-account token" in denied
    request = _request("CREATE", None)
    request["userInfo"]["extra"] = {NODE_NAME_KEY: []}
    _, denied = _admit(policy, request, _slice("node-a", level), None)
    assert denied is not None and "pod-bound service-account token" in denied


def test_delete_is_judged_by_the_old_object(level: Level, policy: Manifest) -> None:
    assert _admit(policy, _request("DELETE", "node-a"), None, _slice("node-a", level)) == (True, None)
    _, denied = _admit(policy, _request("DELETE", "node-a"), None, _slice("node-b", level))
    assert denied is not None and denied.endswith("not one of node node-b")


def test_other_users_are_not_matched(level: Level, policy: Manifest) -> None:
    """The kubelet deletes a node's slices and administrators may edit any: not this policy's business."""
    for user in ("system:node:node-a", "kubernetes-admin", "system:serviceaccount:other:ascend-device-plugin"):
        assert _admit(policy, _request("DELETE", "node-a", user), None, _slice("node-b", level)) == (False, None)


# ---- docs/dra.md's examples ---------------------------------------------------------------------


def _yaml_blocks(text: str) -> list[str]:
    return re.findall(r"^```yaml\n(.*?)^```$", text, flags=re.MULTILINE | re.DOTALL)


def test_the_docs_examples_apply_where_they_are_for(tmp_path: Path) -> None:
    """Each fenced yaml block of docs/dra.md is written for one level, the resource.k8s.io version of
    its objects, and applies strictly on each of that level's versions: the examples in v1 and the
    note for 1.32 and 1.33 in v1beta1."""
    apis = []
    for i, block in enumerate(_yaml_blocks(DOCS.read_text())):
        path = tmp_path / f"block{i}.yaml"
        path.write_text(block)
        group_versions = {d["apiVersion"].rpartition("/") for d in _docs(path)}
        (api,) = {version for group, _, version in group_versions if group == "resource.k8s.io"}
        (lv,) = [lv for lv in LEVELS if lv.api == api]
        for version in lv.versions:
            assert validate(path, version) == "", (i, version)
            assert not_applied(path, version) == [], (i, version)
        apis.append(api)
    assert sorted(apis) == ["v1", "v1beta1"]
