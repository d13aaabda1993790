"""The fake kube-apiserver's resource.k8s.io kinds, driven by the official client's dynamic API."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client as k8s
from kubernetes import watch as k8s_watch

from tests.support.fake_apiserver import FakeApiServer

GROUP = "resource.k8s.io"


@pytest.fixture
def fake() -> Iterator[FakeApiServer]:
    with FakeApiServer(resource_api_versions=("v1", "v1beta1")) as server:
        yield server


@pytest.fixture
def custom(fake: FakeApiServer) -> Any:
    return k8s.CustomObjectsApi(fake.api_client())


def a_slice(name: str, node: str, generation: int = 1) -> dict[str, Any]:
    return {
        "apiVersion": f"{GROUP}/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": name},
        "spec": {"driver": "npu.huawei.com", "nodeName": node, "pool": {"name": node, "generation": generation,
                                                                          "resourceSliceCount": 1}, "devices": []},
    }  # fmt: skip


def test_discovery_lists_the_served_versions(fake: FakeApiServer) -> None:
    group = k8s.ResourceApi(fake.api_client()).get_api_group()  # the client's own model of the answer
    assert group.name == GROUP
    assert [v.version for v in group.versions] == ["v1", "v1beta1"]
    assert group.preferred_version is not None and group.preferred_version.version == "v1"


def test_an_apiserver_without_the_group_answers_404() -> None:
    with FakeApiServer() as old:
        custom = k8s.CustomObjectsApi(old.api_client())
        with pytest.raises(k8s.ApiException) as err:
            custom.list_cluster_custom_object(GROUP, "v1beta1", "resourceslices")
        assert err.value.status == 404


def test_a_version_not_served_is_404(fake: FakeApiServer, custom: Any) -> None:
    with pytest.raises(k8s.ApiException) as err:
        custom.list_cluster_custom_object(GROUP, "v1alpha3", "resourceslices")
    assert err.value.status == 404


def test_slices_create_conflict_replace_by_resource_version(custom: Any) -> None:
    created = custom.create_cluster_custom_object(GROUP, "v1", "resourceslices", a_slice("s", "node-a"))
    assert created["apiVersion"] == f"{GROUP}/v1" and created["metadata"]["resourceVersion"]
    with pytest.raises(k8s.ApiException) as err:
        custom.create_cluster_custom_object(GROUP, "v1", "resourceslices", a_slice("s", "node-a"))
    assert err.value.status == 409
    stale = {**a_slice("s", "node-a", 2), "metadata": {"name": "s", "resourceVersion": "1"}}
    with pytest.raises(k8s.ApiException) as err:
        custom.replace_cluster_custom_object(GROUP, "v1", "resourceslices", "s", stale)
    assert err.value.status == 409
    current = created["metadata"]["resourceVersion"]
    fresh = {**a_slice("s", "node-a", 2), "metadata": {"name": "s", "resourceVersion": current}}
    replaced = custom.replace_cluster_custom_object(GROUP, "v1", "resourceslices", "s", fresh)
    assert replaced["spec"]["pool"]["generation"] == 2


def test_slices_select_by_node_and_driver(custom: Any) -> None:
    custom.create_cluster_custom_object(GROUP, "v1", "resourceslices", a_slice("a", "node-a"))
    custom.create_cluster_custom_object(GROUP, "v1", "resourceslices", a_slice("b", "node-b"))
    listed = custom.list_cluster_custom_object(GROUP, "v1", "resourceslices", field_selector="spec.nodeName=node-b")
    assert [i["metadata"]["name"] for i in listed["items"]] == ["b"]
    by_driver = custom.list_cluster_custom_object(
        GROUP, "v1", "resourceslices", field_selector="spec.driver=npu.huawei.com"
    )
    assert len(by_driver["items"]) == 2


def test_claims_are_namespaced_and_watched(fake: FakeApiServer, custom: Any) -> None:
    rv = str(fake.resource_version)
    body = {"apiVersion": f"{GROUP}/v1beta1", "kind": "ResourceClaim", "metadata": {"name": "c"}, "spec": {}}
    created = custom.create_namespaced_custom_object(GROUP, "v1beta1", "ml", "resourceclaims", body)
    assert created["metadata"]["namespace"] == "ml" and created["metadata"]["uid"]
    assert created["apiVersion"] == f"{GROUP}/v1beta1"  # kept in the served version it was written in
    with pytest.raises(k8s.ApiException) as err:
        custom.get_namespaced_custom_object(GROUP, "v1beta1", "other", "resourceclaims", "c")
    assert err.value.status == 404
    w = k8s_watch.Watch()  # type: ignore[no-untyped-call]
    events = [
        (e["type"], e["object"]["metadata"]["name"])
        for e in w.stream(  # type: ignore[no-untyped-call]
            custom.list_namespaced_custom_object,
            GROUP,
            "v1beta1",
            "ml",
            "resourceclaims",
            resource_version=rv,
            timeout_seconds=1,
        )
    ]
    assert events == [("ADDED", "c")]


def test_device_classes_are_cluster_scoped(custom: Any) -> None:
    body = {"apiVersion": f"{GROUP}/v1", "kind": "DeviceClass", "metadata": {"name": "npu.huawei.com"}, "spec": {}}
    custom.create_cluster_custom_object(GROUP, "v1", "deviceclasses", body)
    got = custom.get_cluster_custom_object(GROUP, "v1", "deviceclasses", "npu.huawei.com")
    assert got["kind"] == "DeviceClass" and "namespace" not in got["metadata"]


def test_slices_are_deleted_as_a_collection_by_node_and_driver(fake: FakeApiServer, custom: Any) -> None:
    """The kubelet's wipes: DeleteCollection with spec.nodeName (at its start), plus spec.driver (a driver gone)."""
    for name, node in (("a", "node-a"), ("b", "node-b")):
        custom.create_cluster_custom_object(GROUP, "v1beta1", "resourceslices", a_slice(name, node))
    other = {**a_slice("a-gpu", "node-a"), "spec": {**a_slice("a-gpu", "node-a")["spec"], "driver": "gpu.example.com"}}
    custom.create_cluster_custom_object(GROUP, "v1beta1", "resourceslices", other)
    resource = k8s.ResourceV1beta1Api(fake.api_client())  # the typed call the kubelet's clientset makes

    resource.delete_collection_resource_slice(field_selector="spec.driver=npu.huawei.com,spec.nodeName=node-a")
    assert [o["metadata"]["name"] for o in fake.objects("resourceslices")] == ["a-gpu", "b"]
    assert fake.requests[-1].method == "DELETE" and fake.requests[-1].status == 200

    rv = str(fake.resource_version)
    resource.delete_collection_resource_slice(field_selector="spec.nodeName=node-a")
    assert [o["metadata"]["name"] for o in fake.objects("resourceslices")] == ["b"]
    w = k8s_watch.Watch()  # type: ignore[no-untyped-call]
    events = [
        (e["type"], e["object"]["metadata"]["name"])
        for e in w.stream(  # type: ignore[no-untyped-call]
            custom.list_cluster_custom_object, GROUP, "v1beta1", "resourceslices", resource_version=rv,
            timeout_seconds=1,
        )
    ]  # fmt: skip
    assert events == [("DELETED", "a-gpu")]

    with pytest.raises(k8s.ApiException) as err:
        resource.delete_collection_resource_slice(field_selector="spec.pool=node-b")
    assert err.value.status == 400  # a field the real server does not index for slices
    with pytest.raises(k8s.ApiException) as err:
        k8s.ResourceV1beta1Api(fake.api_client()).delete_collection_namespaced_resource_claim("ml")
    assert err.value.status == 405  # only the slices have it here
    assert [o["metadata"]["name"] for o in fake.objects("resourceslices")] == ["b"]
