"""The RAS rack topology file (pkg/topology rack_topology_test.go, topo_test.go; issue 25's RAS row)."""

from __future__ import annotations

import asyncio
import hashlib
import logging
from pathlib import Path

import pytest
from ascend_common.adapters.settings import load_settings
from ascend_common.products import HCCL_TOPO_FILES, ProductType
from ascend_common.superpod import NO_SUPER_POD, SuperPod
from ascend_device_plugin.ras_topology import (
    RasTarget,
    RasTopologyWriter,
    needs_write,
    ras_target,
    sync_once,
)
from ascend_device_plugin.settings import PluginSettings
from pydantic import ValidationError

POD = SuperPod(super_pod_id=5, server_index=2, rack_id=3, super_pod_type=ProductType.POD_1D, scale_type=64)
TOPO = b'{"edge_list": [], "version": "1.0"}'


def host(tmp_path: Path, pod: SuperPod = POD, content: bytes = TOPO) -> tuple[Path, Path]:
    """A RAS root and a source root holding the node type's HCCL topology file."""
    root, source_root = tmp_path / "ras", tmp_path / "host"
    root.mkdir()
    if pod.super_pod_type in HCCL_TOPO_FILES:
        source = source_root / HCCL_TOPO_FILES[pod.super_pod_type].lstrip("/")
        source.parent.mkdir(parents=True)
        source.write_bytes(content)
    return root, source_root


# --- the decision ---------------------------------------------------------------------------------


def test_the_issue_row_targets_rack_3_topo_2_from_atlas_950_1() -> None:
    target = ras_target(Path("/ras"), POD)
    assert target == RasTarget(
        super_pod_dir=Path("/ras/cluster/super-pod-5"),
        rack_dir=Path("/ras/cluster/super-pod-5/rack-3"),
        file=Path("/ras/cluster/super-pod-5/rack-3/topo_2.json"),
        source=Path("/usr/local/Ascend/driver/topo/950/atlas_950_1.json"),
    )


@pytest.mark.parametrize(
    ("super_pod_type", "source"),
    [
        pytest.param(ProductType.SERVER, "atlas_850_1.json", id="type 0 server 8P"),
        pytest.param(ProductType.POD_1D, "atlas_950_1.json", id="type 1 pod 1D"),
        pytest.param(ProductType.POD_2D, "atlas_950_2.json", id="type 2 pod 2D"),
        pytest.param(ProductType.SERVER_16P, "atlas_850_2.json", id="type 3 server 16P"),
        pytest.param(ProductType.SERVER_32P, "atlas_850_3.json", id="type 4 server 32P"),
    ],
)
def test_topoFilePathMap(super_pod_type: int, source: str) -> None:
    pod = SuperPod(super_pod_id=1, server_index=0, rack_id=0, super_pod_type=super_pod_type)
    target = ras_target(Path("/ras"), pod)
    assert target is not None and target.source.name == source


@pytest.mark.parametrize(
    "pod",
    [
        # TestWriteTopology "superPodType is invalid": no file of that type, nothing written.
        pytest.param(SuperPod(super_pod_id=5, server_index=2, rack_id=3, super_pod_type=10), id="type invalid"),
        pytest.param(SuperPod(super_pod_id=5, server_index=2, rack_id=3, super_pod_type=5), id="1P card: none"),
        pytest.param(SuperPod(super_pod_id=5, server_index=2, rack_id=3, super_pod_type=6), id="4P card: none"),
        pytest.param(NO_SUPER_POD, id="not in a super pod"),
        pytest.param(SuperPod(super_pod_id=5, server_index=2, rack_id=-1, super_pod_type=1), id="rack unread"),
        pytest.param(SuperPod(super_pod_id=5, server_index=-1, rack_id=3, super_pod_type=1), id="index unread"),
    ],
)
def test_nothing_to_write(pod: SuperPod) -> None:
    assert ras_target(Path("/ras"), pod) is None


@pytest.mark.parametrize(
    ("new", "current", "expected"),
    [
        pytest.param(TOPO, None, True, id="no file yet"),
        pytest.param(TOPO, TOPO, False, id="new hash equals original hash: no write"),
        pytest.param(TOPO, b"{}", True, id="content differs"),
        pytest.param(TOPO, b"", True, id="an empty file"),
    ],
)
def test_needs_write(new: bytes, current: bytes | None, expected: bool) -> None:
    assert needs_write(new, current) is expected


# --- the file work ----------------------------------------------------------------------------------


