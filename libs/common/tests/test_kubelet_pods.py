"""KubeletPodSource (--pod-source kubelet) against a fake kubelet /pods over HTTPS: the same
ADDED/MODIFIED/DELETED changes as the API server's PodCache, no request to the API server, and
a refused, dead or babbling kubelet logged, retried and never read as every pod gone."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from ascend_common.adapters.kube.client import ApiClient
from ascend_common.adapters.kube.pod_watch import PodCache
from ascend_common.adapters.kubelet.pods import KubeletPodSource, parse_pod_list
from ascend_common.adapters.kubelet.source import KubeletSource
from ascend_common.adapters.logs import JsonFormatter
from ascend_common.adapters.pod_source import PodSource, PodSourceSettings, build_pod_source

from tests.support.fake_apiserver import FakeApiServer
from tests.support.fake_kubelet_pods import Cert, FakeKubeletPods, make_cert
from tests.support.waiting import until

NODE = "node-a"
NPU = "huawei.com/Ascend910"
TOKEN = "sa-token-1"


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Cert, Cert]:
    d = tmp_path_factory.mktemp("certs")
    return make_cert(d, "kubelet"), make_cert(d, "stranger")


@pytest.fixture
def token_file(tmp_path: Path) -> Path:
    path = tmp_path / "token"
    path.write_text(TOKEN + "\n")
    return path


@pytest.fixture
def kubelet(certs: tuple[Cert, Cert], fake: FakeApiServer) -> Iterator[FakeKubeletPods]:
    with FakeKubeletPods(certs[0], node=NODE, api=fake, tokens={TOKEN}) as k:
        yield k


def source_of(k: FakeKubeletPods, token_file: Path, ca: Path | None, *, period: float = 0.1) -> KubeletSource:
    return KubeletSource("127.0.0.1", k.port, token_file, ca, insecure_skip_verify=ca is None, period_s=period)


@pytest.fixture
async def make_source(kubelet: FakeKubeletPods, token_file: Path) -> AsyncIterator[Callable[..., Any]]:
    made: list[KubeletPodSource] = []

    async def make(*, ca: Path | None = kubelet.cert.cert, sync: bool = True, **kw: Any) -> KubeletPodSource:
        source = KubeletPodSource(NODE, source_of(kubelet, token_file, ca), backoff_cap_s=0.3, **kw)
        made.append(source)
        await source.start()
        if sync:
            assert await source.wait_synced(5), "the first read never landed"
        return source

    yield make
    for source in made:
        await source.stop()
    assert not [t for t in asyncio.all_tasks() if t.get_name().startswith("kubelet-pods-")]


def names(source: PodSource) -> set[str]:
    return {p.name for p in source.pods()}


def json_logs(caplog: pytest.LogCaptureFixture, event: str) -> list[dict[str, Any]]:
    fmt = JsonFormatter("test")
    return [e for e in (json.loads(fmt.format(r)) for r in caplog.records) if e["event"] == event]


async def test_pods_appear_change_and_go(
    fake: FakeApiServer, kubelet: FakeKubeletPods, make_source: Callable[..., Any]
) -> None:
    fake.add_pod("a", requests={NPU: 2})
    fake.add_pod("elsewhere", node="node-b")
    source = await make_source()
    changes: list[tuple[str, str]] = []
    source.on_change.append(lambda kind, pod: changes.append((kind, pod.name)))
    assert source.synced and names(source) == {"a"}
    first = source.get("default", "a")
    assert first is not None and first.requests == {NPU: 2} and source.by_uid(first.uid) is first

    fake.add_pod("b")
    await until(lambda: changes == [("ADDED", "b")], what="b added")
    fake.modify("pods", "a", "default", lambda o: o["metadata"]["annotations"].update({"huawei.com/kltDev": "0"}))
    await until(lambda: changes[1:] == [("MODIFIED", "a")], what="a modified")
    fake.remove("pods", "b", "default")
    await until(lambda: changes[2:] == [("DELETED", "b")], what="b deleted")
    updated = source.get("default", "a")
    assert updated is not None and updated.annotations["huawei.com/kltDev"] == "0"
    assert source.get("default", "b") is None and len(source) == 1
    polls = source.polls
    await until(lambda: source.polls >= polls + 3, what="three more polls")
    assert changes == [("ADDED", "b"), ("MODIFIED", "a"), ("DELETED", "b")], "an unchanged list says nothing"
    assert {r.token for r in kubelet.requests} == {TOKEN} and {r.path for r in kubelet.requests} == {"/pods"}
    assert fake.count(path_prefix="/api/v1/pods") == 0, "no pod list or watch on the API server"


async def test_same_changes_as_the_apiserver_watch(
    fake: FakeApiServer, api: ApiClient, make_source: Callable[..., Any]
) -> None:
    """Both sources side by side on the same writes: each consumer sees the same sequence."""
    fake.add_pod("a", requests={NPU: 1})
    watched = PodCache(api, NODE, watch_timeout_s=2)
    seen: dict[str, list[tuple[str, str, str]]] = {"watch": [], "kubelet": []}
    watched.on_change.append(lambda k, p: seen["watch"].append((k, p.name, p.phase)))
    await watched.start()
    try:
        polled = await make_source(sync=False)
        polled.on_change.append(lambda k, p: seen["kubelet"].append((k, p.name, p.phase)))
        assert await polled.wait_synced(5) and await watched.wait_synced(5)
        steps: list[Callable[[], object]] = [
            lambda: fake.add_pod("b", phase="Pending"),
            lambda: fake.modify("pods", "b", "default", lambda o: o["status"].update({"phase": "Running"})),
            lambda: fake.modify("pods", "a", "default", lambda o: o["status"].update({"phase": "Succeeded"})),
            lambda: fake.remove("pods", "a", "default"),
        ]
        for i, step in enumerate(steps):
            n = len(seen["watch"])
            step()

            def caught_up(n: int = n) -> bool:
                return len(seen["watch"]) > n and len(seen["kubelet"]) == len(seen["watch"])

            await until(caught_up, what=f"step {i} seen by both")
        assert seen["kubelet"] == seen["watch"]
        assert {p.uid: p for p in polled.pods()} == {p.uid: p for p in watched.pods()}
    finally:
        await watched.stop()


@pytest.mark.parametrize(
    ("refusal", "status", "why"),
    [("bad token", 401, "did not accept the token"), ("forbidden", 403, "nodes/proxy")],
)
async def test_refused_read_is_logged_retried_and_keeps_the_last_list(
    fake: FakeApiServer,
    kubelet: FakeKubeletPods,
    make_source: Callable[..., Any],
    token_file: Path,
    caplog: pytest.LogCaptureFixture,
    refusal: str,
    status: int,
    why: str,
) -> None:
    fake.add_pod("a")
    source = await make_source()
    changes: list[str] = []
    source.on_change.append(lambda kind, pod: changes.append(kind))
    caplog.set_level(logging.INFO, "ascend_common.adapters.kubelet.pods")
    if refusal == "bad token":
        await asyncio.to_thread(token_file.write_text, "rotated-but-unknown")
    else:
        kubelet.forbid()
    fake.remove("pods", "a", "default")  # what the kubelet would say if it answered
    await until(lambda: source.failures >= 3, what="three failed reads (retries)")
    lines = json_logs(caplog, "kubelet pod list failed; keeping the last good list, retrying")
    assert lines[0]["status"] == status and why in lines[0]["error"] and lines[0]["pods_kept"] == 1
    assert lines[0]["level"] == "warning"
    assert names(source) == {"a"} and changes == [], "a refusal is not a list of no pods"

    if refusal == "bad token":
        # The rotated token the kubelet knows: re-read without a restart.
        await asyncio.to_thread(token_file.write_text, TOKEN)
    else:
        kubelet.forbid(False)
    await until(lambda: changes == ["DELETED"], what="the deletion once the kubelet answers again")
    assert json_logs(caplog, "kubelet pod list read again")
    assert source.last_error is not None


async def test_dead_kubelet_is_retried_and_the_list_kept(
    fake: FakeApiServer, kubelet: FakeKubeletPods, make_source: Callable[..., Any], caplog: pytest.LogCaptureFixture
) -> None:
    fake.add_pod("a")
    fake.add_pod("b")
    source = await make_source()
    changes: list[tuple[str, str]] = []
    source.on_change.append(lambda kind, pod: changes.append((kind, pod.name)))
    caplog.set_level(logging.INFO, "ascend_common.adapters.kubelet.pods")
    kubelet.set_down(True)
    await until(lambda: source.failures >= 2, what="failed reads of a dead kubelet")
    (first, *_) = json_logs(caplog, "kubelet pod list failed; keeping the last good list, retrying")
    assert first["status"] is None and "ConnectError" in first["error"] and first["pods_kept"] == 2
    assert names(source) == {"a", "b"} and changes == []
    assert not await source.relist(timeout=0.5), "relist cannot succeed while the kubelet is dead"
    fake.remove("pods", "b", "default")
    kubelet.set_down(False)
    await until(lambda: changes == [("DELETED", "b")], what="b deleted after the kubelet came back")


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        (b"<html>not json", "not JSON"),
        (b'{"kind": "Status", "items": []}', "not a PodList"),
        (b'{"items": {"a": 1}}', "no items list"),
        (b"[1, 2]", "no items list"),
    ],
)
async def test_a_malformed_body_changes_nothing(
    fake: FakeApiServer,
    kubelet: FakeKubeletPods,
    make_source: Callable[..., Any],
    caplog: pytest.LogCaptureFixture,
    body: bytes,
    reason: str,
) -> None:
    fake.add_pod("a")
    source = await make_source()
    changes: list[str] = []
    source.on_change.append(lambda kind, pod: changes.append(kind))
    kubelet.respond_with(200, body)
    await until(lambda: source.failures >= 2, what="failed reads of a bad body")
    (line, *_) = json_logs(caplog, "kubelet pod list failed; keeping the last good list, retrying")
    assert reason in line["error"]
    assert names(source) == {"a"} and changes == []


async def test_a_body_over_the_cap_is_refused(
    fake: FakeApiServer, kubelet: FakeKubeletPods, token_file: Path, caplog: pytest.LogCaptureFixture
) -> None:
    fake.add_pod("a")
    fake.add_pod("b")
    small = len(json.dumps(kubelet.pod_list()))
    fake.remove("pods", "b", "default")
    src = source_of(kubelet, token_file, kubelet.cert.cert)
    source = KubeletPodSource(NODE, KubeletSource(**{**src.__dict__, "max_body_bytes": small - 1}))
    await source.start()
    try:
        assert await source.wait_synced(5)
        assert names(source) == {"a"}
        fake.add_pod("b")
        await until(lambda: source.failures >= 1, what="a refused read")
        (line, *_) = json_logs(caplog, "kubelet pod list failed; keeping the last good list, retrying")
        assert f"over the {small - 1}-byte cap" in line["error"]
        assert names(source) == {"a"}
    finally:
        await source.stop()


async def test_an_unknown_certificate_is_refused(
    fake: FakeApiServer, certs: tuple[Cert, Cert], make_source: Callable[..., Any], caplog: pytest.LogCaptureFixture
) -> None:
    fake.add_pod("a")
    source = await make_source(ca=certs[1].cert, sync=False)
    await until(lambda: source.failures >= 1, what="a TLS failure")
    assert not source.synced and source.pods() == []
    (line, *_) = json_logs(caplog, "kubelet pod list failed; keeping the last good list, retrying")
    assert "CERTIFICATE_VERIFY_FAILED" in line["error"]


async def test_insecure_mode_reads_and_says_so_loudly(
    fake: FakeApiServer, make_source: Callable[..., Any], caplog: pytest.LogCaptureFixture
) -> None:
    fake.add_pod("a")
    source = await make_source(ca=None)
    assert names(source) == {"a"}
    (warning,) = [r for r in caplog.records if "NOT verified" in r.getMessage()]
    assert warning.levelno == logging.WARNING


async def test_invalid_pods_are_skipped_and_the_rest_kept(
    kubelet: FakeKubeletPods, make_source: Callable[..., Any], caplog: pytest.LogCaptureFixture
) -> None:
    good = {"metadata": {"name": "ok", "namespace": "default", "uid": "u1", "resourceVersion": "5"},
            "spec": {"nodeName": NODE}, "status": {"phase": "Running"}}  # fmt: skip
    static = {"metadata": {"name": "etcd-node-a", "namespace": "kube-system", "uid": "hash1"},
              "spec": {"nodeName": NODE}, "status": {}}  # fmt: skip
    bad = {"metadata": {"name": "Bad_Name", "namespace": "default", "uid": "u2"}}
    kubelet.set_pods([good, static, bad])
    source = await make_source()
    assert names(source) == {"ok", "etcd-node-a"}
    (line,) = json_logs(caplog, "invalid pod skipped")
    assert line["pod"] == "Bad_Name"


async def test_relist_reads_at_once(
    fake: FakeApiServer, kubelet: FakeKubeletPods, token_file: Path, make_source: Callable[..., Any]
) -> None:
    source = KubeletPodSource(NODE, source_of(kubelet, token_file, kubelet.cert.cert, period=300))
    await source.start()
    try:
        assert await source.wait_synced(5) and names(source) == set()
        fake.add_pod("late")
        assert await source.relist(timeout=5)
        assert names(source) == {"late"}
    finally:
        await source.stop()


def test_parse_pod_list_keeps_this_nodes_pods_up_to_the_cap() -> None:
    def item(name: str, node: str) -> dict[str, Any]:
        return {"metadata": {"name": name, "namespace": "ns", "uid": name}, "spec": {"nodeName": node}}

    body = json.dumps({"kind": "PodList", "items": [item("a", NODE), item("b", "node-b"), item("c", NODE)]})
    parsed = parse_pod_list(body.encode(), NODE, max_pods=1)
    assert list(parsed.pods) == ["a"] and parsed.other_node == 1 and parsed.over_cap == 1


def test_settings_resolve_the_references_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("HOST_IP", "10.0.0.7")
    monkeypatch.setenv("KUBELET_PORT", "10255")
    s = PodSourceSettings(pod_source="kubelet", kubelet_ca=tmp_path / "ca.crt")
    k = s.kubelet_source()
    assert k is not None and k.url == "https://10.0.0.7:10255/pods" and k.ca_file == tmp_path / "ca.crt"
    monkeypatch.delenv("KUBELET_PORT")
    s = PodSourceSettings(pod_source="kubelet", kubelet_host="fd00::1", kubelet_ca=tmp_path / "ca.crt")
    assert s.kubelet_source() is not None and s.kubelet_source().url == "https://[fd00::1]:10250/pods"  # type: ignore[union-attr]
    assert PodSourceSettings().kubelet_source() is None


@pytest.mark.parametrize(
    ("env", "kw", "message"),
    [
        ({}, {"kubelet_ca": "/ca"}, "is not an IP address"),
        ({"HOST_IP": "node-a.example"}, {"kubelet_ca": "/ca"}, "is not an IP address"),
        ({"HOST_IP": "10.0.0.7", "KUBELET_PORT": "http"}, {"kubelet_ca": "/ca"}, "is not a port"),
        ({"HOST_IP": "10.0.0.7"}, {}, "needs --kubelet-ca"),
    ],
)
def test_settings_refuse_an_unusable_kubelet(
    monkeypatch: pytest.MonkeyPatch, env: dict[str, str], kw: dict[str, Any], message: str
) -> None:
    monkeypatch.delenv("HOST_IP", raising=False)
    monkeypatch.delenv("KUBELET_PORT", raising=False)
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    with pytest.raises(ValueError, match=message):
        PodSourceSettings(pod_source="kubelet", **kw)


async def test_build_pod_source_picks_by_setting(api: ApiClient, tmp_path: Path) -> None:
    assert isinstance(build_pod_source(api, NODE, None), PodCache)
    k = KubeletSource("127.0.0.1", 1, tmp_path / "t", tmp_path / "ca")
    assert isinstance(build_pod_source(api, NODE, k), KubeletPodSource)
