"""The resource.k8s.io calls of the DRA driver, through the official client's ApiClient.

The client (37.x) has generated ResourceV1Api / ResourceV1beta1Api classes, but they validate
every answer into models and pin one version; the driver must use whichever version the
apiserver serves (v1 from Kubernetes 1.34, v1beta1 on 1.32/1.33), so it asks the group's
discovery document once and sends raw JSON on the group's paths through the same `CoreV1.request`
every other verb of the node uses (the client's param_serialize + call_api, as its own dynamic
client does). Errors are adapters.kube.client's typed ones; transient ones are retried there.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from ascend_common.adapters.kube.client import (
    ApiClient,
    KubeApiError,
    KubeNotFound,
    core_v1,
    json_of,
    retrying,
    status_of,
)

from ascend_device_plugin.dra.driver import ClaimLookupError
from ascend_device_plugin.dra.slice_devices import API_VERSIONS, RESOURCE_GROUP

TIMEOUT_S = 10.0


class NoResourceApi(KubeApiError):
    """The apiserver serves no version of resource.k8s.io the driver speaks (Kubernetes < 1.32, or the API off)."""


class SliceConflict(Exception):
    """409: the slice changed (or appeared) since it was read; the caller reads it again."""


class ResourceApi:
    """Claims (read) and this node's ResourceSlice (read, create, replace)."""

    def __init__(self, api: Callable[[], ApiClient | None]) -> None:
        self._api = api
        self._version: str | None = None

    def _v1(self) -> Any:
        api = self._api()
        if api is None:
            raise KubeApiError("resource.k8s.io", None, "no cluster connection (kube offline, or not started yet)")
        return core_v1(api)

    async def version(self) -> str:
        """The newest version of the group the apiserver serves that the driver speaks (cached)."""
        if self._version is not None:
            return self._version

        async def discover() -> Any:
            return await json_of(await self._v1().request("GET", f"/apis/{RESOURCE_GROUP}", timeout=TIMEOUT_S))

        try:
            doc = await retrying(discover, f"discover {RESOURCE_GROUP}")
        except KubeNotFound as exc:
            raise NoResourceApi(RESOURCE_GROUP, 404, "the apiserver serves no resource.k8s.io API") from exc
        served = {v.get("version") for v in (doc or {}).get("versions") or [] if isinstance(v, Mapping)}
        for version in API_VERSIONS:
            if version in served:
                self._version = version
                return version
        raise NoResourceApi(
            RESOURCE_GROUP, None, f"the apiserver serves {sorted(v for v in served if v)}, none of {list(API_VERSIONS)}"
        )

    async def _path(self, rest: str) -> str:
        return f"/apis/{RESOURCE_GROUP}/{await self.version()}/{rest}"

    # ---- claims (driver.ClaimReader) ---------------------------------------------------------

    async def read_claim(self, namespace: str, name: str) -> Mapping[str, Any]:
        try:
            path = await self._path(f"namespaces/{namespace}/resourceclaims/{name}")

            async def read() -> Any:
                return await json_of(await self._v1().request("GET", path, timeout=TIMEOUT_S))

            claim = await retrying(read, f"read resourceclaim {namespace}/{name}")
        except KubeNotFound as exc:
            raise ClaimLookupError("not found") from exc
        except KubeApiError as exc:
            raise ClaimLookupError(str(exc)) from exc
        if not isinstance(claim, Mapping):
            raise ClaimLookupError("the apiserver answered no object")
        return claim

    # ---- slices ------------------------------------------------------------------------------

    async def read_slice(self, name: str) -> Mapping[str, Any] | None:
        path = await self._path(f"resourceslices/{name}")

        async def read() -> Any:
            return await json_of(await self._v1().request("GET", path, timeout=TIMEOUT_S))

        try:
            found = await retrying(read, f"read resourceslice {name}")
        except KubeNotFound:
            return None
        return found if isinstance(found, Mapping) else None

    async def write_slice(
        self, body: Mapping[str, Any], resource_version: str | None, *, dry_run: bool = False
    ) -> Mapping[str, Any]:
        """Create the slice (`resource_version` None) or replace the one read at that version;
        SliceConflict on a 409 (it exists already, or changed since) or a replace's 404 (deleted since).
        The answer is the slice as stored; `dry_run`: as it would be, nothing stored (a create's
        body may have a generateName instead of a name)."""
        name = body["metadata"].get("name") or body["metadata"]["generateName"]
        collection = await self._path("resourceslices")
        if resource_version is not None:
            body = {**body, "metadata": {**body["metadata"], "resourceVersion": resource_version}}

        query = {"dryRun": "All"} if dry_run else None

        async def write() -> Any:
            try:
                if resource_version is None:
                    resp = await self._v1().request("POST", collection, query=query, body=body, timeout=TIMEOUT_S)
                else:
                    resp = await self._v1().request(
                        "PUT", f"{collection}/{name}", query=query, body=body, timeout=TIMEOUT_S
                    )
                return await json_of(resp)
            except Exception as exc:
                if status_of(exc) == 409:
                    raise SliceConflict(f"resourceslice {name} changed since it was read") from exc
                if status_of(exc) == 404 and resource_version is not None:
                    # Deleted since it was read (the kubelet wipes a node's slices): read again, create.
                    raise SliceConflict(f"resourceslice {name} was deleted since it was read") from exc
                raise

        written = await retrying(write, f"write resourceslice {name}", passthrough=(SliceConflict,))
        return written if isinstance(written, Mapping) else {}
