"""Our DRA driver under the kubelet's own DRA manager and plugin manager (v1.32, the harness of
tests/dra_harness): registration through plugins_registry, a pod's claim prepared, the plugin
restarted, the claim unprepared. The device-plugin runs with `--kubelet-api dra` beside the
910b-8 sim exporter, its claims and slices in the fake API server as in test_dra_process; the
manager reads the same claim from client-go's fake clientset.

Skips, saying why, where the kubeedge tree (or a Go) is absent: CI runs the fake DRA kubelet.
"""

from __future__ import annotations

import json
import shutil
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.dra_harness.harness import RealDraKubelet, harness_binary
from tests.plugin.test_dra_process import DRIVER, dra_args, slice_devices
from tests.support.exporter import start_exporter
from tests.support.fake_apiserver import FakeApiServer
from tests.support.fake_kubelet import short_tmp_dir
from tests.support.plugin import start_plugin, wait_ready
from tests.support.waiting import until

JsonObj = dict[str, Any]
NODE = "node-a"
SERVICE = "v1beta1.DRAPlugin"


@pytest.fixture(scope="module")
def binary() -> Path:
    built, why = harness_binary()
    if built is None:
        pytest.skip(why)
    return built


@pytest.fixture
def apiserver() -> Iterator[FakeApiServer]:
    with FakeApiServer(resource_api_versions=("v1beta1",)) as server:
        server.add_node(NODE, internal_ip="10.1.2.3")
        yield server


def pod_with_claim(name: str, claim: str) -> JsonObj:
    """A pod naming an existing claim directly (spec.resourceClaims[].resourceClaimName), one container using it."""
    return {
        "metadata": {"name": name, "namespace": "ml", "uid": str(uuid.uuid4())},
        "spec": {
            "nodeName": NODE,
            "resourceClaims": [{"name": "npu", "resourceClaimName": claim}],
            "containers": [{"name": "main", "image": "train", "resources": {"claims": [{"name": "npu"}]}}],
        },
    }


def allocated_claim(name: str, device: str, pod: JsonObj) -> JsonObj:
    """As the scheduler leaves it: allocated on our pool and reserved for the pod (the manager checks both)."""
    return {
        "apiVersion": "resource.k8s.io/v1beta1",
        "kind": "ResourceClaim",
        "metadata": {"name": name, "namespace": "ml"},
        "spec": {"devices": {"requests": [{"name": "npu", "deviceClassName": DRIVER}]}},
        "status": {
            "allocation": {"devices": {"results": [
                {"request": "npu", "driver": DRIVER, "pool": NODE, "device": device},
            ]}},
            "reservedFor": [{"resource": "pods", "name": pod["metadata"]["name"], "uid": pod["metadata"]["uid"]}],
        },
    }  # fmt: skip


async def test_registration_prepare_restart_unprepare_under_the_real_dra_manager(
    binary: Path, apiserver: FakeApiServer
) -> None:
    with short_tmp_dir("drr-") as workdir:
        kubelet = RealDraKubelet(
            binary, workdir / "k" / "plugins_registry", workdir / "kstate", workdir / "kubelet.log"
        )
        await kubelet.start()
        exporter = start_exporter(workdir / "exporter", profile="910b-8")
        (workdir / "dp").mkdir()
        plugin = start_plugin(workdir, exporter, workdir / "dp", *dra_args(workdir, apiserver), kube="api")
        try:
            # Ready means the kubelet told the plugin it is registered: here, the real plugin manager did.
            await wait_ready(plugin)
            [registered] = kubelet.events("register", DRIVER)
            assert registered["error"] == "" and SERVICE in registered["services"], registered
            assert [e["error"] for e in kubelet.events("validate", DRIVER)] == [""]
            await until(lambda: len(slice_devices(apiserver)) == 8, what="the node's ResourceSlice with 8 chips")
            attrs = next(d for d in slice_devices(apiserver) if d["name"] == "Ascend910-3")["basic"]["attributes"]

            pod = pod_with_claim("train-0", "train")
            stored = apiserver.put_object("resourceclaims", allocated_claim("train", "Ascend910-3", pod))
            uid = stored["metadata"]["uid"]
            await kubelet.claim(stored)  # the same object, uid included, for the manager's clientset

            prepared = await kubelet.prepare(pod)
            assert prepared["error"] == "", prepared
            assert prepared["cdi"] == {"main": ["ascend.com/npu=3"]}  # GetResources: what the runtime is handed
            spec_file = workdir / "cdi" / f"ascend.com-npu_{uid}.yaml"
            spec = json.loads(spec_file.read_text())
            assert spec["kind"] == "ascend.com/npu"
            assert [d["name"] for d in spec["devices"]] == ["3"]
            env = spec["containerEdits"]["env"]
            # The 910B's runtime is told phy ids, as by Allocate and as the reference's spec (its device
            # name's suffix); on this profile phy 3 is logic 7, so the env must not name the logic id.
            assert attrs["logicId"] == {"int": 7}
            assert "ASCEND_VISIBLE_DEVICES=3" in env, env

            # The manager reads the claim itself, from its own client, before it calls the driver.
            assert {"verb": "get", "resource": "resourceclaims", "version": "v1beta1", "namespace": "ml",
                    "name": "train"} in await kubelet.actions()  # fmt: skip

            plugin = plugin.restart()
            await wait_ready(plugin)
            await until(lambda: len(kubelet.events("register", DRIVER)) == 2, what="the restarted driver registered")
            assert [e["event"] for e in kubelet.registrations if e["event"] != "validate"] == [
                "register",
                "deregister",
                "register",
            ], kubelet.registrations
            assert spec_file.exists(), "a restart keeps the prepared claim's CDI spec"
            await until(lambda: len(slice_devices(apiserver)) == 8, what="the restarted driver's slice")

            # A second Prepare for the same pod is the manager's own business: prepared claims are not sent again.
            again = await kubelet.prepare(pod)
            assert again == prepared
            assert 'call="prepare"' not in plugin.metrics(), "the restarted driver was asked nothing"

            unprepared = await kubelet.unprepare(pod)
            assert unprepared["error"] == "", unprepared
            assert not spec_file.exists()
            assert 'ascend_device_plugin_dra_claims_total{call="unprepare",result="ok"} 1.0' in plugin.metrics()

            # The handler's ResourceSlice wipes, through the manager's client: every slice of the node when the
            # kubelet starts, the driver's when it deregisters.
            async def wipes() -> list[str]:
                return [a["fieldSelector"] for a in await kubelet.actions() if a["verb"] == "delete-collection"]

            async def both_wiped() -> bool:
                return len(await wipes()) == 2

            await until(both_wiped, what="the two ResourceSlice wipes")
            assert await wipes() == [f"spec.nodeName={NODE}", f"spec.driver={DRIVER},spec.nodeName={NODE}"]
        finally:
            code = plugin.stop()
            shutil.copyfile(plugin.log_path, Path(tempfile.gettempdir()) / "last-device-plugin-dra-real.log")
            await kubelet.stop()
            shutil.copyfile(kubelet.log, Path(tempfile.gettempdir()) / "last-kubelet-dra-harness.log")
            exporter.stop()
            assert code == 0, plugin.log_path.read_text()[-3000:]


