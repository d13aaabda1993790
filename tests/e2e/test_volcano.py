"""Drill: a Volcano-scheduled pod from Allocate to running to a fault on its chip, with the patch that
marks it taken meeting a server error and a conflict on the way."""

from __future__ import annotations

import json

from tests.e2e.stack import R, node_stack
from tests.support.exporter import ExporterProc
from tests.support.fake_apiserver import FakeApiServer
from tests.support.waiting import until

TAKEN = "18446744073709551615"
PODS = "/api/v1/namespaces/ml/pods"
CONFIG_KEY = "ascend.kubectl.kubernetes.io/ascend-910-configuration"
HBM = "80E01801"  # a ManuallySeparateNPU-after-2 code; one occurrence is RestartNPU-level at most


def pod_annotations(api: FakeApiServer, name: str) -> dict[str, str]:
    pod = api.get_object("pods", name, "ml")
    return dict(pod["metadata"].get("annotations") or {}) if pod else {}


async def test_volcano_pod_allocated_through_api_errors_then_its_chip_faults() -> None:
    chosen: list[str] = []

    async def schedule(api: FakeApiServer, exporter: ExporterProc) -> None:
        async with exporter.client() as client:
            chips = (await client.get("/v1/chips")).json()["chips"]
        chosen.extend(sorted(c["name"] for c in chips)[:2])
        api.add_pod("train-0", "ml", phase="Pending", requests={R: 2},
                    annotations={R: ",".join(chosen), "predicate-time": "1000"})  # fmt: skip

    async with node_stack(plugin_args=("--volcano-type",), prepare=schedule) as s:
        await until(lambda: s.plugin.metrics().count("ascend_device_plugin") > 0, 5, "plugin metrics")
        # Marking the pod taken, inside the call, meets a server error and a conflict, then lands on the
        # third and last try (the reference's RetryUpdateCount); the allocation report follows the answer.
        s.api.fail_next(1, 500, path_prefix=PODS, method="PATCH")
        s.api.fail_next(1, 409, path_prefix=PODS, method="PATCH")
        kubelet_ids = sorted(s.names.values())[-2:]
        resp = await s.kubelet.allocate(R, [kubelet_ids])
        envs = dict(resp.container_responses[0].envs)
        assert envs["ASCEND_VISIBLE_DEVICES"] == ",".join(c.split("-")[1] for c in chosen)
        assert pod_annotations(s.api, "train-0").get("predicate-time") == TAKEN, "marked taken before the answer"
        await until(lambda: "huawei.com/AscendReal" in pod_annotations(s.api, "train-0"), 15, "the allocation report")
        ann = pod_annotations(s.api, "train-0")
        assert ann["huawei.com/AscendReal"] == ",".join(chosen)
        assert ann["huawei.com/kltDev"] == ",".join(kubelet_ids)
        assert [d["device_id"] for d in json.loads(ann[CONFIG_KEY])["devices"]] == [c.split("-")[1] for c in chosen]
        statuses = [r.status for r in s.api.requests if r.method == "PATCH" and r.path.startswith(PODS)]
        assert statuses == [500, 409, 200, 200], statuses

        # The pod starts: the ConfigMap's free list no longer offers its chips.
        s.api.modify("pods", "train-0", "ml", lambda pod: pod["status"].update(phase="Running"))
        await until(lambda: (i := s.device_info()) and not (set(chosen) & i.healthy), 10, "its chips leave the list")

        # A fault on one of its chips: the kubelet hears it under the id it handed out, and the
        # chip is reported to the cluster.
        logic = next(lg for lg, n in s.names.items() if n == chosen[0])
        await s.fault(logic, HBM)
        msg = await s.kubelet.wait_for(R, lambda m: kubelet_ids[0] in m.unhealthy, timeout=5)
        assert chosen[0] in msg.unhealthy, "the real chip and the kubelet id it stands behind"
        info = await until(
            lambda: i if (i := s.device_info()) and chosen[0] in i.fault_chips else None, 10, "-Fault lists it"
        )
        [fault] = [f for f in info.faults if f["npu_name"] == chosen[0]]
        assert fault["fault_code"] == HBM
        assert await s.no_event_lost() == 1
        assert s.kubelet.registration_count(R) == 1
