"""Drills on a real node: the stack deployed from the simulated overlay under a real kubelet,
apiserver and containerd, driven with a real kubectl.

The drills run in file order on one cluster and build on each other: `train-a` (2 chips) is
started early and must survive every later drill (a fault elsewhere, the plugin pod deleted,
the kubelet restarted, two rolling updates) with the same chips.
"""

from __future__ import annotations

import base64
import calendar
import json
import os
import re
import statistics
import subprocess
import time
from pathlib import Path
from typing import Any

import grpc
import pytest
import yaml
from ascend_common.adapters.kubelet import podresources_pb2 as pr
from ascend_common.adapters.kubelet import podresources_pb2_grpc as pr_grpc
from ascend_common.gojson import go_json

from tests.cluster.conftest import Stack, stack_pods_ready
from tests.cluster.node import RESOURCE, ROOT, Cluster, names, ready, restarts
from tests.support.realnode import record
from tests.support.waiting import until_sync

pytestmark = pytest.mark.timeout(900)

SEPARATE_NPU = "80E3A201"  # SeparateNPU: Unhealthy until it recovers, never hot-reset, no frequency rule
HBM_TWICE_A_DAY = "80E01801"  # FaultFrequency: 2 occurrences in a day -> ManuallySeparateNPU
TAKEN = "18446744073709551615"  # predicate-time once the plugin has taken a Volcano pod
ROUNDS = 10
HANG_CODE = "200001002"  # the exporter's hung-job detection (NotHandleFault in the packaged policy)
HANG_ROUNDS = ("--hang-interval", "1")
IMAGE = "ascend-node-stack:latest"
ROLLOUT_IMAGE = "ascend-node-stack:rollout"
CHECKPOINT = Path("/var/lib/kubelet/device-plugins/kubelet_internal_checkpoint")
PODRESOURCES = Path("/var/lib/kubelet/pod-resources/kubelet.sock")
KUBELET_SOCKET = Path("/var/lib/kubelet/device-plugins/kubelet.sock")
REGISTERED = re.compile(r'registration request from device plugin with resource name "huawei\.com/Ascend910"')
# A 403 as an HTTP status (not a digit run inside a number), a Kubernetes Forbidden, a traceback.
BAD_LOG = re.compile(r"(?<![\w.:-])403(?![\w.:])|Forbidden|Traceback")
DAEMONSETS = ("dcmi-exporter-sim", "ascend-device-plugin-sim", "fault-manager-sim")
SOFT_SHARE = "huawei.com/scheduler.softShareDev"  # the prefix of Volcano's soft-share annotations
SOFT_SHARE_LABEL = "huawei.com/scheduler.chip1softsharedev.enable"
SOFT_SHARE_COMPONENT = ROOT / "deploy" / "kustomize" / "components" / "soft-share"
ENPU = Path("/etc/enpu")
SHARE_DEVICE = Path("/share_device")  # the component's --soft-share-dev-config-dir
LOGS: dict[str, str] = {}  # pod uid -> its containers' logs, kept before pods are replaced