async def test_kubelet_restart_and_a_bad_claim_under_the_real_dra_manager(
    binary: Path, apiserver: FakeApiServer
) -> None:
    """The kubelet restarts between Prepare and Unprepare (its checkpoint kept, the driver found again in
    plugins_registry without restarting); a claim for another node's pool fails the pod's preparation with
    our per-claim reason, and no file is written."""
    with short_tmp_dir("drk-") as workdir:

        def kubelet_process() -> RealDraKubelet:
            return RealDraKubelet(
                binary, workdir / "k" / "plugins_registry", workdir / "kstate", workdir / "kubelet.log"
            )

        kubelet = kubelet_process()
        await kubelet.start()
        exporter = start_exporter(workdir / "exporter", profile="910b-8")
        (workdir / "dp").mkdir()
        plugin = start_plugin(workdir, exporter, workdir / "dp", *dra_args(workdir, apiserver), kube="api")
        try:
            await wait_ready(plugin)
            pod = pod_with_claim("train-0", "train")
            stored = apiserver.put_object("resourceclaims", allocated_claim("train", "Ascend910-5", pod))
            await kubelet.claim(stored)
            assert (await kubelet.prepare(pod))["cdi"] == {"main": ["ascend.com/npu=5"]}
            spec_file = workdir / "cdi" / f"ascend.com-npu_{stored['metadata']['uid']}.yaml"
            assert spec_file.exists()

            await kubelet.stop()
            kubelet = kubelet_process()
            await kubelet.start()
            # The new plugin manager walks plugins_registry at start and registers the running driver again.
            await until(lambda: kubelet.events("register", DRIVER), what="the driver registered with the new kubelet")
            assert kubelet.events("register", DRIVER)[0]["error"] == ""
            await kubelet.claim(stored)  # the API server outlives a kubelet: the new clientset holds the claim too
            # The restarted manager restores the claim from its checkpoint but not that it was prepared (1.32 keeps
            # `prepared` in memory only), so it sends NodePrepareResources again and appends the answer's devices
            # to the restored ones: the driver must answer a prepared claim again with the same devices.
            prepared_again = await kubelet.prepare(pod)
            assert prepared_again["error"] == "", prepared_again
            assert prepared_again["cdi"] == {"main": ["ascend.com/npu=5", "ascend.com/npu=5"]}  # the kubelet's doubling
            assert 'dra_claims_total{call="prepare",result="ok"} 2.0' in plugin.metrics()
            assert list((workdir / "cdi").iterdir()) == [spec_file]
            assert (await kubelet.unprepare(pod))["error"] == ""
            assert not spec_file.exists()

            other = pod_with_claim("train-1", "elsewhere")
            bad = allocated_claim("elsewhere", "Ascend910-2", other)
            bad["status"]["allocation"]["devices"]["results"][0]["pool"] = "node-b"
            bad_stored = apiserver.put_object("resourceclaims", bad)
            await kubelet.claim(bad_stored)
            refused = await kubelet.prepare(other)
            assert refused["error"].startswith("NodePrepareResources failed for claim ml/elsewhere: "), refused
            assert "node-b" in refused["error"], refused
            assert not list((workdir / "cdi").glob(f"*{bad_stored['metadata']['uid']}*"))
        finally:
            code = plugin.stop()
            await kubelet.stop()
            exporter.stop()
            assert code == 0, plugin.log_path.read_text()[-3000:]
