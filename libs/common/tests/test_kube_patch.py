"""Pod and node patches with bounded retries, node reads and client construction."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from ascend_common.adapters.kube.client import (
    ApiClient,
    KubeNotFound,
    KubeRejected,
    KubeRetriesExhausted,
    retrying,
)
from ascend_common.adapters.kube.config import KubeConfigError, build_api_client
from ascend_common.adapters.kube.patch import (
    get_node,
    patch_node,
    patch_pod_annotations,
    remove_node_resources,
    resources_patch,
)
from kubernetes.aio.client.exceptions import ApiException

from tests.support.fake_apiserver import FakeApiServer

POD_PATH = "/api/v1/namespaces/default/pods/p"


@pytest.fixture
def fake() -> Iterator[FakeApiServer]:
    with FakeApiServer() as server:
        server.add_pod("p", annotations={"keep": "1", "drop": "2"})
        server.add_node("node-a", labels={"old": "x"}, internal_ip="10.1.2.3")
        yield server


def pod_annotations(fake: FakeApiServer) -> dict[str, str]:
    pod = fake.get_object("pods", "p", "default")
    assert pod is not None
    return dict(pod["metadata"].get("annotations") or {})


async def test_patch_sets_and_deletes_annotations_with_a_strategic_merge(fake: FakeApiServer, api: ApiClient) -> None:
    await patch_pod_annotations(api, "default", "p", {"huawei.com/AscendReal": "Ascend910-0", "drop": None})
    assert pod_annotations(fake) == {"keep": "1", "huawei.com/AscendReal": "Ascend910-0"}
    patch = fake.requests[-1]
    assert (patch.method, patch.path, patch.content_type) == (
        "PATCH",
        POD_PATH,
        "application/strategic-merge-patch+json",
    )
    assert patch.body == {"metadata": {"annotations": {"huawei.com/AscendReal": "Ascend910-0", "drop": None}}}


@pytest.mark.parametrize("status", [409, 429, 500, 503])
async def test_patch_is_retried_on_transient_errors_then_succeeds(
    fake: FakeApiServer, api: ApiClient, status: int
) -> None:
    fake.fail_next(2, status, POD_PATH, "PATCH", retry_after=0)
    await patch_pod_annotations(api, "default", "p", {"a": "b"}, retries=2, base_delay=0.01)
    assert fake.count("PATCH", POD_PATH) == 3
    assert pod_annotations(fake)["a"] == "b"


async def test_429_retry_after_is_honoured(fake: FakeApiServer, api: ApiClient) -> None:
    fake.fail_next(1, 429, POD_PATH, "PATCH", retry_after=1)
    start = time.monotonic()
    await patch_pod_annotations(api, "default", "p", {"a": "b"}, base_delay=0.01)
    assert time.monotonic() - start >= 0.9, "the retry came before the server's Retry-After"
    assert fake.count("PATCH", POD_PATH) == 2


async def test_patch_gives_up_after_the_last_retry(fake: FakeApiServer, api: ApiClient) -> None:
    fake.fail_next(10, 500, POD_PATH, "PATCH")
    with pytest.raises(KubeRetriesExhausted) as err:
        await patch_pod_annotations(api, "default", "p", {"a": "b"}, retries=2, base_delay=0.01)
    assert (err.value.status, err.value.attempts) == (500, 3)
    assert "default/p" in str(err.value)
    assert fake.count("PATCH", POD_PATH) == 3
    assert "a" not in pod_annotations(fake)


async def test_no_retry_on_404_or_422(fake: FakeApiServer, api: ApiClient) -> None:
    with pytest.raises(KubeNotFound) as missing:
        await patch_pod_annotations(api, "default", "gone", {"a": "b"}, base_delay=0.01)
    assert missing.value.status == 404 and missing.value.attempts == 1
    assert fake.count("PATCH", "/api/v1/namespaces/default/pods/gone") == 1

    fake.fail_next(5, 422, POD_PATH, "PATCH")
    with pytest.raises(KubeRejected) as rejected:
        await patch_pod_annotations(api, "default", "p", {"a": "b"}, base_delay=0.01)
    assert rejected.value.status == 422
    assert fake.count("PATCH", POD_PATH) == 1


async def test_timeouts_and_a_down_apiserver_are_retried_then_reported(fake: FakeApiServer, api: ApiClient) -> None:
    fake.delay(2)
    with pytest.raises(KubeRetriesExhausted) as slow:
        await patch_pod_annotations(api, "default", "p", {"a": "b"}, retries=1, timeout=0.3, base_delay=0.01)
    assert slow.value.status is None and slow.value.attempts == 2
    fake.delay(0)

    fake.set_down(True)
    with pytest.raises(KubeRetriesExhausted) as down:
        await patch_pod_annotations(api, "default", "p", {"a": "b"}, retries=1, base_delay=0.01)
    assert down.value.status is None
    fake.set_down(False)
    await patch_pod_annotations(api, "default", "p", {"a": "c"}, base_delay=0.01)
    assert pod_annotations(fake)["a"] == "c"


async def test_bad_arguments_are_refused_before_any_request(fake: FakeApiServer, api: ApiClient) -> None:
    before = len(fake.requests)
    with pytest.raises(TypeError):
        await patch_pod_annotations(api, "default", "p", {"a": 1})  # type: ignore[dict-item]
    with pytest.raises(ValueError, match="nothing to patch"):
        await patch_node(api, "node-a")
    assert len(fake.requests) == before


async def test_node_labels_and_annotations(fake: FakeApiServer, api: ApiClient) -> None:
    node = await patch_node(
        api,
        "node-a",
        labels={"node.kubernetes.io/npu.chip.name": "910B3", "old": None},
        annotations={"superPodID": "1"},
        base_delay=0.01,
    )
    assert node.labels == {"node.kubernetes.io/npu.chip.name": "910B3"}
    assert node.annotations == {"superPodID": "1"}
    stored = fake.get_object("nodes", "node-a")
    assert stored is not None and stored["metadata"]["labels"] == {"node.kubernetes.io/npu.chip.name": "910B3"}
    assert fake.requests[-1].content_type == "application/strategic-merge-patch+json"

    fake.fail_next(1, 500, "/api/v1/nodes/node-a", "PATCH")
    await patch_node(api, "node-a", labels={"servertype": "Ascend910B-20"}, base_delay=0.01)
    read = await get_node(api, "node-a", base_delay=0.01)
    assert read.internal_ip == "10.1.2.3" and read.labels["servertype"] == "Ascend910B-20"
    assert int(read.resource_version) == fake.resource_version

    with pytest.raises(KubeNotFound):
        await get_node(api, "node-z", base_delay=0.01)


OLD = "huawei.com/Ascend910"


def give_capacity(fake: FakeApiServer, capacity: dict[str, str], allocatable: dict[str, str]) -> None:
    fake.modify(
        "nodes", "node-a", mutate=lambda n: n["status"].update(capacity=dict(capacity), allocatable=dict(allocatable))
    )


async def test_remove_node_resources_patches_the_status_subresource(fake: FakeApiServer, api: ApiClient) -> None:
    give_capacity(fake, {"cpu": "8", OLD: "8"}, {"cpu": "8", OLD: "7"})
    assert await remove_node_resources(api, "node-a", [OLD, "huawei.com/Ascend310"], base_delay=0.01) == [OLD]
    node = fake.get_object("nodes", "node-a")
    assert node is not None
    assert (node["status"]["capacity"], node["status"]["allocatable"]) == ({"cpu": "8"}, {"cpu": "8"})
    assert node["metadata"]["labels"] == {"old": "x"}  # nothing else touched
    read, patch = fake.requests[-2:]
    assert (read.method, read.path, read.query) == ("GET", "/api/v1/nodes/node-a", {"resourceVersion": "0"})
    assert (patch.method, patch.path, patch.content_type) == (
        "PATCH", "/api/v1/nodes/node-a/status", "application/strategic-merge-patch+json",
    )  # fmt: skip
    assert patch.body == {"status": {"capacity": {OLD: None}, "allocatable": {OLD: None}}}
    # Done: the next call reads the node and writes nothing.
    assert await remove_node_resources(api, "node-a", [OLD], base_delay=0.01) == []
    assert fake.requests[-1].method == "GET"


async def test_remove_node_resources_looks_at_the_capacity_alone(fake: FakeApiServer, api: ApiClient) -> None:
    """RemoveOldResource: a resource missing from the capacity is not there, whatever the allocatable says."""
    give_capacity(fake, {"cpu": "8"}, {"cpu": "8", OLD: "8"})
    assert await remove_node_resources(api, "node-a", [OLD], base_delay=0.01) == []
    assert resources_patch({}, [OLD]) is None
    assert resources_patch({OLD: "0"}, [OLD, "x"]) == {"status": {"capacity": {OLD: None}, "allocatable": {OLD: None}}}


async def test_remove_node_resources_retries_then_reports(fake: FakeApiServer, api: ApiClient) -> None:
    give_capacity(fake, {OLD: "8"}, {OLD: "8"})
    fake.fail_next(1, 500, "/api/v1/nodes/node-a/status", "PATCH")
    assert await remove_node_resources(api, "node-a", [OLD], base_delay=0.01) == [OLD]
    give_capacity(fake, {OLD: "8"}, {OLD: "8"})
    fake.fail_next(1, 403, "/api/v1/nodes/node-a/status", "PATCH")  # no RBAC for nodes/status
    with pytest.raises(KubeRejected):
        await remove_node_resources(api, "node-a", [OLD], base_delay=0.01)
    with pytest.raises(KubeNotFound):
        await remove_node_resources(api, "node-z", [OLD], base_delay=0.01)


async def test_retrying_helper() -> None:
    calls: list[int] = []

    async def flaky() -> str:
        calls.append(1)
        if len(calls) < 3:
            raise ApiException(status=503, reason="busy")
        return "ok"

    assert await retrying(flaky, "flaky", retries=2, base_delay=0.01) == "ok"
    assert len(calls) == 3

    async def broken() -> str:
        raise ApiException(status=403, reason="Forbidden")

    with pytest.raises(KubeRejected):
        await retrying(broken, "broken", retries=5, base_delay=0.01)

    async def slow() -> str:
        raise TimeoutError

    with pytest.raises(KubeRetriesExhausted) as err:
        await retrying(slow, "slow", retries=1, base_delay=0.01)
    assert err.value.attempts == 2


async def test_build_api_client(fake: FakeApiServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(KubeConfigError):
        await build_api_client(environ={}, home=tmp_path)  # nothing configured (not even ~/.kube/config)

    monkeypatch.setenv("HTTP_PROXY", "http://proxy.invalid:3128")
    local: Any = await build_api_client(url="http://127.0.0.1:1234/")
    assert local.configuration.host == "http://127.0.0.1:1234" and local.configuration.proxy is None
    await local.close()
    # A local apiserver is reached directly, whatever HTTP_PROXY says.
    direct = await build_api_client(url=fake.url)
    try:
        assert (await get_node(direct, "node-a", retries=0)).name == "node-a"
    finally:
        await direct.close()  # type: ignore[no-untyped-call]

    kubeconfig = tmp_path / "config"
    kubeconfig.write_text(
        """
apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://10.0.0.1:6443", insecure-skip-tls-verify: true}}]
users: [{name: u, user: {token: "abc"}}]
contexts: [{name: x, context: {cluster: c, user: u}}]
current-context: x
"""
    )
    remote: Any = await build_api_client(kubeconfig=kubeconfig)
    assert remote.configuration.host == "https://10.0.0.1:6443"
    await remote.close()
    with pytest.raises(KubeConfigError):
        await build_api_client(kubeconfig=tmp_path / "missing")
