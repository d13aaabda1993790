"""The fault policy: packaged by default, replaced whole or not at all, from the API or the ConfigMap."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.faultmanager.test_service import sim, verdicts
from tests.support.exporter import start_exporter
from tests.support.fake_apiserver import FakeApiServer, write_kubeconfig
from tests.support.faultmanager import start_fault_manager, wait_ready
from tests.support.waiting import until

FAST_LINK_DOWN = {
    "FaultDuration": [
        {"EventId": ["81078603"], "FaultTimeout": 2, "RecoverTimeout": 2, "FaultHandling": "PreSeparateNPU"}
    ]
}
BAD = {
    "FaultFrequency": [{"EventId": ["80E01801"], "TimeWindow": 30, "Times": 2, "FaultHandling": "ManuallySeparateNPU"}]
}


async def test_offline_policy_put_rejects_a_bad_file_and_adopts_a_good_one(tmp_path: Path) -> None:
    exporter = start_exporter(tmp_path / "exporter")
    fm = start_fault_manager(tmp_path / "fm", exporter)
    try:
        await wait_ready(fm)
        async with fm.client() as client:
            before = (await client.get("/v1/policy")).json()
            assert before["source"] == "packaged" and before["writable"] is True
            r = await client.put("/v1/policy", json={"files": {"faultCustomization.json": json.dumps(BAD)}})
            assert r.status_code == 422
            assert "FaultFrequency[0].TimeWindow: 30 is outside 60..864000" in r.json()["detail"]
            after_bad = (await client.get("/v1/policy")).json()
            assert after_bad["digest"] == before["digest"] and after_bad["last_error"]
            r = await client.put("/v1/policy", json={"files": {"faultCustomization.json": json.dumps(FAST_LINK_DOWN)}})
            assert r.status_code == 200, r.text
            assert r.json()["source"] == "api" and r.json()["last_error"] is None
            r = await client.put("/v1/policy", json={"files": {"nonsense.json": "{}"}})
            assert r.status_code == 422 and "unknown policy file" in r.json()["detail"]
        # The new rule applies: a link down for 2 s of policy now pre-separates the chip's network;
        # a network code never raises the chip level (reference: GetFaultType vs GetNetworkFaultType).
        async with exporter.client() as client:
            name = (await client.get("/v1/chips/1")).json()["name"]
        await sim(exporter, "/v1/sim/chips/1/faults", {"code": "81078603", "severity": 1})

        async def preseparated() -> bool:
            v = (await verdicts(fm))[name]
            return (v["network_level"], v["fault_level"]) == ("PreSeparateNPU", "NormalNPU")

        # Bounded well under the packaged rule's 20 s FaultTimeout: the new rule pre-separated it.
        await until(preseparated, what=f"{name}'s network PreSeparateNPU")
    finally:
        fm.stop()
        exporter.stop()


async def test_cluster_policy_comes_from_the_configmap(tmp_path: Path) -> None:
    with FakeApiServer() as api:
        exporter = start_exporter(tmp_path / "exporter")
        cfg = write_kubeconfig(tmp_path / "kubeconfig", api.url)
        # A long poll: the ConfigMap's changes must arrive through the watch.
        fm = start_fault_manager(
            tmp_path / "fm", exporter, "--kubeconfig", str(cfg), "--policy-poll", "600", kube="api"
        )
        try:
            await wait_ready(fm)
            async with fm.client() as client:
                r = await client.put("/v1/policy", json={"files": {}})
                assert r.status_code == 409 and "mindx-dl-fault-config" in r.json()["detail"]

                async def policy() -> dict[str, Any]:
                    return dict((await client.get("/v1/policy")).json())

                async def rejected() -> bool:
                    return bool((await policy())["last_error"])

                async def adopted() -> bool:
                    return bool((await policy())["source"] == "configmap")

                api.add_configmap("mindx-dl-fault-config", "kube-system", {"faultCustomization.json": json.dumps(BAD)})
                await until(rejected, what="the bad policy's error")
                assert (await policy())["source"] == "packaged", "the bad policy is not adopted"
                api.add_configmap(
                    "mindx-dl-fault-config", "kube-system", {"faultCustomization.json": json.dumps(FAST_LINK_DOWN)}
                )
                await until(adopted, what="the ConfigMap's policy adopted")
                assert (await policy())["last_error"] is None
        finally:
            fm.stop()
            exporter.stop()
