"""Where the apiserver is: the source order, kubectl's KUBECONFIG merge, and the error naming every source."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import certifi
import pytest
import yaml
from ascend_common.adapters.kube.config import KubeConfigError, build_api_client, choose_source, merge_kubeconfigs


def kubeconfig(path: Path, server: str, *, name: str, current: str | None, ca: str | None = None) -> Path:
    cluster: dict[str, Any] = {"server": server}
    if ca is not None:
        cluster["certificate-authority"] = ca
    doc: dict[str, Any] = {
        "apiVersion": "v1", "kind": "Config",
        "clusters": [{"name": name, "cluster": cluster}],
        "users": [{"name": name, "user": {"token": f"token-{name}"}}],
        "contexts": [{"name": name, "context": {"cluster": name, "user": name}}],
    }  # fmt: skip
    if current is not None:
        doc["current-context"] = current
    path.write_text(yaml.safe_dump(doc))
    return path


def ca_bundle() -> str:
    return Path(certifi.where()).read_text()


@pytest.mark.parametrize(
    ("url", "flag", "environ", "home_file", "kind"),
    [
        ("http://127.0.0.1:1", "f", {"KUBECONFIG": "k", "KUBERNETES_SERVICE_HOST": "h"}, True, "url"),
        (None, "f", {"KUBECONFIG": "k", "KUBERNETES_SERVICE_HOST": "h"}, True, "kubeconfig"),
        (None, None, {"KUBECONFIG": "k", "KUBERNETES_SERVICE_HOST": "h"}, True, "KUBECONFIG"),
        (None, None, {"KUBECONFIG": "", "KUBERNETES_SERVICE_HOST": "h"}, True, "in-cluster"),
        (None, None, {}, True, "home"),
        (None, None, {}, False, None),
    ],
)
def test_the_first_configured_source_wins(
    tmp_path: Path, url: str | None, flag: str | None, environ: dict[str, str], home_file: bool, kind: str | None
) -> None:
    if home_file:
        (tmp_path / ".kube").mkdir()
        (tmp_path / ".kube" / "config").write_text("{}")
    source = choose_source(url=url, kubeconfig=flag, environ=environ, home=tmp_path)
    assert (source.kind if source else None) == kind


async def test_kubeconfig_alone_reaches_the_server_it_names(tmp_path: Path) -> None:
    path = kubeconfig(tmp_path / "a", "https://10.0.0.1:6443", name="a", current="a")
    client: Any = await build_api_client(environ={"KUBECONFIG": str(path)}, home=tmp_path)
    assert client.configuration.host == "https://10.0.0.1:6443"
    await client.close()


async def test_two_files_merge_as_kubectl_merges_them(tmp_path: Path) -> None:
    """The first file to name a cluster wins it, and the first to set current-context wins that (the
    Python client's own merger lets a later file's current-context win); a missing file is skipped; a
    relative certificate path is relative to its own file."""
    (tmp_path / "one").mkdir()
    first = kubeconfig(tmp_path / "one" / "config", "https://first:6443", name="a", current="a", ca="ca.crt")
    second_doc = yaml.safe_load(kubeconfig(tmp_path / "b", "https://second:6443", name="b", current="b").read_text())
    second_doc["clusters"].append({"name": "a", "cluster": {"server": "https://shadowed:6443"}})
    second = tmp_path / "b"
    second.write_text(yaml.safe_dump(second_doc))
    listed = os.pathsep.join([str(tmp_path / "missing"), str(first), str(second)])
    merged = merge_kubeconfigs([(first, yaml.safe_load(first.read_text())), (second, second_doc)])
    assert merged["current-context"] == "a"
    assert [(c["name"], c["cluster"]["server"]) for c in merged["clusters"]] == [
        ("a", "https://first:6443"), ("b", "https://second:6443"),
    ]  # fmt: skip
    assert merged["clusters"][0]["cluster"]["certificate-authority"] == str(tmp_path / "one" / "ca.crt")
    # The client loads the CA when it is built (the server is not contacted): any valid bundle will do.
    (tmp_path / "one" / "ca.crt").write_text(ca_bundle())
    client: Any = await build_api_client(environ={"KUBECONFIG": listed}, home=tmp_path)
    assert client.configuration.host == "https://first:6443"
    await client.close()
    reversed_: Any = await build_api_client(
        environ={"KUBECONFIG": os.pathsep.join([str(second), str(first)])}, home=tmp_path
    )
    assert reversed_.configuration.host == "https://second:6443"
    await reversed_.close()


async def test_a_certificate_file_that_holds_none_is_a_clear_error(tmp_path: Path) -> None:
    path = kubeconfig(tmp_path / "a", "https://10.0.0.1:6443", name="a", current="a", ca="ca.crt")
    (tmp_path / "ca.crt").write_text("not a certificate")
    with pytest.raises(KubeConfigError, match=r"ca\.crt"):
        await build_api_client(kubeconfig=path, environ={}, home=tmp_path)


async def test_nothing_configured_names_every_source(tmp_path: Path) -> None:
    with pytest.raises(KubeConfigError) as caught:
        await build_api_client(environ={}, home=tmp_path)
    message = str(caught.value)
    for source in ("URL", "--kubeconfig", "KUBECONFIG", "KUBERNETES_SERVICE_HOST", str(tmp_path / ".kube" / "config")):
        assert source in message


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("clusters: [{cluster: {server: x}}]", "needs a name"),
        ("- a list", "a kubeconfig is a mapping"),
        ("clusters: [", "not YAML"),
    ],
)
async def test_a_bad_kubeconfig_is_a_clear_error(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "bad"
    path.write_text(text)
    with pytest.raises(KubeConfigError, match=message):
        await build_api_client(kubeconfig=path, environ={}, home=tmp_path)


async def test_a_kubeconfig_list_of_missing_files_is_an_error_naming_them(tmp_path: Path) -> None:
    with pytest.raises(KubeConfigError, match="none of"):
        await build_api_client(environ={"KUBECONFIG": str(tmp_path / "gone")}, home=tmp_path)
