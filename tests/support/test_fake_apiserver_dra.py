"""The fake kube-apiserver's resource.k8s.io kinds, driven by the official client's dynamic API."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client as k8s
from kubernetes import watch as k8s_watch

from tests.support.fake_apiserver import ApiError, FakeApiServer

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


# ---- validation: what the real apiserver refuses is a 422 here (rules: test_kube_validation.py) --


def with_device(body: dict[str, Any], name: str, version: str) -> dict[str, Any]:
    device: dict[str, Any] = {"name": name, "attributes": {"physicId": {"int": 0}}}
    body["spec"]["devices"] = [
        device if version == "v1" else {"name": name, "basic": {"attributes": device["attributes"]}}
    ]
    return body


@pytest.mark.parametrize("version", ["v1", "v1beta1"])
def test_the_reference_device_name_is_refused_as_the_real_apiserver_refuses_it(
    fake: FakeApiServer, custom: Any, version: str
) -> None:
    body = with_device(a_slice("s", "node-a"), "Ascend910-0", version)
    body["apiVersion"] = f"{GROUP}/{version}"
    with pytest.raises(k8s.ApiException) as err:
        custom.create_cluster_custom_object(GROUP, version, "resourceslices", body)
    assert err.value.status == 422
    # As a 1.36 kube-apiserver words it (issue 33).
    message = json.loads(err.value.body or "{}")["message"]
    assert 'spec.devices[0].name: Invalid value: "Ascend910-0": a lowercase RFC 1123 label must consist of' in message
    assert fake.objects("resourceslices") == []
    created = custom.create_cluster_custom_object(
        GROUP, version, "resourceslices", with_device(body, "ascend910-0", version)
    )
    assert [d["name"] for d in created["spec"]["devices"]] == ["ascend910-0"]


def test_replace_and_patch_are_validated_too(fake: FakeApiServer, custom: Any) -> None:
    created = custom.create_cluster_custom_object(GROUP, "v1", "resourceslices", a_slice("s", "node-a"))
    bad = with_device(created, "Ascend910-0", "v1")
    with pytest.raises(k8s.ApiException) as err:
        custom.replace_cluster_custom_object(GROUP, "v1", "resourceslices", "s", bad)
    assert err.value.status == 422
    with pytest.raises(k8s.ApiException) as err:
        custom.patch_cluster_custom_object(GROUP, "v1", "resourceslices", "s", {"spec": {"nodeName": "node-b"}})
    assert err.value.status == 422 and "spec.nodeName" in str(err.value.body) and "immutable" in str(err.value.body)
    assert fake.objects("resourceslices")[0]["spec"]["devices"] == []


def test_a_planted_claim_is_validated_as_the_schedulers_write_would_be(fake: FakeApiServer) -> None:
    result = {"request": "npu", "driver": "npu.huawei.com", "pool": "node-a", "device": "Ascend910-0"}
    claim = {
        "apiVersion": f"{GROUP}/v1beta1",
        "metadata": {"name": "c", "namespace": "default"},
        "spec": {"devices": {"requests": [{"name": "npu", "deviceClassName": "npu.huawei.com"}]}},
        "status": {"allocation": {"devices": {"results": [result]}}},
    }
    with pytest.raises(ApiError, match=r"results\[0\]\.device: Invalid value: \"Ascend910-0\"") as err:
        fake.put_object("resourceclaims", claim)
    assert err.value.code == 422
    result["device"] = "ascend910-0"
    assert fake.put_object("resourceclaims", claim)["status"]["allocation"]["devices"]["results"] == [result]
    with pytest.raises(ApiError, match=r"status\.allocation: .*field is immutable"):
        fake.modify(
            "resourceclaims",
            "c",
            "default",
            lambda obj: obj["status"]["allocation"]["devices"]["results"][0].update(device="ascend910-1"),
        )


def test_a_device_class_with_too_many_selectors_is_refused(custom: Any) -> None:
    selectors = [{"cel": {"expression": "true"}}] * 33
    body = {
        "apiVersion": f"{GROUP}/v1",
        "kind": "DeviceClass",
        "metadata": {"name": "x"},
        "spec": {"selectors": selectors},
    }
    with pytest.raises(k8s.ApiException) as err:
        custom.create_cluster_custom_object(GROUP, "v1", "deviceclasses", body)
    assert err.value.status == 422 and "spec.selectors: Too many: 33" in str(err.value.body)


# ---- device taints: kept (1.36), dropped (1.32; 1.33 to 1.35 with the gate off) ------------------

TAINT = {"key": "npu.huawei.com/unhealthy", "value": "card_drop", "effect": "NoSchedule"}


def tainted_slice(version: str, taints: list[dict[str, Any]], generation: int = 1) -> dict[str, Any]:
    inner = {"attributes": {"physicId": {"int": 0}}, "taints": taints}
    device = {"name": "ascend910-0", **inner} if version == "v1" else {"name": "ascend910-0", "basic": inner}
    obj = a_slice("s", "node-a", generation)
    obj["apiVersion"] = f"{GROUP}/{version}"
    obj["spec"]["devices"] = [device]
    return obj


def taints_of(obj: Any) -> list[dict[str, Any]] | None:
    device = obj["spec"]["devices"][0]
    inner = device.get("basic", device)
    taints: list[dict[str, Any]] | None = inner.get("taints")
    return taints


@pytest.mark.parametrize(
    ("versions", "knob", "kept"),
    [
        pytest.param(("v1", "v1beta1"), None, True, id="1.36 default: v1 served, taints kept"),
        pytest.param(("v1beta1",), None, False, id="1.32 default: v1beta1 only, taints dropped"),
        pytest.param(("v1", "v1beta1"), False, False, id="1.34/1.35, gate off: dropped"),
        pytest.param(("v1beta1",), True, True, id="1.33, gate on: kept"),
    ],
)
def test_slice_taints_are_kept_or_silently_dropped(versions: tuple[str, ...], knob: bool | None, kept: bool) -> None:
    version = versions[0]
    with FakeApiServer(resource_api_versions=versions, device_taints=knob) as server:
        custom = k8s.CustomObjectsApi(server.api_client())
        dry = custom.create_cluster_custom_object(GROUP, version, "resourceslices", tainted_slice(version, [TAINT]),
                                                  dry_run="All")  # fmt: skip
        created = custom.create_cluster_custom_object(GROUP, version, "resourceslices", tainted_slice(version, [TAINT]))
        stored = server.get_object("resourceslices", "s")
        assert stored is not None
        for answer in (dry, created, stored):
            taints = taints_of(answer)
            if kept:
                assert taints is not None and len(taints) == 1
                added = taints[0].pop("timeAdded")  # defaulted on write, to the second
                assert isinstance(added, str) and added.endswith("Z") and "." not in added
                assert taints == [TAINT]
            else:
                assert taints is None


def test_a_dropped_taint_is_not_validated_and_a_kept_one_is() -> None:
    bad = [{**TAINT, "effect": "PreferNoSchedule"}]
    with FakeApiServer(resource_api_versions=("v1beta1",)) as old:
        custom = k8s.CustomObjectsApi(old.api_client())
        created = custom.create_cluster_custom_object(GROUP, "v1beta1", "resourceslices", tainted_slice("v1beta1", bad))
        assert taints_of(created) is None
    with FakeApiServer(resource_api_versions=("v1",)) as new:
        custom = k8s.CustomObjectsApi(new.api_client())
        with pytest.raises(k8s.ApiException) as err:
            custom.create_cluster_custom_object(GROUP, "v1", "resourceslices", tainted_slice("v1", bad))
        assert err.value.status == 422
        assert (
            'spec.devices[0].taints[0].effect: Unsupported value: "PreferNoSchedule"'
            in json.loads(err.value.body or "{}")["message"]
        )


def test_a_given_time_added_is_kept_and_a_slice_that_holds_taints_keeps_them_with_the_gate_off() -> None:
    given = {**TAINT, "timeAdded": "2026-01-02T03:04:05Z"}
    with FakeApiServer(resource_api_versions=("v1",)) as server:
        custom = k8s.CustomObjectsApi(server.api_client())
        created: Any = custom.create_cluster_custom_object(GROUP, "v1", "resourceslices", tainted_slice("v1", [given]))
        assert taints_of(created) == [given]
        server.device_taints = False  # the gate turned off since: the slice as stored uses the feature
        rv = created["metadata"]["resourceVersion"]
        update = {**tainted_slice("v1", [given], 2), "metadata": {"name": "s", "resourceVersion": rv}}
        replaced = custom.replace_cluster_custom_object(GROUP, "v1", "resourceslices", "s", update)
        assert taints_of(replaced) == [given]
