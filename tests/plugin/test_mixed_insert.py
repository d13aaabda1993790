"""310P mixed insert through the fake kubelet: an exporter over the C double of libdcmi.so whose
four 310P chips sit on Atlas 300V Pro, 300V and 300I Pro cards (`dcmi_get_product_type` per chip),
and the plugin with `--use-310p-mixed-insert`, as the reference's `-use310PMixedInsert`."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

from tests.cdouble.fixtures import cdouble_build_dir, dcmi_double_path  # noqa: F401 - pytest fixtures
from tests.plugin.conftest import Node, close_node
from tests.plugin.test_cluster_paths import apiserver, pod_annotations  # noqa: F401 - a pytest fixture
from tests.support.exporter import start_exporter
from tests.support.fake_apiserver import FakeApiServer, write_kubeconfig
from tests.support.fake_kubelet import FakeKubelet
from tests.support.plugin import start_plugin, wait_ready
from tests.support.waiting import START_S, until

PRODUCTS = {0: "Atlas 300V Pro", 1: "Atlas 300V", 2: "Atlas 300I Pro", 3: "Atlas 300V Pro"}
# The reference's names (pkg/common/constants.go Ascend310PVPro / Ascend310PV / Ascend310PIPro), by chip.
EXPECTED = {
    "huawei.com/Ascend310P-VPro": {"Ascend310P-VPro-0": "Healthy", "Ascend310P-VPro-3": "Healthy"},
    "huawei.com/Ascend310P-V": {"Ascend310P-V-1": "Healthy"},
    "huawei.com/Ascend310P-IPro": {"Ascend310P-IPro-2": "Healthy"},
}


def double_config(path: Path, products: dict[int, str]) -> Path:
    """Four 310P3 chips, one per card, logic id = phy id, each card its product."""
    lines = [f"chip {i} 0 {i} {i}" for i in range(4)]
    lines += ["str chip_name * 310P3", "int board_id * 0x64", "int aicore * 8"]
    lines += [f"str product_type {logic} {product}" for logic, product in products.items()]
    path.write_text("\n".join(lines) + "\n")
    return path


async def mixed_node(
    workdir: Path, library: Path, products: dict[int, str], *plugin_args: str, kube: str = "offline"
) -> Node:
    config = double_config(workdir / "double.conf", products)
    exporter = start_exporter(
        workdir / "exporter", "--library", str(library), backend="dcmi", env={"DCMI_DOUBLE_CONFIG": str(config)}
    )
    plugin_dir = workdir / "dp"
    plugin_dir.mkdir()
    kubelet = FakeKubelet(plugin_dir, workdir / "podres")
    await kubelet.start()
    plugin = start_plugin(workdir, exporter, plugin_dir, "--use-310p-mixed-insert", *plugin_args, kube=kube)
    return Node(exporter, kubelet, plugin, workdir)


async def test_mixed_insert_names_each_product_and_allocates_one(
    workdir: Path,
    dcmi_double_path: Path,  # noqa: F811
    apiserver: FakeApiServer,  # noqa: F811
) -> None:
    apiserver.add_pod("infer", "ml", phase="Pending", requests={"huawei.com/Ascend310P-V": 1})
    kubeconfig = write_kubeconfig(workdir / "kubeconfig", apiserver.url)
    n = await mixed_node(workdir, dcmi_double_path, PRODUCTS, "--kubeconfig", str(kubeconfig), kube="api")
    try:
        await wait_ready(n.plugin)
        for resource, devices in EXPECTED.items():
            registration = await n.kubelet.wait_registered(resource)
            assert registration.endpoint == resource.removeprefix("huawei.com/") + ".sock"
            assert (await n.kubelet.wait_for(resource, lambda m: bool(m.devices))).devices == devices
        assert n.kubelet.registration_count("huawei.com/Ascend310P") == 0, "nothing under the plain 310P name"

        n.kubelet.set_pod_resources([("ml", "infer", "c0", "huawei.com/Ascend310P-V", ["Ascend310P-V-1"])])
        resp = await n.kubelet.allocate("huawei.com/Ascend310P-V", [["Ascend310P-V-1"]])
        container = resp.container_responses[0]
        # The reference mounts the chips itself in this mode (no Ascend Docker Runtime): no env vars.
        assert "ASCEND_VISIBLE_DEVICES" not in container.envs
        specs = [(d.container_path, d.host_path, d.permissions) for d in container.devices]
        assert [s for s in specs if re.fullmatch(r"/dev/davinci[0-9]+", s[0])] == [("/dev/davinci1",) * 2 + ("rw",)]

        await until(lambda: "huawei.com/AscendReal" in pod_annotations(apiserver, "infer"), START_S, "the report")
        annotations = pod_annotations(apiserver, "infer")
        assert annotations["huawei.com/kltDev"] == "Ascend310P-V-1"
        assert annotations["huawei.com/AscendReal"] == "Ascend310P-1", "the chip's own name, as on every path"
    finally:
        await close_node(n)


async def test_mixed_insert_refuses_a_node_with_another_product(
    workdir: Path,
    dcmi_double_path: Path,  # noqa: F811
) -> None:
    n = await mixed_node(workdir, dcmi_double_path, {**PRODUCTS, 3: "Atlas 300I Duo"})
    try:
        code = n.plugin.proc.wait(START_S)
    except subprocess.TimeoutExpired:
        code = None
    log = n.plugin.log_path.read_text()
    n.plugin.stop()
    await n.kubelet.stop()
    n.exporter.stop()
    assert code == 2, log[-2000:]
    assert "Atlas 300I Duo" in log and "--use-310p-mixed-insert" in log
