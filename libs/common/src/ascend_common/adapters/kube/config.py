"""Where the apiserver is, and an ApiClient for it: the one rule of the plugin and the fault-manager,
the one kubectl users know.

In order: an explicit URL (tests, a local proxy) > `--kubeconfig` > `KUBECONFIG` (a list of files,
separated as PATH is, merged as kubectl merges it) > the pod's service account (in-cluster) >
`~/.kube/config`. The first source that is configured is used; when none is, the error names
every source looked at.

kubectl's merge (client-go clientcmd `LoadingRules.Load`): files in order, a missing file skipped;
for clusters, users and contexts, the first file that names one wins it; the first file that sets
`current-context` wins it. A relative file path in a file (certificate-authority, client-certificate,
client-key, tokenFile) is relative to that file's folder.

The client's own loader (kubernetes.aio.config) merges a KUBECONFIG list too, but lets the last file
that sets `current-context` win it, and reads KUBECONFIG once, when it is imported. So the files are
merged here, by kubectl's rule, and the merged kubeconfig goes to its `load_kube_config_from_dict`,
which does the rest (TLS files and data, tokens, exec plugins) as the client's authors do.
"""

from __future__ import annotations

import copy
import ipaddress
import logging
import os
import ssl
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import yaml
from kubernetes.aio import client as k8s
from kubernetes.aio.config import ConfigException, load_incluster_config, load_kube_config_from_dict

from ascend_common.adapters.kube.client import ApiClient

__all__ = [
    "KubeConfigError",
    "KubeSource",
    "build_api_client",
    "choose_source",
    "merge_kubeconfigs",
    "read_kubeconfigs",
]

log = logging.getLogger(__name__)

_NAMED = ("clusters", "users", "contexts")
# Fields of a cluster / user that name a file, resolved against the folder of the file they come from.
_PATH_FIELDS = {
    "clusters": ("certificate-authority",),
    "users": ("client-certificate", "client-key", "tokenFile"),
}


@dataclass(frozen=True)
class KubeSource:
    """The chosen source: `kind` is url, kubeconfig, KUBECONFIG, in-cluster or home; `detail` says which."""

    kind: str
    detail: str
    files: tuple[Path, ...] = ()


def choose_source(
    *,
    url: str | None,
    kubeconfig: str | Path | None,
    environ: Mapping[str, str],
    home: Path,
) -> KubeSource | None:
    """The first configured source in the order above, or None (see `not_configured`)."""
    if url:
        return KubeSource("url", url)
    if kubeconfig is not None:
        return KubeSource("kubeconfig", f"--kubeconfig {kubeconfig}", (Path(kubeconfig),))
    listed = [Path(os.path.expanduser(p)) for p in environ.get("KUBECONFIG", "").split(os.pathsep) if p]
    if listed:
        return KubeSource("KUBECONFIG", f"KUBECONFIG={environ['KUBECONFIG']}", tuple(listed))
    if environ.get("KUBERNETES_SERVICE_HOST"):
        return KubeSource("in-cluster", "the pod's service account")
    default = home / ".kube" / "config"
    if default.is_file():
        return KubeSource("home", str(default), (default,))
    return None


def not_configured(home: Path) -> str:
    return (
        "no apiserver configured: looked at an explicit URL, --kubeconfig, KUBECONFIG, the pod's service "
        f"account (KUBERNETES_SERVICE_HOST) and {home / '.kube' / 'config'}; none is set"
    )


def merge_kubeconfigs(documents: Sequence[tuple[Path, Mapping[str, Any]]]) -> dict[str, Any]:
    """kubectl's merge of parsed kubeconfig files (in KUBECONFIG order), as one kubeconfig."""
    merged: dict[str, Any] = {"apiVersion": "v1", "kind": "Config", "clusters": [], "users": [], "contexts": []}
    seen: dict[str, set[str]] = {item: set() for item in _NAMED}
    for path, doc in documents:
        for item in _NAMED:
            for entry in doc.get(item) or []:
                if not isinstance(entry, Mapping) or not isinstance(entry.get("name"), str):
                    raise ValueError(f"{path}: every entry of {item} needs a name")
                if entry["name"] in seen[item]:
                    continue
                seen[item].add(entry["name"])
                merged[item].append(_absolute(item, copy.deepcopy(dict(entry)), path.parent))
        if doc.get("current-context") and "current-context" not in merged:
            merged["current-context"] = doc["current-context"]
    return merged


