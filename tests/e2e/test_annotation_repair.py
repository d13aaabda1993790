"""Drill: an edited allocation report on a running pod, across the whole node. The fault-manager reads
which chips the pods hold from `huawei.com/AscendReal` / `kltDev` (contract section 8) and lists the
rest as free in the device-info ConfigMap the scheduler reads; an edit that names another chip would
free the pod's chip for the next job. The plugin writes the report back on that pod event, and the
ConfigMap ends as it was: the pod's chip held, the other one free."""

from __future__ import annotations

import json

from tests.e2e.stack import R, node_stack
from tests.support.fake_apiserver import FakeApiServer, JsonObj
from tests.support.waiting import until

REAL, KLT = "huawei.com/AscendReal", "huawei.com/kltDev"
POD = "infer"


def pod_annotations(api: FakeApiServer) -> dict[str, str]:
    pod = api.get_object("pods", POD, "ml")
    assert pod is not None
    return dict(pod["metadata"].get("annotations") or {})


async def test_an_edited_report_is_written_back_and_the_chip_stays_held() -> None:
    def plant(api: FakeApiServer, _: object) -> None:
        api.add_pod(POD, "ml", phase="Pending", requests={R: 1})

    async with node_stack(prepare=plant) as s:
        held, other = "Ascend910-3", "Ascend910-6"
        s.kubelet.set_pod_resources([("ml", POD, "c0", R, [held])])
        await s.kubelet.allocate(R, [[held]])
        await until(lambda: REAL in pod_annotations(s.api), 10, "the allocation report")
        s.api.modify("pods", POD, "ml", lambda pod: pod["status"].update(phase="Running"))
        report = pod_annotations(s.api)
        assert (report[REAL], report[KLT]) == (held, held)

        def free() -> set[str]:
            info = s.device_info()
            return info.healthy if info is not None else set()

        await until(lambda: held not in free() and other in free(), 10, "the ConfigMap to hold the pod's chip")

        def edit(pod: JsonObj) -> None:
            pod["metadata"]["annotations"].update({REAL: other, KLT: other})

        s.api.modify("pods", POD, "ml", edit)
        await until(lambda: pod_annotations(s.api) == report, 5, "the plugin to write the report back")
        await until(lambda: held not in free() and other in free(), 10, "the ConfigMap to follow the report")
        logged = [json.loads(line) for line in s.plugin.log_path.read_text().splitlines()]
        assert any(e.get("event") == "pod annotations repaired" and e.get("pod") == f"ml/{POD}" for e in logged)
