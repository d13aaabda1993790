"""Bad requests on the exporter's ops port and its Unix-socket API, from a raw socket (issue 22).

The ops port: a Content-Length of 5,000 digits gets a 4xx (or a close) and no traceback; a body
that never arrives, or trickles, is cut within the request deadline; with 300 half-open connections
/readyz still answers within 1 s. The API: an unauthenticated 300 MB POST to a mutating route is
answered before its body is read, and the exporter's resident memory barely moves."""

from __future__ import annotations

from tests.support.exporter import ExporterProc
from tests.support.misbehaving import (
    assert_ops_port_holds,
    tracebacks,
    unauthenticated_upload,
)

MB = 1 << 20


async def test_the_ops_port_holds_against_bad_requests(exporter: ExporterProc) -> None:
    await assert_ops_port_holds(exporter.metrics_url, exporter.log_path)


async def test_an_unauthenticated_300_mb_post_is_refused_before_it_is_read(exporter: ExporterProc) -> None:
    pid = exporter.proc.pid
    declared = await unauthenticated_upload(exporter.socket, "POST", "/v1/sim/chips/0/faults", pid)
    assert declared.status in (401, 413), declared
    assert declared.rss_growth < 10 * MB, declared
    chunked = await unauthenticated_upload(exporter.socket, "POST", "/v1/sim/chips/0/faults", pid, chunked=True)
    assert chunked.status == 401, chunked  # no Content-Length to refuse by: the token is checked first
    assert chunked.rss_growth < 10 * MB, chunked
    assert not tracebacks(exporter.log_path)
