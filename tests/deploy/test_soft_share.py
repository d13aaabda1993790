"""The soft-share component (deploy/kustomize/components/soft-share) on top of the pools that can
share a chip: it renders and validates, switches the plugin's soft share on with flags its real
settings accept, and adds to the plugin exactly two hostPaths at the same paths inside, the node
label Volcano shares on and nothing else."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
from ascend_common.adapters.settings import load_settings
from ascend_device_plugin.settings import PluginSettings

from tests.deploy.test_kustomize import (
    EXPORTER,
    FAULT_MANAGER,
    KUSTOMIZE,
    PLUGIN,
    Manifest,
    _daemonsets,
    _docs,
    _image_user,
    access_problems,
    render_pools,
    validate,
)

COMPONENT = KUSTOMIZE / "components" / "soft-share"
# The pools whose chips soft share supports (910B, A3; the simulator runs a 910B); the plugin
# refuses it on 310P/310B chips.
POOLS = ("ascend-910b", "ascend-a3", "simulated")
NODE_LABEL = "huawei.com/scheduler.chip1softsharedev.enable"
ENPU = "/etc/enpu"  # the reference's hard-coded parent of the per-pod dirs
CONFIG_DIR = "/share_device"  # the reference's documented softShareDevConfigDir
ADDED_ARGS = [
    "--volcano-type",
    "--share-dev-count",
    "100",
    "--soft-share-dev-config-dir",
    CONFIG_DIR,
    "--soft-share-npu-info-dir",
    ENPU,
]


@pytest.fixture(scope="module")
def shared(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Each pool rendered with the component, and without it, into files."""
    return render_pools(tmp_path_factory.mktemp("soft-share"), POOLS, COMPONENT)


def _plugin(path: Path) -> Manifest:
    return _daemonsets(_docs(path))[PLUGIN]


@pytest.mark.parametrize("pool", POOLS)
def test_pool_with_soft_share_validates_strictly(shared: dict[str, Path], pool: str) -> None:
    assert validate(shared[pool]) == ""


@pytest.mark.parametrize("pool", POOLS)
def test_soft_share_flags_switch_it_on_in_the_plugins_settings(shared: dict[str, Path], pool: str) -> None:
    (c,) = _plugin(shared[pool])["spec"]["template"]["spec"]["containers"]
    settings = load_settings(PluginSettings, c["args"], prog="ascend-device-plugin")
    assert settings.soft_share
    assert settings.volcano_type
    assert settings.soft_share_dev_config_dir == Path(CONFIG_DIR)
    assert settings.soft_share_npu_info_dir == Path(ENPU)


@pytest.mark.parametrize("pool", POOLS)
def test_soft_share_mounts_two_host_paths_at_the_same_paths(shared: dict[str, Path], pool: str) -> None:
    spec = _plugin(shared[pool])["spec"]["template"]["spec"]
    plain = _plugin(shared[f"{pool}-plain"])["spec"]["template"]["spec"]
    volumes = {v["name"]: v for v in spec["volumes"]}
    added = [v for v in spec["volumes"] if v not in plain["volumes"]]
    assert {v["hostPath"]["path"]: v["hostPath"]["type"] for v in added} == {
        ENPU: "DirectoryOrCreate",
        CONFIG_DIR: "DirectoryOrCreate",
    }
    (c,) = spec["containers"]
    (before,) = plain["containers"]
    mounts = [m for m in c["volumeMounts"] if m not in before["volumeMounts"]]
    # The plugin hands the kubelet host paths for the workload's mounts, so inside is outside;
    # it writes under both (per-pod dirs, shared-memory files): read-write, nothing broader.
    assert {(volumes[m["name"]]["hostPath"]["path"], m["mountPath"]) for m in mounts} == {
        (CONFIG_DIR, CONFIG_DIR),
        (ENPU, ENPU),
    }
    assert len(mounts) == 2
    assert not any(m.get("readOnly") or m.get("subPath") or m.get("mountPropagation") for m in mounts)


@pytest.mark.parametrize("pool", POOLS)
def test_soft_share_changes_nothing_else(shared: dict[str, Path], pool: str) -> None:
    """Least privilege: the plugin stays as hardened as the pool made it; the flags, the two
    mounts and the node label are the whole change; the other services are untouched."""
    with_it = _daemonsets(_docs(shared[pool]))
    plain = _daemonsets(_docs(shared[f"{pool}-plain"]))
    for service in (EXPORTER, FAULT_MANAGER):
        assert with_it[service] == plain[service]
    undone = copy.deepcopy(with_it[PLUGIN])
    spec = undone["spec"]["template"]["spec"]
    assert spec["nodeSelector"].pop(NODE_LABEL) == "true"
    (c,) = spec["containers"]
    assert c["args"][-len(ADDED_ARGS) :] == ADDED_ARGS
    del c["args"][-len(ADDED_ARGS) :]
    c["volumeMounts"] = [m for m in c["volumeMounts"] if m["name"] not in ("enpu", "soft-share-config")]
    spec["volumes"] = [v for v in spec["volumes"] if v["name"] not in ("enpu", "soft-share-config")]
    assert undone == plain[PLUGIN]


@pytest.mark.parametrize("pool", POOLS)
def test_plugin_can_write_its_soft_share_paths(shared: dict[str, Path], pool: str) -> None:
    """The hostPaths are root-owned 0755 (DirectoryOrCreate): the plugin's uid 0, every
    capability dropped, writes there as their owner."""
    assert access_problems(_plugin(shared[pool]), _image_user()) == []


def test_the_write_check_sees_the_soft_share_paths(shared: dict[str, Path]) -> None:
    ds = _plugin(shared["simulated"])
    ds["spec"]["template"]["spec"]["securityContext"]["runAsUser"] = 10001
    problems = access_problems(ds, _image_user())
    assert any(f"{ENPU}: cannot write" in p for p in problems), problems
    assert any(f"{CONFIG_DIR}: cannot write" in p for p in problems), problems