def workload(
    name: str,
    chips: int,
    annotations: dict[str, str] | None = None,
    node: str | None = None,
    labels: dict[str, str] | None = None,
) -> str:
    spec: dict[str, Any] = {
        "terminationGracePeriodSeconds": 1,
        "containers": [
            {
                "name": "train",
                "image": IMAGE,
                "imagePullPolicy": "IfNotPresent",
                "command": ["sleep", "infinity"],
                "resources": {"limits": {RESOURCE: str(chips)}},
            }
        ],
    }
    if node:
        spec["nodeName"] = node  # bound by the test, as Volcano's binder would
    meta: dict[str, Any] = {"name": name, "namespace": "default", "annotations": annotations or {}}
    if labels:
        meta["labels"] = labels
    return json.dumps({"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec})


def start(cluster: Cluster, manifest: str, name: str, timeout: float = 90) -> dict[str, Any]:
    cluster.kubectl("apply", "-f", "-", stdin=manifest)

    def ready_pod() -> dict[str, Any] | None:
        pod = cluster.get("pod", name, "-n", "default")
        return pod if ready(pod) else None

    return until_sync(ready_pod, timeout, f"pod {name} Ready")


def visible(cluster: Cluster, pod: str) -> list[str]:
    env = cluster.kubectl("exec", "-n", "default", pod, "--", "env")
    (line,) = [line for line in env.splitlines() if line.startswith("ASCEND_VISIBLE_DEVICES=")]
    return line.split("=", 1)[1].split(",")


def ids(chips: str) -> list[str]:
    """Ascend910-3,Ascend910-5 -> ['3', '5']: the ids ASCEND_VISIBLE_DEVICES carries."""
    return [c.rsplit("-", 1)[1] for c in chips.split(",")]


def harvest_logs(cluster: Cluster) -> None:
    for pod in cluster.pods():
        uid, name = pod["metadata"]["uid"], pod["metadata"]["name"]
        text = cluster.kubectl("logs", "-n", "ascend-system", name, "--all-containers", check=False)
        if restarts(pod):
            text += cluster.kubectl("logs", "-n", "ascend-system", name, "--all-containers", "--previous", check=False)
        LOGS[uid] = f"== {name}\n{text}"


def registrations(cluster: Cluster) -> int:
    return len(REGISTERED.findall(cluster.kubelet_log()))


def last_registration_at(cluster: Cluster) -> float:
    """When the kubelet logged the last registration (klog: `I1201 11:14:02.085487`, UTC here)."""
    line = [line for line in cluster.kubelet_log().splitlines() if REGISTERED.search(line)][-1]
    stamp = line[1:].split()[:2]
    year = time.gmtime().tm_year
    whole, _, micros = stamp[1].partition(".")
    parsed = time.strptime(f"{year}{stamp[0]} {whole}", "%Y%m%d %H:%M:%S")
    return calendar.timegm(parsed) + int(micros) / 1e6


def train_a_unchanged(s: Stack, before: dict[str, Any]) -> None:
    now = s.cluster.get("pod", "train-a", "-n", "default")
    assert now["metadata"]["uid"] == before["metadata"]["uid"]
    assert ready(now) and restarts(now) == 0, now["status"]
    assert (
        now["metadata"]["annotations"]["huawei.com/AscendReal"]
        == before["metadata"]["annotations"]["huawei.com/AscendReal"]
    )
    assert sorted(visible(s.cluster, "train-a")) == ids(before["metadata"]["annotations"]["huawei.com/AscendReal"])


def percentiles(samples: list[float]) -> dict[str, float]:
    return {"p50": round(statistics.median(samples), 3), "max": round(max(samples), 3), "n": len(samples)}


# -- the drills ------------------------------------------------------------------------------


def test_stack_runs_as_the_readme_deploys_it(stack: Stack) -> None:
    pods = stack_pods_ready(stack.cluster)
    assert pods is not None
    assert sorted(p["metadata"]["labels"]["app.kubernetes.io/name"] for p in pods) == [
        "ascend-device-plugin",
        "dcmi-exporter",
        "fault-manager",
    ]
    for ds in DAEMONSETS:
        status = stack.cluster.get("daemonset", ds, "-n", "ascend-system")["status"]
        assert status["numberReady"] == status["desiredNumberScheduled"] == 1, (ds, status)
    # The exporter reads its 0400 token file as the uid its DaemonSet gives it.
    (exporter,) = stack.cluster.pods(selector="app.kubernetes.io/name=dcmi-exporter")
    uid = stack.cluster.kubectl("exec", "-n", "ascend-system", exporter["metadata"]["name"], "--", "id", "-u")
    assert uid.strip() == "0"


def test_node_offers_eight_chips(stack: Stack) -> None:
    until_sync(lambda: stack.cluster.allocatable() == 8, 60, "allocatable huawei.com/Ascend910 = 8")
    assert len(stack.exporter.chips()) == 8


def test_device_info_is_written_under_the_fault_managers_service_account(stack: Stack) -> None:
    until_sync(
        lambda: len(names(stack.cluster.device_list().get(RESOURCE, ""))) == 8,
        60,
        "8 chips in the device-info ConfigMap",
    )
    audit = Path(stack.cluster.env["CLUSTER_AUDIT_LOG"])
    cm = f"mindx-dl-deviceinfo-{stack.cluster.node}"

    def writes() -> list[dict[str, Any]]:
        found = []
        for line in audit.read_text().splitlines():
            event = json.loads(line)
            ref = event.get("objectRef", {})
            if ref.get("resource") == "configmaps" and ref.get("name") == cm and event["verb"] in ("create", "update"):
                found.append(event)
        return found

    events = until_sync(writes, 30, f"audit entries of writes to {cm}")
    assert {e["user"]["username"] for e in events} == {"system:serviceaccount:ascend-system:fault-manager"}
    assert {e["responseStatus"]["code"] for e in events} <= {200, 201}


def test_a_pod_gets_two_chips(stack: Stack) -> None:
    pod = start(stack.cluster, workload("train-a", 2), "train-a")
    real = until_sync(
        lambda: (
            stack.cluster.get("pod", "train-a", "-n", "default")["metadata"]
            .get("annotations", {})
            .get("huawei.com/AscendReal")
        ),
        60,
        "huawei.com/AscendReal on train-a",
    )
    assert len(real.split(",")) == 2
    # The plain path: the kubelet's order (GetDeviceListID keeps it; the kubelet's is arbitrary), the
    # AscendReal annotation sorted: the same chips.
    assert sorted(visible(stack.cluster, "train-a")) == ids(real)
    assert pod["status"]["phase"] == "Running"


def test_kubelet_1_20_podresources_skew(stack: Stack) -> None:
    """This kubelet predates GetAllocatableResources (1.21+); the plugin needs only List, which
    found train-a above (its AscendReal annotation). Both facts, checked on the real socket."""
    node = stack.cluster.get("node", stack.cluster.node)
    assert node["status"]["nodeInfo"]["kubeletVersion"].startswith("v1.20")
    with grpc.insecure_channel(f"unix://{PODRESOURCES}") as channel:
        stub = pr_grpc.PodResourcesListerStub(channel)
        listed = stub.List(pr.ListPodResourcesRequest(), timeout=5)
        with pytest.raises(grpc.RpcError) as refused:
            stub.GetAllocatableResources(pr.AllocatableResourcesRequest(), timeout=5)
    assert refused.value.code() == grpc.StatusCode.UNIMPLEMENTED
    (train,) = [p for p in listed.pod_resources if p.name == "train-a"]
    (devices,) = [d for c in train.containers for d in c.devices if d.resource_name == RESOURCE]
    assert len(devices.device_ids) == 2


def test_fault_on_a_free_chip_changes_node_allocatable(stack: Stack) -> None:
    in_use = set(
        stack.cluster.get("pod", "train-a", "-n", "default")["metadata"]["annotations"]["huawei.com/AscendReal"].split(
            ","
        )
    )
    chip = next(c for c in stack.exporter.chips() if c["name"] not in in_use)
    name, logic = chip["name"], chip["logic_id"]
    to_configmap: list[float] = []
    to_node: list[float] = []
    back_node: list[float] = []
    back_configmap: list[float] = []
    for _ in range(ROUNDS):
        t0 = time.monotonic()
        stack.exporter.fault(logic, SEPARATE_NPU, "occur")
        until_sync(
            lambda: name in names(stack.cluster.device_list().get(f"{RESOURCE}-Unhealthy", "")),
            30,
            f"{name} in -Unhealthy",
            0.05,
        )
        to_configmap.append(time.monotonic() - t0)
        until_sync(lambda: stack.cluster.allocatable() == 7, 60, "allocatable 7", 0.1)
        to_node.append(time.monotonic() - t0)
        t1 = time.monotonic()
        stack.exporter.fault(logic, SEPARATE_NPU, "recover")
        # The kubelet (node status) and the fault-manager (ConfigMap, at most one write a second)
        # publish the recovery independently; neither waits for the other, so wait for each.
        until_sync(lambda: stack.cluster.allocatable() == 8, 60, "allocatable back to 8", 0.1)
        back_node.append(time.monotonic() - t1)
        until_sync(lambda: listed_healthy(stack, name), 30, f"{name} back in {RESOURCE} and out of -Unhealthy", 0.05)
        back_configmap.append(time.monotonic() - t1)
    record("fault_to_configmap_unhealthy_s", percentiles(to_configmap))
    record("fault_to_node_allocatable_s", percentiles(to_node))
    record("recovery_to_node_allocatable_s", percentiles(back_node))
    record("recovery_to_configmap_s", percentiles(back_configmap))


def test_an_administrators_release_is_announced_with_the_references_event(stack: Stack) -> None:
    """Two HBM faults isolate a free chip by rule (a FaultFrequency reason, lower-case code); the
    administrator empties ManuallySeparateNPU; the real apiserver accepts the reference-shaped
    `<pod>.EventReleaseUpgradeFault.<ms>` Event (an upper-case name, legal for core/v1 Events)."""
    in_use = set(
        stack.cluster.get("pod", "train-a", "-n", "default")["metadata"]["annotations"]["huawei.com/AscendReal"].split(
            ","
        )
    )
    chip = next(c for c in stack.exporter.chips() if c["name"] not in in_use)
    name, logic = chip["name"], chip["logic_id"]
    cm = f"mindx-dl-deviceinfo-{stack.cluster.node}"

    def data() -> dict[str, str]:
        return dict(stack.cluster.get("configmap", cm, "-n", "kube-system")["data"])

    for assertion in ("occur", "recover", "occur", "recover"):
        stack.exporter.fault(logic, HBM_TWICE_A_DAY, assertion)
    until_sync(lambda: name in names(data().get("ManuallySeparateNPU", "")), 30, f"{name} isolated", 0.1)
    reasons = json.loads(data()["UpgradeFaultReason"])
    assert [(r["fault_code"], r["upgrade_type"]) for r in reasons[name]] == [("80e01801", "FaultFrequency")]
    stack.cluster.kubectl(
        "patch", "configmap", cm, "-n", "kube-system", "--type=merge", "-p", '{"data":{"ManuallySeparateNPU":""}}'
    )

    def release_events() -> list[dict[str, Any]]:
        listed = stack.cluster.get("events", "-n", "kube-system", "--field-selector", "reason=EventReleaseUpgradeFault")
        return [e for e in listed["items"] if name in json.loads(e["message"])]

    until_sync(release_events, 30, "the EventReleaseUpgradeFault Event", 0.2)
    [event] = release_events()
    assert re.fullmatch(r"fault-manager-sim-[a-z0-9]+\.EventReleaseUpgradeFault\.\d{13}", event["metadata"]["name"])
    assert (event["type"], event["involvedObject"]["kind"]) == ("Normal", "pod"), event
    assert json.loads(event["message"])[name][0]["fault_code"] == "80e01801"
    until_sync(
        lambda: listed_healthy(stack, name) and stack.cluster.allocatable() == 8, 60, f"{name} usable again", 0.2
    )


def listed_healthy(stack: Stack, chip: str) -> bool:
    data = stack.cluster.device_list()
    return chip in names(data.get(RESOURCE, "")) and chip not in names(data.get(f"{RESOURCE}-Unhealthy", ""))


def test_plugin_pod_deleted_comes_back_and_reregisters(stack: Stack) -> None:
    train = stack.cluster.get("pod", "train-a", "-n", "default")
    harvest_logs(stack.cluster)
    (old,) = stack.cluster.pods(selector="app.kubernetes.io/name=ascend-device-plugin")
    before = registrations(stack.cluster)
    t0 = time.monotonic()
    stack.cluster.kubectl("delete", "pod", "-n", "ascend-system", old["metadata"]["name"], "--wait=false")
    until_sync(
        lambda: registrations(stack.cluster) > before, 90, "the new plugin pod registered with the kubelet", 0.05
    )
    registered = time.monotonic() - t0

    def new_pod_ready() -> bool:
        pods = stack.cluster.pods(selector="app.kubernetes.io/name=ascend-device-plugin")
        return any(p["metadata"]["uid"] != old["metadata"]["uid"] and ready(p) for p in pods)

    until_sync(new_pod_ready, 90, "a new plugin pod Ready")
    record("plugin_pod_deleted_to_registered_s", round(registered, 2))
    record("plugin_pod_deleted_to_ready_s", round(time.monotonic() - t0, 2))
    until_sync(lambda: stack.cluster.allocatable() == 8, 60, "allocatable 8")
    train_a_unchanged(stack, train)


def test_kubelet_restart_plugin_reregisters_and_allocation_survives(stack: Stack) -> None:
    train = stack.cluster.get("pod", "train-a", "-n", "default")
    before = registrations(stack.cluster)
    t0 = time.monotonic()
    restarted = subprocess.run(
        [str(Path(__file__).parent / "scripts" / "cluster.sh"), "restart-kubelet"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert restarted.returncode == 0, restarted.stderr
    until_sync(lambda: registrations(stack.cluster) > before, 60, "the plugin re-registered with the new kubelet", 0.05)
    registered = time.monotonic() - t0
    # The plugin's own share: from the new kubelet.sock (made by the kubelet's device manager as
    # it starts) to the kubelet logging the registration.
    socket_to_registration = last_registration_at(stack.cluster) - KUBELET_SOCKET.stat().st_ctime
    restart_wall = time.time()

    def fresh_status_with_eight() -> bool:
        node = stack.cluster.get("node", stack.cluster.node)
        (cond,) = [c for c in node["status"]["conditions"] if c["type"] == "Ready"]
        beat = time.mktime(time.strptime(cond["lastHeartbeatTime"], "%Y-%m-%dT%H:%M:%SZ")) - time.timezone
        return cond["status"] == "True" and beat >= restart_wall - 1 and stack.cluster.allocatable() == 8

    until_sync(fresh_status_with_eight, 90, "a node status after the restart with allocatable 8", 0.2)
    record("kubelet_restart_to_plugin_registered_s", round(registered, 2))
    record("kubelet_socket_to_plugin_registered_ms", round(socket_to_registration * 1000, 1))
    record("kubelet_restart_to_allocatable_restored_s", round(time.monotonic() - t0, 2))
    # The kubelet's checkpoint still holds train-a's two devices.
    entries = json.loads(CHECKPOINT.read_text())["Data"]["PodDeviceEntries"]
    mine = [e for e in entries if e["PodUID"] == train["metadata"]["uid"] and e["ResourceName"] == RESOURCE]
    assert mine and sum(len(ids) for e in mine for ids in e["DeviceIDs"].values()) == 2, entries
    train_a_unchanged(stack, train)


def rollout(stack: Stack, patches: dict[str, list[dict[str, Any]]]) -> float:
    """Apply JSON patches to the DaemonSets and wait for every rollout; return its duration."""
    harvest_logs(stack.cluster)
    t0 = time.monotonic()
    for ds, patch in patches.items():
        stack.cluster.kubectl("patch", "daemonset", ds, "-n", "ascend-system", "--type=json", "-p", json.dumps(patch))
    for ds in patches:
        stack.cluster.kubectl(
            "rollout", "status", f"daemonset/{ds}", "-n", "ascend-system", "--timeout=180s", timeout=200
        )
    until_sync(lambda: stack_pods_ready(stack.cluster), 120, "every stack pod Ready after the rollout")
    return time.monotonic() - t0


def test_rolling_update_keeps_the_running_pods_chips_and_hands_none_out_twice(stack: Stack) -> None:
    train = stack.cluster.get("pod", "train-a", "-n", "default")
    tagged = subprocess.run(
        [
            "ctr",
            "-n",
            "k8s.io",
            "images",
            "tag",
            "--force",
            f"docker.io/library/{IMAGE}",
            f"docker.io/library/{ROLLOUT_IMAGE}",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert tagged.returncode == 0, tagged.stderr
    image = [{"op": "replace", "path": "/spec/template/spec/containers/0/image", "value": ROLLOUT_IMAGE}]
    took = rollout(stack, {ds: image for ds in DAEMONSETS})
    record("rolling_update_image_tag_s", round(took, 1))
    for pod in stack.cluster.pods():
        assert pod["spec"]["containers"][0]["image"] == ROLLOUT_IMAGE
    until_sync(lambda: stack.cluster.allocatable() == 8, 60, "allocatable 8 after the rollout")
    train_a_unchanged(stack, train)

    # Six chips are free: a pod asking for six gets exactly those, one more asking for one waits.
    held = set(ids(train["metadata"]["annotations"]["huawei.com/AscendReal"]))
    start(stack.cluster, workload("fill", 6), "fill")
    filled = set(visible(stack.cluster, "fill"))
    assert len(filled) == 6 and not filled & held and len(filled | held) == 8
    stack.cluster.kubectl("apply", "-f", "-", stdin=workload("extra", 1))

    def unschedulable() -> bool:
        pod = stack.cluster.get("pod", "extra", "-n", "default")
        return any(
            c["type"] == "PodScheduled" and c["status"] == "False" and RESOURCE in c.get("message", "")
            for c in pod["status"].get("conditions", [])
        )

    until_sync(unschedulable, 60, "the 9th chip refused by the scheduler")
    stack.cluster.kubectl("delete", "pod", "fill", "extra", "-n", "default", "--wait=true", timeout=90)


def test_volcano_path_without_volcano(stack: Stack) -> None:
    """Volcano chooses the chips and binds the pod; the plugin (rolled out with --volcano-type)
    hands the kubelet those chips and marks the pod taken."""
    train = stack.cluster.get("pod", "train-a", "-n", "default")
    plugin_args = stack.cluster.get("daemonset", "ascend-device-plugin-sim", "-n", "ascend-system")["spec"]["template"][
        "spec"
    ]["containers"][0]["args"]
    volcano = [
        {"op": "replace", "path": "/spec/template/spec/containers/0/args", "value": [*plugin_args, "--volcano-type"]}
    ]
    took = rollout(stack, {"ascend-device-plugin-sim": volcano})
    record("rolling_update_plugin_argument_s", round(took, 1))
    train_a_unchanged(stack, train)

    held = set(train["metadata"]["annotations"]["huawei.com/AscendReal"].split(","))
    chosen = sorted(names(stack.cluster.device_list().get(RESOURCE, "")) - held)[-2:]
    annotations = {RESOURCE: ",".join(chosen), "predicate-time": str(time.time_ns())}
    start(stack.cluster, workload("vc-0", 2, annotations, node=stack.cluster.node), "vc-0")
    assert visible(stack.cluster, "vc-0") == ids(",".join(chosen))
    marked = until_sync(
        lambda: (
            (a := stack.cluster.get("pod", "vc-0", "-n", "default")["metadata"]["annotations"]).get("predicate-time")
            == TAKEN
            and a
        ),
        30,
        "vc-0 marked taken",
    )
    assert marked["huawei.com/AscendReal"] == ",".join(chosen)
    train_a_unchanged(stack, train)


POD_SOURCE_COMPONENT = ROOT / "deploy" / "kustomize" / "components" / "pod-source-kubelet"
STACK_ACCOUNTS = {f"system:serviceaccount:ascend-system:{sa}" for sa in ("ascend-device-plugin", "fault-manager")}


def pod_source_overlay(directory: Path, user_overlay: Path, cluster: Cluster) -> None:
    """The operator's overlay with the pod-source-kubelet component (docs/operations.md, "Pods from
    the kubelet"), the kubelets' serving CA from a file (here the cluster CA, which signed this
    kubelet's certificate for its node IP), and the plugin still in Volcano mode."""
    config = yaml.safe_load(Path(cluster.kubeconfig).read_text())
    (directory / "ca.crt").write_bytes(base64.b64decode(config["clusters"][0]["cluster"]["certificate-authority-data"]))
    volcano = '[{"op": "add", "path": "/spec/template/spec/containers/0/args/-", "value": "--volcano-type"}]'
    (directory / "kustomization.yaml").write_text(
        "apiVersion: kustomize.config.k8s.io/v1beta1\n"
        "kind: Kustomization\n"
        f"resources: [{os.path.relpath(user_overlay, directory)}]\n"
        f"components: [{os.path.relpath(POD_SOURCE_COMPONENT, directory)}]\n"
        "configMapGenerator:\n"
        "  - name: kubelet-serving-ca\n"
        "    namespace: ascend-system\n"
        "    files: [ca.crt]\n"
        "patches:\n"
        "  - target: {kind: DaemonSet, labelSelector: app.kubernetes.io/name=ascend-device-plugin}\n"
        f"    patch: '{volcano}'\n"
    )


def stack_pod_reads(stack: Stack, since: str = "") -> list[str]:
    """The pod get/list/watch requests of the plugin's and the fault-manager's accounts in the audit
    log (cluster.sh logs those), received after `since` (RFC 3339, as the log spells it)."""
    found = []
    for line in Path(stack.cluster.env["CLUSTER_AUDIT_LOG"]).read_text().splitlines():
        event = json.loads(line)
        if (
            event["user"]["username"] in STACK_ACCOUNTS
            and event.get("objectRef", {}).get("resource") == "pods"
            and event["verb"] in ("get", "list", "watch")
            and event["requestReceivedTimestamp"] > since
        ):
            found.append(f"{event['requestReceivedTimestamp']} {event['user']['username']} {event['verb']}")
    return found


def test_pods_from_the_kubelet_with_no_pod_watch(stack: Stack, tmp_path: Path) -> None:
    """Issue 34 item 3 on the real 1.20 kubelet (webhook authentication and authorization on): the
    plugin and the fault-manager switched to --pod-source kubelet read the node's pods from
    https://<status.hostIP>:10250/pods, the kubelet's certificate verified, authorized by nodes/proxy
    get; a Volcano pod bound afterwards is served and marked taken by the plugin and leaves the
    fault-manager's free list, and goes back on it when deleted, with no pod get, list or watch
    of theirs on the API server."""
    cluster = stack.cluster
    before = stack_pod_reads(stack)
    assert before, "the API-server source's list and watch are in the audit log (the check can fail)"
    harvest_logs(cluster)
    pod_source_overlay(tmp_path, stack.overlay, cluster)
    t0 = time.monotonic()
    cluster.kubectl("apply", "-k", str(tmp_path), timeout=120)
    for ds in ("ascend-device-plugin-sim", "fault-manager-sim"):
        cluster.kubectl("rollout", "status", f"daemonset/{ds}", "-n", "ascend-system", "--timeout=180s", timeout=200)
    until_sync(lambda: stack_pods_ready(cluster), 120, "every stack pod Ready with --pod-source kubelet")
    until_sync(lambda: cluster.allocatable() == 8, 60, "allocatable 8 after the switch")
    record("rolling_update_pod_source_kubelet_s", round(time.monotonic() - t0, 1))
    # Once the old pods are gone (a terminating one may still re-watch), only the new ones run: any
    # pod read of the two accounts from then on would be theirs.
    for app in ("ascend-device-plugin", "fault-manager"):
        selector = f"app.kubernetes.io/name={app}"
        until_sync(lambda s=selector: len(cluster.pods(selector=s)) == 1, 90, f"one {app} pod")  # type: ignore[misc]
    since = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime())
    plugin, fm = (
        cluster.pods(selector=f"app.kubernetes.io/name={app}")[0]["metadata"]["name"]
        for app in ("ascend-device-plugin", "fault-manager")
    )
    for name in (plugin, fm):
        log = cluster.kubectl("logs", "-n", "ascend-system", name)
        assert "reading pods from the kubelet, no pod watch on the API server" in log, log[-2000:]
        assert f"https://{cluster.env['CLUSTER_NODE_IP']}:10250/pods" in log

    held = {c for p in cluster.pods(namespace="default")
            for c in names(p["metadata"].get("annotations", {}).get("huawei.com/AscendReal", ""))}  # fmt: skip
    chosen = sorted(names(cluster.device_list().get(RESOURCE, "")) - held)[:2]
    assert len(chosen) == 2, (held, cluster.device_list())
    annotations = {RESOURCE: ",".join(chosen), "predicate-time": str(time.time_ns())}
    start(cluster, workload("vc-kubelet", 2, annotations, node=cluster.node), "vc-kubelet")
    assert visible(cluster, "vc-kubelet") == ids(",".join(chosen)), "the plugin found the pod Volcano chose"
    marked = until_sync(
        lambda: (
            (a := cluster.get("pod", "vc-kubelet", "-n", "default")["metadata"]["annotations"]).get("predicate-time")
            == TAKEN
            and a
        ),
        30,
        "vc-kubelet marked taken (the patch stays on the API server)",
    )
    assert marked["huawei.com/AscendReal"] == ",".join(chosen)
    until_sync(
        lambda: not set(chosen) & names(cluster.device_list().get(RESOURCE, "")),
        60,
        "vc-kubelet's chips off the fault-manager's free list",
    )
    cluster.kubectl("delete", "pod", "vc-kubelet", "-n", "default", "--wait=true", timeout=90)
    until_sync(
        lambda: set(chosen) <= names(cluster.device_list().get(RESOURCE, "")),
        60,
        "vc-kubelet's chips back on the free list once the kubelet no longer lists it",
    )
    for name in (plugin, fm):
        log = cluster.kubectl("logs", "-n", "ascend-system", name)
        assert "kubelet pod list failed" not in log, log[-2000:]
    assert stack_pod_reads(stack, since) == [], "no pod get, list or watch on the API server"


def hang_faults(stack: Stack, chip: str) -> list[dict[str, Any]]:
    faults = json.loads(stack.cluster.device_list().get(f"{RESOURCE}-Fault") or "[]")
    return [f for f in faults if f["npu_name"] == chip and f["fault_code"] == HANG_CODE]


def test_hung_job_reaches_the_fault_list(stack: Stack) -> None:
    """Issue 24 on a real node: the exporter runs with hostPID and reads the mounted hang config;
    an idle job on a free chip reaches the device-info ConfigMap's -Fault list (NotHandleFault,
    the chip still offered), and the job ending clears it."""
    train = stack.cluster.get("pod", "train-a", "-n", "default")
    ds = stack.cluster.get("daemonset", "dcmi-exporter-sim", "-n", "ascend-system")
    assert ds["spec"]["template"]["spec"]["hostPID"] is True
    # 1 s rounds instead of 60 (an operator's tuning, rolled out like any argument): with the
    # mounted config's DetectDuration 5 the fault comes about 6 s after the job goes idle.
    args = ds["spec"]["template"]["spec"]["containers"][0]["args"]
    faster = [{"op": "replace", "path": "/spec/template/spec/containers/0/args", "value": [*args, *HANG_ROUNDS]}]
    record("rolling_update_exporter_argument_s", round(rollout(stack, {"dcmi-exporter-sim": faster}), 1))
    train_a_unchanged(stack, train)

    (exporter,) = stack.cluster.pods(selector="app.kubernetes.io/name=dcmi-exporter")
    assert exporter["spec"]["hostPID"] is True
    name = exporter["metadata"]["name"]
    # With hostPID the container sees the host's processes: this test's own /proc/<pid>/stat,
    # which is what the hang probe reads for a chip's processes.
    stat = stack.cluster.kubectl("exec", "-n", "ascend-system", name, "--", "cat", f"/proc/{os.getpid()}/stat")
    assert stat.startswith(f"{os.getpid()} ("), stat[:80]
    log = stack.cluster.kubectl("logs", "-n", "ascend-system", name)
    assert "hang detection config loaded" in log, log[-2000:]
    assert "hang detection config unreadable" not in log

    pods = stack.cluster.pods(namespace="default")
    taken = {c for p in pods for c in names(p["metadata"].get("annotations", {}).get("huawei.com/AscendReal", ""))}
    chip = next(c for c in stack.exporter.chips() if c["name"] not in taken)
    t0 = time.monotonic()
    stack.exporter.idle_job(chip["logic_id"], [31337, 31338])
    [fault] = until_sync(lambda: hang_faults(stack, chip["name"]), 60, f"{HANG_CODE} on {chip['name']} in -Fault", 0.2)
    record("idle_job_to_configmap_fault_s", round(time.monotonic() - t0, 1))
    assert fault["fault_level"] == "NotHandleFault", fault
    assert listed_healthy(stack, chip["name"]) and stack.cluster.allocatable() == 8

    stack.exporter.idle_job(chip["logic_id"], None)
    until_sync(lambda: not hang_faults(stack, chip["name"]), 60, f"{HANG_CODE} gone from -Fault", 0.2)
    assert listed_healthy(stack, chip["name"])
    train_a_unchanged(stack, train)


def soft_share_overlay(directory: Path, user_overlay: Path) -> None:
    """The operator's overlay with the soft-share component added (docs/operations.md)."""
    (directory / "kustomization.yaml").write_text(
        "apiVersion: kustomize.config.k8s.io/v1beta1\n"
        "kind: Kustomization\n"
        f"resources: [{os.path.relpath(user_overlay, directory)}]\n"
        f"components: [{os.path.relpath(SOFT_SHARE_COMPONENT, directory)}]\n"
    )


def exec_in(cluster: Cluster, pod: str, *command: str) -> str:
    return cluster.kubectl("exec", "-n", "default", pod, "--", *command)


def test_soft_share_two_pods_on_one_chip(stack: Stack, tmp_path: Path) -> None:
    """Volcano packs two pods on one chip by AI-core quota (issue 23); the pods carry Volcano's
    annotations and labels themselves and the kubelet asks for as many ids as the quota. Each
    container reads its own npu_info.config at /etc/enpu/vcann-rt/ and both share the chip's
    /dev/shm/<die id>; deleting both removes the job's dir on the host."""
    cluster = stack.cluster
    train = cluster.get("pod", "train-a", "-n", "default")
    harvest_logs(cluster)
    cluster.kubectl("label", "node", cluster.node, f"{SOFT_SHARE_LABEL}=true", "--overwrite")
    soft_share_overlay(tmp_path, stack.overlay)
    t0 = time.monotonic()
    cluster.kubectl("apply", "-k", str(tmp_path), timeout=120)
    cluster.kubectl(
        "rollout", "status", "daemonset/ascend-device-plugin-sim", "-n", "ascend-system", "--timeout=180s", timeout=200
    )
    until_sync(lambda: stack_pods_ready(cluster), 120, "every stack pod Ready after soft share is switched on")
    until_sync(lambda: cluster.allocatable() == 800, 60, "allocatable 800: 8 chips as 100 ids each")
    record("rolling_update_soft_share_s", round(time.monotonic() - t0, 1))
    train_a_unchanged(stack, train)

    held = set(train["metadata"]["annotations"]["huawei.com/AscendReal"].split(","))
    held |= set(cluster.get("pod", "vc-0", "-n", "default")["metadata"]["annotations"][RESOURCE].split(","))
    chip = sorted(names(cluster.device_list().get(RESOURCE, "")) - held)[0]
    phy = int(chip.rsplit("-", 1)[1])
    (die,) = [c["static"]["vdie_id"] for c in stack.exporter.chips() if c["name"] == chip]
    pods = {  # name: (aicore quota, hbm quota MB, policy, its scheduling-policy, its vid)
        "ss-a": (30, 4096, "elastic", 2, 0),
        "ss-b": (20, 2048, "fixed-share", 1, 1),
    }
    for name, (aicore, hbm, policy, _, _) in pods.items():
        annotations = {
            RESOURCE: chip,
            "predicate-time": str(time.time_ns()),
            f"{SOFT_SHARE}.aicoreQuota": str(aicore),
            f"{SOFT_SHARE}.hbmQuota": str(hbm),
            f"{SOFT_SHARE}.policy": policy,
        }
        manifest = workload(name, aicore, annotations, node=cluster.node, labels={"volcano.sh/job-name": "ssjob"})
        start(cluster, manifest, name)

    for name, (aicore, hbm, _, scheduling, vid) in pods.items():
        assert exec_in(cluster, name, "cat", "/etc/enpu/vcann-rt/npu_info.config") == (
            f"physical-npu-id={phy}\nvirtual-npu-id={vid}\naicore-quota={aicore}\nmemory-quota={hbm}\n"
            f"shm-id={die}\nscheduling-policy={scheduling}"
        ), name
        assert visible(cluster, name) == [str(phy)]
        annotations = cluster.get("pod", name, "-n", "default")["metadata"]["annotations"]
        assert (annotations["huawei.com/AscendReal"], annotations[f"{SOFT_SHARE}.vnpuId"]) == (chip, str(vid))
        assert annotations["predicate-time"] == TAKEN
        assert (ENPU / f"default.ssjob/{phy}_{vid}" / "npu_info.config").is_file()
    # One shared-memory file for the chip: what one container writes, the other reads.
    exec_in(cluster, "ss-a", "sh", "-c", f"echo from-ss-a > /dev/shm/{die}")
    assert exec_in(cluster, "ss-b", "cat", f"/dev/shm/{die}") == "from-ss-a\n"
    assert (SHARE_DEVICE / str(phy) / die).read_text() == "from-ss-a\n"

    cluster.kubectl("delete", "pod", "ss-a", "ss-b", "-n", "default", "--wait=true", timeout=90)
    until_sync(lambda: not (ENPU / "default.ssjob").exists(), 30, "the job dir /etc/enpu/default.ssjob removed")
    assert ENPU.is_dir()
    train_a_unchanged(stack, train)


def test_fault_events_in_the_references_format_are_accepted_by_the_apiserver(stack: Stack) -> None:
    """`--fault-event-format reference` rolled out: a fault's occurrence and recovery on a free chip
    become the reference's Events (doWriteFaultToEvent), created by the real apiserver in
    kube-system under the fault-manager's narrowed RBAC (events create in kube-system only)."""
    args = [
        {"op": "add", "path": "/spec/template/spec/containers/0/args/-", "value": "--fault-event-format"},
        {"op": "add", "path": "/spec/template/spec/containers/0/args/-", "value": "reference"},
    ]
    rollout(stack, {"fault-manager-sim": args})
    [fm_pod] = [
        p["metadata"]["name"]
        for p in stack.cluster.pods()
        if p["metadata"]["name"].startswith("fault-manager-sim-") and p["metadata"].get("deletionTimestamp") is None
    ]
    # A chip the device-info ConfigMap lists as free: no earlier drill's pod holds it (train-a's chips,
    # the Volcano drill's vc-0) and it is healthy.
    free = names(stack.cluster.device_list().get(RESOURCE, ""))
    chip = next(c for c in reversed(stack.exporter.chips()) if c["name"] in free)
    logic, node = chip["logic_id"], stack.cluster.node
    until_sync(lambda: listed_healthy(stack, chip["name"]), 60, f"{chip['name']} healthy before the drill", 0.2)

    def written(reason: str) -> list[dict[str, Any]]:
        listed = stack.cluster.get("events", "-n", "kube-system", "--field-selector", f"reason={reason}")
        return [e for e in listed["items"] if f"faultCodes:{SEPARATE_NPU}," in e["message"]]

    stack.exporter.fault(logic, SEPARATE_NPU, "occur")
    until_sync(lambda: written("Occur"), 30, "the reference's Occur Event", 0.2)
    stack.exporter.fault(logic, SEPARATE_NPU, "recover")
    until_sync(lambda: written("Recovery"), 30, "the reference's Recovery Event", 0.2)
    for reason, type_ in (("Occur", "Warning"), ("Recovery", "Normal")):
        [event] = written(reason)
        assert re.fullmatch(rf"{re.escape(fm_pod)}\.\d{{13}}{logic}", event["metadata"]["name"]), event
        assert event["metadata"]["namespace"] == "kube-system"
        assert event["involvedObject"] == {"kind": "pod", "namespace": "kube-system", "name": fm_pod}, event
        assert (event["reason"], event["action"], event["type"]) == (reason, "SeparateNPU", type_), event
        assert re.fullmatch(
            rf"device fault, nodeName:{re.escape(node)}, assertion:{reason}, cardID:{chip['card_id']}, "
            rf"deviceID:{chip['device_id']}, faultCodes:{SEPARATE_NPU}, faultLevelName:SeparateNPU, "
            r"alarmRaisedTime:\d{4}-\d\d-\d\d \d\d:\d\d:\d\d",
            event["message"],
        ), event["message"]
        # The reference's component (issue 35 item 3), from our fault-manager's pod.
        assert (event["reportingComponent"], event["reportingInstance"]) == ("device-plugin", fm_pod), event
        assert event["source"] == {"component": "device-plugin", "host": node}, event
    # Ours is not written alongside.
    ours = stack.cluster.get("events", "-n", "kube-system", "--field-selector", "reason=NPUFaultOccurred")["items"]
    assert not [e for e in ours if (e.get("eventTime") or "") >= written("Occur")[0]["eventTime"]]
    until_sync(lambda: listed_healthy(stack, chip["name"]), 60, f"{chip['name']} healthy again", 0.2)


A5_PROFILE = "a5-superpod-8"
NPU = "huawei.com/npu"
A5_COMPONENT = ROOT / "deploy" / "kustomize" / "components" / "ascend-950"
NIC_MAPPING = Path("/user/mindx-dl/npu/npu-nic-mapping.json")  # where the component mounts it from
TOPO_950 = Path("/usr/local/Ascend/driver/topo/950")  # the driver's; the component mounts it read-only
A5_CHIP = 3  # the logic id whose UB port goes down
# The Go golden vectors tests/e2e/test_a5.py compares phy 1's levelList with.
GOLDEN = {
    v["name"]: v["go_json"]
    for v in map(json.loads, (ROOT / "tests" / "golden" / "rank_levels_vectors.jsonl").read_text().splitlines())
}


def a5_overlay(directory: Path, user_overlay: Path) -> None:
    """The operator's overlay for a 950 node: the 950 component, and the simulator's 950 profile in
    place of the simulated overlay's 910B one."""
    profile = [
        {"op": "test", "path": "/spec/template/spec/containers/0/args/3", "value": "910b-8"},
        {"op": "replace", "path": "/spec/template/spec/containers/0/args/3", "value": A5_PROFILE},
    ]
    (directory / "kustomization.yaml").write_text(
        "apiVersion: kustomize.config.k8s.io/v1beta1\n"
        "kind: Kustomization\n"
        f"resources: [{os.path.relpath(user_overlay, directory)}]\n"
        f"components: [{os.path.relpath(A5_COMPONENT, directory)}]\n"
        "patches:\n"
        "  - target: {kind: DaemonSet, name: dcmi-exporter-sim}\n"
        f"    patch: {json.dumps(json.dumps(profile))}\n"
    )


def node_npu(cluster: Cluster) -> tuple[int, dict[str, Any]]:
    """The node's allocatable huawei.com/npu and its baseDeviceInfos annotation (parsed; {} until written)."""
    node = cluster.get("node", cluster.node)
    raw = node["metadata"].get("annotations", {}).get("baseDeviceInfos")
    return int(node["status"].get("allocatable", {}).get(NPU, "0")), json.loads(raw) if raw else {}


def npu_unhealthy(cluster: Cluster) -> set[str]:
    return names(cluster.device_list().get(f"{NPU}-Unhealthy", ""))


def test_a5_node_publishes_level_lists_and_a_ub_port_down_takes_its_chip_out(stack: Stack, tmp_path: Path) -> None:
    """Issue 25 on a real node, the stack switched to a 950 super-pod server (the simulator's
    a5-superpod-8) with the 950 component: the node's baseDeviceInfos carries each chip's levelList
    (phy 1's byte for byte the Go golden tests/e2e/test_a5.py uses), and a UB port down on one chip
    takes it out of the kubelet's allocatable and into the ConfigMap's -Unhealthy until it is back
    up. Last but the log check: the node's 910B chips and pods are gone from then on."""
    cluster = stack.cluster
    harvest_logs(cluster)
    # What the operator puts on a 950 node: the driver's topology dir, the reference's mapping file
    # (each NPU tries ens1f0, the sim host's link-local only, then ens1f2: 10.0.0.7).
    TOPO_950.mkdir(parents=True, exist_ok=True)
    NIC_MAPPING.parent.mkdir(parents=True, exist_ok=True)
    NIC_MAPPING.write_text(json.dumps({"npuNics": [{"npuId": i, "nicNames": ["ens1f0", "ens1f2"]} for i in range(8)]}))
    a5_overlay(tmp_path, stack.overlay)
    t0 = time.monotonic()
    cluster.kubectl("apply", "-k", str(tmp_path), timeout=120)
    for ds in DAEMONSETS:
        cluster.kubectl("rollout", "status", f"daemonset/{ds}", "-n", "ascend-system", "--timeout=180s", timeout=200)
    until_sync(lambda: stack_pods_ready(cluster), 120, "every stack pod Ready on the 950 profile")
    until_sync(lambda: node_npu(cluster)[0] == 8, 90, f"allocatable {NPU} 8")

    def level_lists() -> dict[str, Any] | None:
        base = node_npu(cluster)[1]
        return base if base and all("levelList" in e for e in base.values()) else None

    base = until_sync(level_lists, 60, "every chip's levelList in baseDeviceInfos")
    record("rolling_update_a5_profile_to_level_lists_s", round(time.monotonic() - t0, 1))
    assert sorted(base) == [f"npu-{p}" for p in range(8)]
    # This node is server 1 of the profile's 2D pod: the golden `pod_1d_phy1` (server 2 of a 1D pod,
    # the same keys and builders) with that index, then the golden `device_with_levels`'s level 3.
    golden_pod = GOLDEN["pod_1d_phy1"].replace('"net_instance_id":"5_2"', '"net_instance_id":"5_1"')
    golden_l3 = go_json(json.loads(GOLDEN["device_with_levels"])["levelList"][0])
    assert go_json(base["npu-1"]["levelList"]) == golden_pod[:-1] + "," + golden_l3 + "]"
    for entry in base.values():
        assert [lv["level"] for lv in entry["levelList"]] == [0, 1, 3]
        assert entry["levelList"][2]["info"]["ROCE"]["rank_addr_list"][0]["addr"] == "10.0.0.7"

    chip = next(c["name"] for c in stack.exporter.chips() if c["logic_id"] == A5_CHIP)
    assert chip not in npu_unhealthy(cluster)
    t0 = time.monotonic()
    stack.exporter.ub_port(A5_CHIP, 0, 1, up=False)
    until_sync(lambda: node_npu(cluster)[0] == 7, 60, f"allocatable {NPU} 7 with {chip}'s UB port down", 0.2)
    record("ub_port_down_to_node_allocatable_s", round(time.monotonic() - t0, 1))
    until_sync(lambda: npu_unhealthy(cluster) == {chip}, 60, f"{chip} alone in {NPU}-Unhealthy", 0.2)
    t0 = time.monotonic()
    stack.exporter.ub_port(A5_CHIP, 0, 1, up=True)
    until_sync(lambda: node_npu(cluster)[0] == 8, 60, f"allocatable {NPU} 8 with the port back up", 0.2)
    record("ub_port_up_to_node_allocatable_s", round(time.monotonic() - t0, 1))
    until_sync(lambda: not npu_unhealthy(cluster), 60, f"{NPU}-Unhealthy empty again", 0.2)


def test_no_stack_pod_logged_a_403_a_forbidden_or_a_traceback(stack: Stack) -> None:
    harvest_logs(stack.cluster)
    assert len(LOGS) >= 3
    bad = [line for text in LOGS.values() for line in text.splitlines() if BAD_LOG.search(line)]
    assert bad == [], "\n".join(bad[:20])


@pytest.mark.parametrize(
    ("line", "bad"),
    [
        ('{"event": "patch failed", "status": 403, "pod": "ml/train-0"}', True),
        ("kubernetes.client.exceptions.ApiException: (403)", True),
        ("Reason: Forbidden", True),
        ("Traceback (most recent call last):", True),
        ('{"ts": "2026-12-01T11:14:03.403Z", "event": "ready"}', False),
        ('{"event": "chips", "hbm_mb": 64403}', False),
        ('{"event": "stream", "last_event_id": "a1-403"}', False),
    ],
)
def test_the_log_check_tells_a_403_from_a_number(line: str, bad: bool) -> None:
    """Runs without a cluster: the pattern the last drill applies."""
    assert bool(BAD_LOG.search(line)) is bad