def test_the_issue_row_copies_the_file_once_the_super_pod_dir_exists(tmp_path: Path) -> None:
    root, source_root = host(tmp_path)
    (root / "cluster" / "super-pod-5").mkdir(parents=True)
    target = ras_target(root, POD, source_root)
    assert target is not None
    assert sync_once(target) is True
    written = root / "cluster/super-pod-5/rack-3/topo_2.json"
    assert written.read_bytes() == (source_root / "usr/local/Ascend/driver/topo/950/atlas_950_1.json").read_bytes()
    assert hashlib.sha256(written.read_bytes()).digest() == hashlib.sha256(TOPO).digest()
    assert written.stat().st_mode & 0o777 == 0o644
    assert written.parent.stat().st_mode & 0o777 == 0o755
    assert [p.name for p in written.parent.iterdir()] == ["topo_2.json"]  # no temporary file left
    # TestToFile "new hash equals original hash (no write)": the same content is not rewritten.
    before = written.stat().st_mtime_ns
    assert sync_once(target) is False
    assert written.stat().st_mtime_ns == before


def test_no_parent_dir_writes_nothing(tmp_path: Path) -> None:
    """TestCheckConfigReadyPart2: `super-pod-5/` is not there, so neither the rack dir nor the file is made."""
    root, source_root = host(tmp_path)
    target = ras_target(root, POD, source_root)
    assert target is not None
    assert sync_once(target) is False
    assert list(root.iterdir()) == []


def test_a_changed_source_is_written_again(tmp_path: Path) -> None:
    root, source_root = host(tmp_path)
    (root / "cluster" / "super-pod-5" / "rack-3").mkdir(parents=True)
    written = root / "cluster/super-pod-5/rack-3/topo_2.json"
    written.write_bytes(b'{"old": true}')
    target = ras_target(root, POD, source_root)
    assert target is not None and sync_once(target) is True
    assert written.read_bytes() == TOPO


@pytest.mark.parametrize(
    ("content", "error"),
    [
        pytest.param(b"not json", ValueError, id="TestTopoFileToStr json valid failed"),
        pytest.param(None, FileNotFoundError, id="TestTopoFileToStr read file failed"),
    ],
)
def test_a_bad_source_writes_nothing(tmp_path: Path, content: bytes | None, error: type[Exception]) -> None:
    root, source_root = host(tmp_path, content=content or b"")
    if content is None:
        (source_root / HCCL_TOPO_FILES[ProductType.POD_1D].lstrip("/")).unlink()
    (root / "cluster" / "super-pod-5").mkdir(parents=True)
    target = ras_target(root, POD, source_root)
    assert target is not None
    with pytest.raises(error):
        sync_once(target)
    assert not target.file.exists()


# --- the task ---------------------------------------------------------------------------------------


async def test_the_writer_follows_the_nodes_current_super_pod(tmp_path: Path) -> None:
    root, source_root = host(tmp_path)
    pods = [NO_SUPER_POD]
    writer = RasTopologyWriter(root, lambda: pods[-1], source_root=source_root)
    (root / "cluster" / "super-pod-5").mkdir(parents=True)
    assert await writer.round() is False  # the chips have not answered yet
    pods.append(POD)
    assert await writer.round() is True
    assert (root / "cluster/super-pod-5/rack-3/topo_2.json").read_bytes() == TOPO


async def test_a_failed_round_is_logged_and_the_loop_goes_on(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    root, source_root = host(tmp_path, content=b"{broken")
    (root / "cluster" / "super-pod-5").mkdir(parents=True)
    writer = RasTopologyWriter(root, lambda: POD, source_root=source_root, period_s=0.01)
    with caplog.at_level(logging.ERROR):
        task = asyncio.create_task(writer.run())
        await asyncio.sleep(0.05)
        assert not task.done()  # still retrying
        (source_root / HCCL_TOPO_FILES[ProductType.POD_1D].lstrip("/")).write_bytes(TOPO)
        for _ in range(100):
            if (root / "cluster/super-pod-5/rack-3/topo_2.json").exists():
                break
            await asyncio.sleep(0.01)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
    assert (root / "cluster/super-pod-5/rack-3/topo_2.json").read_bytes() == TOPO
    failed = [r for r in caplog.records if r.getMessage() == "RAS rack topology not written"]
    assert failed and failed[0].__dict__["file"] == str(root / "cluster/super-pod-5/rack-3/topo_2.json")


# --- the setting --------------------------------------------------------------------------------------


def test_the_setting_takes_a_directory_and_refuses_anything_else(tmp_path: Path) -> None:
    def settings(*argv: str) -> PluginSettings:
        return load_settings(PluginSettings, list(argv), prog="ascend-device-plugin")

    assert settings().ras_net_root_path is None
    assert settings("--ras-net-root-path", str(tmp_path)).ras_net_root_path == tmp_path
    with pytest.raises(ValidationError, match="is not a directory"):
        settings("--ras-net-root-path", str(tmp_path / "missing"))