def _absolute(item: str, entry: dict[str, Any], folder: Path) -> dict[str, Any]:
    body = entry.get(item[:-1])  # cluster / user / context
    if isinstance(body, dict):
        for key in _PATH_FIELDS.get(item, ()):
            value = body.get(key)
            if isinstance(value, str) and value and not os.path.isabs(value):
                body[key] = str(folder / value)
    return entry


def read_kubeconfigs(files: Sequence[Path], *, skip_missing: bool) -> list[tuple[Path, Mapping[str, Any]]]:
    """The files parsed, in order; a missing one skipped (KUBECONFIG) or an error (--kubeconfig)."""
    documents: list[tuple[Path, Mapping[str, Any]]] = []
    for path in files:
        try:
            text = path.read_text()
        except FileNotFoundError:
            if skip_missing:
                continue
            raise ValueError(f"{path}: no such file") from None
        except OSError as exc:
            raise ValueError(f"{path}: {exc.strerror}") from None
        try:
            doc = yaml.safe_load(text)
        except yaml.YAMLError as exc:
            raise ValueError(f"{path}: not YAML: {exc}") from None
        if doc is None:
            continue  # kubectl takes an empty file for an empty config
        if not isinstance(doc, Mapping):
            raise ValueError(f"{path}: a kubeconfig is a mapping")
        documents.append((path, doc))
    if not documents:
        raise ValueError(f"none of {', '.join(map(str, files))} holds a kubeconfig")
    return documents


class KubeConfigError(Exception):
    """No usable apiserver configuration (none of the sources above)."""


async def build_api_client(
    url: str | None = None,
    kubeconfig: str | Path | None = None,
    *,
    context: str | None = None,
    token: str | None = None,
    environ: Mapping[str, str] | None = None,
    home: Path | None = None,
) -> ApiClient:
    """An ApiClient (kubernetes.aio) from the first configured source: an explicit URL, `--kubeconfig`,
    KUBECONFIG (merged as kubectl merges it), the pod's service account, ~/.kube/config.
    The source is logged; with none, KubeConfigError names every source looked at. The caller
    closes it (`await api.close()`): it holds an aiohttp session once it has sent a request."""
    environ = os.environ if environ is None else environ
    home = Path.home() if home is None else home
    source = choose_source(url=url, kubeconfig=kubeconfig, environ=environ, home=home)
    if source is None:
        raise KubeConfigError(not_configured(home))
    cfg = k8s.Configuration()
    try:
        if url:
            cfg.host = url.rstrip("/")
            if token:
                cfg.api_key = {"BearerToken": token}
                cfg.api_key_prefix = {"BearerToken": "Bearer"}
            if _is_loopback(url):
                # The client's aiohttp session picks HTTP(S)_PROXY from the environment (trust_env);
                # a local apiserver is never behind one.
                cfg.client_session_kwargs = {"trust_env": False}
        elif source.kind == "in-cluster":
            load_incluster_config(client_configuration=cfg)  # type: ignore[no-untyped-call]
        else:
            documents = read_kubeconfigs(source.files, skip_missing=source.kind == "KUBECONFIG")
            await load_kube_config_from_dict(  # type: ignore[no-untyped-call]
                merge_kubeconfigs(documents), context=context, client_configuration=cfg
            )
    except (ConfigException, ValueError) as exc:
        raise KubeConfigError(f"cannot load the Kubernetes configuration ({source.detail}): {exc}") from exc
    try:
        api = k8s.ApiClient(cfg)  # loads the TLS files it names now (ssl.create_default_context)
    except (OSError, ssl.SSLError) as exc:
        files = ", ".join(str(f) for f in (cfg.ssl_ca_cert, cfg.cert_file, cfg.key_file) if f)
        raise KubeConfigError(f"cannot load the TLS files of {source.detail} ({files}): {exc}") from exc
    log.info("apiserver configuration", extra={"source": source.kind, "from": source.detail, "server": cfg.host})
    return api


def _is_loopback(url: str) -> bool:
    host = urlsplit(url).hostname or ""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False
