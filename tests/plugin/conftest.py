from __future__ import annotations

import shutil
import tempfile
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.support.exporter import ExporterProc, start_exporter
from tests.support.fake_kubelet import FakeKubelet, short_tmp_dir
from tests.support.plugin import PluginProc, start_plugin, wait_ready


@pytest.fixture
def workdir() -> Iterator[Path]:
    with short_tmp_dir("dp-") as path:
        yield path


@dataclass
class Node:
    exporter: ExporterProc
    kubelet: FakeKubelet
    plugin: PluginProc
    workdir: Path


async def make_node(
    workdir: Path, *plugin_args: str, profile: str = "910b-8", kube: str = "offline", env: dict[str, str] | None = None
) -> Node:
    exporter = start_exporter(workdir / "exporter", profile=profile)
    plugin_dir = workdir / "dp"
    plugin_dir.mkdir()
    kubelet = FakeKubelet(plugin_dir, workdir / "podres")
    await kubelet.start()
    plugin = start_plugin(workdir, exporter, plugin_dir, *plugin_args, kube=kube, env=env)
    return Node(exporter, kubelet, plugin, workdir)


async def close_node(node: Node) -> None:
    code = node.plugin.stop()
    # Keep the last plugin log where a failing test's reader can find it (the workdir is removed).
    shutil.copyfile(node.plugin.log_path, Path(tempfile.gettempdir()) / "last-device-plugin.log")
    await node.kubelet.stop()
    node.exporter.stop()
    assert code == 0, node.plugin.log_path.read_text()[-3000:]
    assert not list((node.workdir / "dp").glob("Ascend*.sock")), "the plugin removes its sockets on shutdown"


@pytest.fixture
async def node(workdir: Path) -> AsyncIterator[Node]:
    n = await make_node(workdir)
    try:
        await wait_ready(n.plugin)
        yield n
    finally:
        await close_node(n)
