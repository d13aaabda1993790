"""The 950 component (deploy/kustomize/components/ascend-950) on top of the pools: it renders and
validates strictly; the exporter reads the npu-nic mapping from a read-only hostPath through its
real settings; the plugin gets the RAS root (read-write, its real --ras-net-root-path) and the
driver's 950 topology directory (read-only) where its code reads them; nothing else changes."""

from __future__ import annotations

import copy
import os
from pathlib import Path

import pytest
from ascend_common.adapters.settings import load_settings
from ascend_common.products import HCCL_TOPO_FILES
from ascend_device_plugin.settings import PluginSettings

from tests.deploy.test_kustomize import (
    EXPORTER,
    FAULT_MANAGER,
    KUSTOMIZE,
    PLUGIN,
    Manifest,
    _daemonsets,
    _docs,
    _exporter_settings,
    _image_user,
    _mount_of,
    access_problems,
    render_pools,
    validate,
)

COMPONENT = KUSTOMIZE / "components" / "ascend-950"
# No pool overlay is the 950's own yet: the real pools and the simulator (which runs a5 profiles).
POOLS = ("ascend-910b", "ascend-a3", "simulated")
MAPPING = Path("/user/mindx-dl/npu/npu-nic-mapping.json")  # where the reference's image has it
RAS_ROOT = Path("/user/mindx-dl/ras")
TOPO_DIR = "/usr/local/Ascend/driver/topo/950"
EXPORTER_ARGS = ["--npu-nic-mapping", str(MAPPING)]
PLUGIN_ARGS = ["--ras-net-root-path", str(RAS_ROOT)]


@pytest.fixture(scope="module")
def rendered950(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    return render_pools(tmp_path_factory.mktemp("ascend-950"), POOLS, COMPONENT)


def _ds(path: Path, service: str) -> Manifest:
    return _daemonsets(_docs(path))[service]


@pytest.mark.parametrize("pool", POOLS)
def test_pool_with_the_950_component_validates_strictly(rendered950: dict[str, Path], pool: str) -> None:
    assert validate(rendered950[pool]) == ""


@pytest.mark.parametrize("pool", POOLS)
def test_exporter_reads_the_mapping_from_a_read_only_host_dir(
    rendered950: dict[str, Path], pool: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    ds = _ds(rendered950[pool], EXPORTER)
    settings = _exporter_settings(ds, monkeypatch)
    assert settings.npu_nic_mapping == MAPPING
    mount, volume = _mount_of(ds, MAPPING)
    assert (mount["mountPath"], mount.get("readOnly")) == (str(MAPPING.parent), True)
    assert volume["hostPath"] == {"path": str(MAPPING.parent), "type": "DirectoryOrCreate"}


@pytest.mark.parametrize("pool", POOLS)
def test_plugin_gets_the_ras_root_and_the_topology_dir_where_it_reads_them(
    rendered950: dict[str, Path], pool: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    ds = _ds(rendered950[pool], PLUGIN)
    (c,) = ds["spec"]["template"]["spec"]["containers"]
    for name in [n for n in os.environ if n.startswith("ASCEND_DEVICE_PLUGIN_")]:
        monkeypatch.delenv(name)
    # The settings check the root is a directory: parse them with the same args over a real one.
    args = [str(tmp_path) if a == str(RAS_ROOT) else a for a in c["args"]]
    assert load_settings(PluginSettings, args, prog="ascend-device-plugin").ras_net_root_path == tmp_path
    assert c["args"][-2:] == PLUGIN_ARGS
    mount, volume = _mount_of(ds, RAS_ROOT)
    assert (mount["mountPath"], bool(mount.get("readOnly"))) == (str(RAS_ROOT), False)  # it writes rack-<n>/
    assert volume["hostPath"] == {"path": str(RAS_ROOT), "type": "DirectoryOrCreate"}
    # Every HCCL topology file the plugin reads (a card's edges, the RAS copy) is under the mount.
    for topo in HCCL_TOPO_FILES.values():
        mount, volume = _mount_of(ds, Path(topo))
        assert (mount["mountPath"], mount.get("readOnly")) == (TOPO_DIR, True), topo
        assert volume["hostPath"] == {"path": TOPO_DIR, "type": "Directory"}


@pytest.mark.parametrize("pool", POOLS)
def test_the_950_component_changes_nothing_else(rendered950: dict[str, Path], pool: str) -> None:
    with_it = _daemonsets(_docs(rendered950[pool]))
    plain = _daemonsets(_docs(rendered950[f"{pool}-plain"]))
    assert with_it[FAULT_MANAGER] == plain[FAULT_MANAGER]
    for service, args, names in (
        (EXPORTER, EXPORTER_ARGS, {"npu-nic-mapping"}),
        (PLUGIN, PLUGIN_ARGS, {"topo-950", "ras-net-root"}),
    ):
        undone = copy.deepcopy(with_it[service])
        spec = undone["spec"]["template"]["spec"]
        (c,) = spec["containers"]
        assert c["args"][-len(args) :] == args
        del c["args"][-len(args) :]
        assert {m["name"] for m in c["volumeMounts"]} >= names
        c["volumeMounts"] = [m for m in c["volumeMounts"] if m["name"] not in names]
        spec["volumes"] = [v for v in spec["volumes"] if v["name"] not in names]
        assert undone == plain[service], service


@pytest.mark.parametrize("pool", POOLS)
def test_every_container_can_use_what_the_component_mounts(rendered950: dict[str, Path], pool: str) -> None:
    for service in (EXPORTER, PLUGIN):
        assert access_problems(_ds(rendered950[pool], service), _image_user()) == []
