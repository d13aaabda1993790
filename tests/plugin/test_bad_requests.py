"""Bad requests on the device-plugin's ops port, from a raw socket (issue 22), as on the exporter's
(tests/exporter/test_bad_requests.py). The plugin serves no HTTP API of its own (its kubelet
sockets are gRPC), so there is no Unix-socket upload to refuse."""

from __future__ import annotations

from tests.plugin.conftest import Node
from tests.support.misbehaving import CLOSE_BOUND_S, misbehave_on_ops_port, tracebacks


async def test_the_ops_port_holds_against_bad_requests(node: Node) -> None:
    report = await misbehave_on_ops_port(node.plugin.ops_url)
    assert report.huge_length_status is None or 400 <= report.huge_length_status < 500, report
    assert report.readyz_status == 200 and report.readyz_s < 1.0, report
    assert report.never_status == 200 and report.never_closed_s < CLOSE_BOUND_S, report
    assert report.trickle_closed_s < CLOSE_BOUND_S, report
    assert report.half_open_closed_s < CLOSE_BOUND_S, report
    assert not tracebacks(node.plugin.log_path)
