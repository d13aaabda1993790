"""ExporterClient.put_containers: the body the device plugin sends. Without a held vNPU it has no
`vnpus` key, so an exporter of the release before (which refuses an unknown key with a 422) still
takes the chips' holders during a rolling upgrade; with one, the vNPUs by vdev id."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
from ascend_common.adapters.clients.exporter import ExporterClient
from ascend_common.schemas.exporter import ChipHolders, ContainerHolder, ContainerMapping, VnpuHolders

HOLDER = ContainerHolder(namespace="ns", pod="p", container="c")


async def sent_body(mapping: ContainerMapping) -> object:
    bodies: list[object] = []

    def answer(request: httpx.Request) -> httpx.Response:
        bodies.append(json.loads(request.content))
        return httpx.Response(204)

    client = ExporterClient(Path("/nonexistent.sock"), token="t" * 16)
    client._http = httpx.AsyncClient(transport=httpx.MockTransport(answer), base_url="http://exporter")
    try:
        await client.put_containers(mapping)
    finally:
        await client.close()
    [body] = bodies
    return body


async def test_no_vnpus_key_when_no_vnpu_is_held() -> None:
    body = await sent_body(ContainerMapping(chips=[ChipHolders(phy_id=3, containers=[HOLDER])]))
    assert body == {"chips": [{"phy_id": 3, "containers": [{"namespace": "ns", "pod": "p", "container": "c"}]}]}


async def test_the_held_vnpus_by_vdev_id() -> None:
    mapping = ContainerMapping(chips=[], vnpus=[VnpuHolders(vdev_id=100, containers=[HOLDER])])
    body = await sent_body(mapping)
    assert body == {
        "chips": [],
        "vnpus": [{"vdev_id": 100, "containers": [{"namespace": "ns", "pod": "p", "container": "c"}]}],
    }
