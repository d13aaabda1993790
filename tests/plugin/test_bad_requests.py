"""Bad requests on the device-plugin's ops port, from a raw socket (issue 22), as on the exporter's
(tests/exporter/test_bad_requests.py). The plugin serves no HTTP API of its own (its kubelet
sockets are gRPC), so there is no Unix-socket upload to refuse."""

from __future__ import annotations

from tests.plugin.conftest import Node
from tests.support.misbehaving import assert_ops_port_holds


async def test_the_ops_port_holds_against_bad_requests(node: Node) -> None:
    await assert_ops_port_holds(node.plugin.ops_url, node.plugin.log_path)
