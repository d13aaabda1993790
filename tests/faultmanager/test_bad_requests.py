"""Bad requests on the fault-manager's ops port and its Unix-socket API, from a raw socket (issue 22).

The ops port as the exporter's (tests/exporter/test_bad_requests.py). The API has no tokens (its
socket's mode says who may call): a 300 MB body to a mutating route is answered 413 by its declared
length, before a byte of it is read, and the fault-manager's resident memory barely moves."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tests.support.exporter import start_exporter
from tests.support.faultmanager import FaultManagerProc, start_fault_manager, wait_ready
from tests.support.misbehaving import assert_ops_port_holds, tracebacks, unauthenticated_upload

MB = 1 << 20


@pytest.fixture
async def fm(tmp_path: Path) -> AsyncIterator[FaultManagerProc]:
    exporter = start_exporter(tmp_path / "exporter")
    fm = start_fault_manager(tmp_path / "fm", exporter)
    try:
        await wait_ready(fm)
        yield fm
    finally:
        assert fm.stop() == 0, fm.log_path.read_text()[-2000:]
        exporter.stop()


async def test_the_ops_port_holds_against_bad_requests(fm: FaultManagerProc) -> None:
    await assert_ops_port_holds(fm.ops_url, fm.log_path)


async def test_a_300_mb_body_to_a_mutating_route_is_refused_before_it_is_read(fm: FaultManagerProc) -> None:
    pid = fm.proc.pid
    for method, path in (("POST", "/v1/chips/Ascend910-0/separation"), ("PUT", "/v1/policy")):
        upload = await unauthenticated_upload(fm.socket, method, path, pid)
        assert upload.status == 413, (path, upload)
        assert upload.rss_growth < 10 * MB, (path, upload)
    async with fm.client() as client:  # nothing was separated
        verdicts = (await client.get("/v1/verdicts")).json()["verdicts"]
    assert not any(v["manually_separated"] for v in verdicts)
    assert not tracebacks(fm.log_path)
