"""SlimPod: a pod cut down to what the services keep, and the pods it refuses (InvalidPod)."""

from __future__ import annotations

import contextlib
from typing import Any

import pytest
from ascend_common.pods import InvalidPod, slim_pod
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kubernetes import client as k8s

NODE = "node-a"
NPU = "huawei.com/Ascend910"


def pod_json(**meta: Any) -> dict[str, Any]:
    metadata = {"name": "p", "namespace": "default", "uid": "u-1", "resourceVersion": "7"} | meta
    return {"metadata": metadata, "spec": {"nodeName": NODE, "containers": []}, "status": {"phase": "Running"}}


def test_slim_pod_keeps_only_slim_fields_and_sums_npu_requests() -> None:
    obj = pod_json(
        annotations={"huawei.com/Ascend910": "Ascend910-0"},
        labels={"app": "x"},
        creationTimestamp="2024-01-02T03:04:05Z",
        deletionTimestamp="2024-01-02T03:05:00Z",
    )
    obj["spec"]["containers"] = [
        {"name": "a", "resources": {"limits": {NPU: "2", "cpu": "500m"}, "requests": {NPU: "2"}}},
        {"name": "b", "resources": {"requests": {NPU: "1", "huawei.com/Ascend310P": "4"}}},
        {"name": "c"},
    ]
    pod = slim_pod(obj)
    assert pod.requests == {NPU: 3, "huawei.com/Ascend310P": 4}
    assert (pod.namespace, pod.name, pod.uid, pod.phase, pod.node_name) == ("default", "p", "u-1", "Running", NODE)
    assert pod.deleting and pod.created == 1704164645.0 and pod.resource_version == "7"
    assert pod.annotations == {"huawei.com/Ascend910": "Ascend910-0"} and pod.labels == {"app": "x"}
    with pytest.raises(TypeError):
        pod.annotations["x"] = "y"  # type: ignore[index]
    assert hash(pod) == hash(slim_pod(obj)) and pod == slim_pod(obj)
    assert not hasattr(pod, "__dict__"), "slots keep 10,000 records small"


def test_slim_pod_accepts_the_client_model() -> None:
    model = k8s.V1Pod(
        metadata=k8s.V1ObjectMeta(name="p", namespace="ns", uid="u", annotations={"a": "b"}),
        spec=k8s.V1PodSpec(
            node_name=NODE,
            containers=[k8s.V1Container(name="c", resources=k8s.V1ResourceRequirements(limits={NPU: "8"}))],
        ),
        status=k8s.V1PodStatus(phase="Pending"),
    )
    pod = slim_pod(model)
    assert (pod.name, pod.requests, pod.annotations, pod.deleting) == ("p", {NPU: 8}, {"a": "b"}, False)


@pytest.mark.parametrize(
    ("meta", "reason"),
    [
        ({"name": "Bad_Name"}, "DNS-1123 subdomain"),
        ({"namespace": "x" * 64}, "DNS-1123 label"),
        ({"uid": None}, "uid"),
        ({"annotations": {f"k{i}": "v" for i in range(257)}}, "more than 256"),
        ({"annotations": {"k": "v" * (256 * 1024)}}, "larger than"),
        ({"annotations": {"k": 1}}, "strings to strings"),
        ({"labels": ["a"]}, "labels is not an object"),
        ({"creationTimestamp": "yesterday"}, "RFC 3339"),
    ],
)
def test_slim_pod_refuses_malformed_pods(meta: dict[str, Any], reason: str) -> None:
    with pytest.raises(InvalidPod, match=reason):
        slim_pod(pod_json(**meta))


@pytest.mark.parametrize("quantity", ["-1", "1.5", "2x", True, None, 10**9])
def test_slim_pod_refuses_bad_npu_quantities(quantity: Any) -> None:
    obj = pod_json()
    obj["spec"]["containers"] = [{"name": "c", "resources": {"limits": {NPU: quantity}}}]
    with pytest.raises(InvalidPod):
        slim_pod(obj)


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner, max_size=4),
    max_leaves=20,
)
KEYS = st.text(max_size=40) | st.integers() | st.none() | st.tuples(st.integers())
VALUES = st.text(max_size=200) | JSON


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(annotations=st.dictionaries(KEYS, VALUES, max_size=300) | JSON)
def test_slim_pod_raises_only_invalid_pod_on_arbitrary_annotations(annotations: Any) -> None:
    try:
        pod = slim_pod(pod_json(annotations=annotations))
    except InvalidPod:
        return
    assert all(isinstance(k, str) and isinstance(v, str) for k, v in pod.annotations.items())
    assert len(pod.annotations) <= 256


@settings(max_examples=300, deadline=None)
@given(
    obj=st.fixed_dictionaries(
        {},
        optional={
            "metadata": st.fixed_dictionaries(
                {},
                optional={
                    "name": st.sampled_from(["p", "p.q", "P", ""]) | JSON,
                    "namespace": st.sampled_from(["default", "-x"]) | JSON,
                    "uid": st.just("u") | JSON,
                    "labels": JSON,
                    "creationTimestamp": st.sampled_from(["2024-01-01T00:00:00Z"]) | JSON,
                    "deletionTimestamp": JSON,
                    "resourceVersion": JSON,
                },
            )
            | JSON,
            "spec": st.fixed_dictionaries(
                {},
                optional={
                    "nodeName": JSON,
                    "containers": st.lists(
                        st.fixed_dictionaries(
                            {"resources": st.fixed_dictionaries({"limits": st.dictionaries(st.just(NPU), JSON)})}
                        )
                        | JSON,
                        max_size=3,
                    )
                    | JSON,
                },
            )
            | JSON,
            "status": JSON,
        },
    )
    | JSON
)
def test_slim_pod_raises_only_invalid_pod_on_arbitrary_objects(obj: Any) -> None:
    with contextlib.suppress(InvalidPod):
        slim_pod(obj)
