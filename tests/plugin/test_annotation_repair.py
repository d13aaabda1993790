"""Annotation repair with a cluster (the fake API server): the allocation report on a running pod,
edited or lost, is written back on the pod's next event; a pod being deleted, and one the plugin never
allocated, are left alone; a conflict is retried, and a repair that cannot be made is logged naming
the pod. The reference's counterpart is a 5 s loop (`updatePodAnnotation`) that fixes a lost AscendReal only."""

from __future__ import annotations

import json
from pathlib import Path

from tests.plugin.conftest import Node, close_node
from tests.plugin.test_cluster_paths import CONFIG_KEY, apiserver, cluster_node, pod_annotations  # noqa: F401
from tests.plugin.test_kubelet_flow import ALL, R
from tests.support.fake_apiserver import FakeApiServer, JsonObj
from tests.support.plugin import wait_ready
from tests.support.waiting import until

REAL, KLT = "huawei.com/AscendReal", "huawei.com/kltDev"
REPAIR_S = 5.0  # bound of one repair: the event reaches the plugin, its patch reaches the fake


def set_annotations(server: FakeApiServer, name: str, **changes: str | None) -> None:
    """An administrator's (or a buggy controller's) edit: one MODIFIED event of the pod."""

    def edit(pod: JsonObj) -> None:
        annotations = pod["metadata"].setdefault("annotations", {})
        for key, value in changes.items():
            key = {"real": REAL, "klt": KLT, "config": CONFIG_KEY}.get(key, key)
            if value is None:
                annotations.pop(key, None)
            else:
                annotations[key] = value

    server.modify("pods", name, "ml", edit)


async def allocate(n: Node, server: FakeApiServer, name: str, device: str) -> dict[str, str]:
    """The plain path's allocation and report for pod `name`, which then runs."""
    n.kubelet.set_pod_resources([("ml", name, "c0", R, [device])])
    await n.kubelet.allocate(R, [[device]])
    await until(lambda: REAL in pod_annotations(server, name), REPAIR_S, f"{name}'s report")
    server.modify("pods", name, "ml", lambda pod: pod["status"].update(phase="Running"))
    return pod_annotations(server, name)


def patches(server: FakeApiServer, name: str) -> int:
    return server.count("PATCH", f"/api/v1/namespaces/ml/pods/{name}")


async def test_edited_and_lost_reports_are_repaired_others_left_alone(
    workdir: Path,
    apiserver: FakeApiServer,  # noqa: F811 - the fixture
) -> None:
    for name in ("web", "leaving"):
        apiserver.add_pod(name, "ml", phase="Pending", requests={R: 1})
    apiserver.add_pod("stranger", "ml", phase="Running", annotations={REAL: "Ascend910-1"})
    n = await cluster_node(workdir, apiserver)
    try:
        await n.kubelet.wait_for(R, lambda m: set(m.devices) == ALL)
        report = await allocate(n, apiserver, "web", "Ascend910-3")
        assert (report[REAL], report[KLT]) == ("Ascend910-3", "Ascend910-3")
        assert json.loads(report[CONFIG_KEY])["pod_name"] == "web"
        await allocate(n, apiserver, "leaving", "Ascend910-5")

        # An edit of AscendReal: written back by the one patch that pod event causes.
        before = patches(apiserver, "web")
        set_annotations(apiserver, "web", real="Ascend910-7")
        await until(lambda: pod_annotations(apiserver, "web").get(REAL) == "Ascend910-3", REPAIR_S, "the repair")
        assert pod_annotations(apiserver, "web") == report
        assert patches(apiserver, "web") == before + 1

        # Lost: kltDev and the configuration gone, AscendReal blanked; one patch restores all three.
        set_annotations(apiserver, "web", klt=None, config=None, real="")
        await until(lambda: pod_annotations(apiserver, "web") == report, REPAIR_S, "the repair of what was lost")
        assert patches(apiserver, "web") == before + 2

        # Left alone: a pod being deleted (graceful delete) and one the plugin never allocated. Their events
        # come before web's next one, which the plugin repairs: by then it has passed over them.
        deleted = "2026-01-01T00:00:00Z"
        apiserver.modify("pods", "leaving", "ml", lambda p: p["metadata"].update(deletionTimestamp=deleted))
        set_annotations(apiserver, "leaving", real="Ascend910-0")
        set_annotations(apiserver, "stranger", real="Ascend910-2")
        set_annotations(apiserver, "web", real="Ascend910-6")
        await until(lambda: pod_annotations(apiserver, "web").get(REAL) == "Ascend910-3", REPAIR_S, "web's repair")
        assert pod_annotations(apiserver, "leaving")[REAL] == "Ascend910-0"
        assert pod_annotations(apiserver, "stranger")[REAL] == "Ascend910-2"
        assert patches(apiserver, "stranger") == 0

        # A conflict is retried; a repair that still fails is logged naming the pod.
        apiserver.fail_next(1, 409, "/api/v1/namespaces/ml/pods/web", "PATCH")
        set_annotations(apiserver, "web", real="Ascend910-4")
        await until(lambda: pod_annotations(apiserver, "web").get(REAL) == "Ascend910-3", REPAIR_S, "retried repair")
        apiserver.fail_next(10, 409, "/api/v1/namespaces/ml/pods/web", "PATCH")
        set_annotations(apiserver, "web", real="Ascend910-4")
        log = n.plugin.log_path

        def failure_logged() -> bool:
            return any(
                entry.get("event") == "could not repair the pod's annotations" and entry.get("pod") == "ml/web"
                for entry in map(json.loads, log.read_text().splitlines())
            )

        await until(failure_logged, 15.0, "the failed repair's log line")
        assert pod_annotations(apiserver, "web")[REAL] == "Ascend910-4"
        apiserver.clear_failures()

        # A restarted plugin keeps no record: it adopts the report as the pod carries it, then repairs.
        set_annotations(apiserver, "web", real="Ascend910-3")
        n.plugin = n.plugin.restart()
        await wait_ready(n.plugin)
        set_annotations(apiserver, "web", klt="Ascend910-0")
        await until(lambda: pod_annotations(apiserver, "web") == report, REPAIR_S + 5, "the repair after a restart")
    finally:
        await close_node(n)
