"""A node stack at rest asks the API server (almost) nothing: no periodic reads, watches that last
minutes (issue 34: <= 1 request a minute per node with --pod-source apiserver)."""

from __future__ import annotations

import asyncio
import time

from tests.e2e.stack import DEVICE_INFO, NODE, node_stack
from tests.support.fake_apiserver import FakeApiServer

WINDOW_S = 20.0
REFRESH_S = 300.0  # the device-info ConfigMap's refresh rewrite (--refresh-period), the one periodic write
POLICY = "mindx-dl-fault-config"


async def quiet(api: FakeApiServer, still_s: float = 3.0, within_s: float = 30.0) -> None:
    """Until no request has come for `still_s` (the start's writes are done)."""
    deadline = time.monotonic() + within_s
    seen, since = len(api.requests), time.monotonic()
    while time.monotonic() < deadline:
        await asyncio.sleep(0.2)
        if len(api.requests) != seen:
            seen, since = len(api.requests), time.monotonic()
        elif time.monotonic() - since >= still_s:
            return
    raise AssertionError(f"the stack never went quiet: {api.verb_counts(since=seen - 20)}")


async def test_a_node_at_rest_makes_no_periodic_requests() -> None:
    async with node_stack() as s:
        await quiet(s.api)
        start = s.api.verb_counts()
        mark = len(s.api.requests)
        await asyncio.sleep(WINDOW_S)
        window = s.api.verb_counts(since=mark)
        print(f"start: {start}; at rest, {WINDOW_S:.0f} s: {window}")  # the figure docs/operations.md quotes
        # Pods (both services), the device-info and the policy ConfigMaps, the Node: five watches, open.
        assert s.api.live_watches == 5, s.api.live_watches
        watches = [r for r in s.api.requests if r.verb == "WATCH"]
        assert len(watches) == 5, [(r.path, r.query) for r in watches]
        for r in watches:
            assert 300 <= int(r.query["timeoutSeconds"]) <= 600 and r.query["allowWatchBookmarks"] == "true", r.query
        # Nothing in the window: no GET every few seconds, no watch ended and opened again.
        assert window == {}, f"at rest: {window} in {WINDOW_S} s (after the start's {start})"
        # What the RBAC comments promise: ConfigMaps and the Node are listed and watched by name only.
        named = {
            (r.path, r.query.get("fieldSelector"))
            for r in s.api.requests
            if r.verb in ("LIST", "WATCH") and "/pods" not in r.path
        }
        cms = "/api/v1/namespaces/kube-system/configmaps"
        assert named == {
            (cms, f"metadata.name={DEVICE_INFO}"),
            (cms, f"metadata.name={POLICY}"),
            ("/api/v1/nodes", f"metadata.name={NODE}"),
        }
        # Over time: each watch is opened again once per its timeout (5-10 min), and the ConfigMap is
        # rewritten once per refresh period: at most 5 / 5 min + 1 / 5 min = 1.2 a minute, 0.89 on average.
        worst = sum(60.0 / int(r.query["timeoutSeconds"]) for r in watches) + 60.0 / REFRESH_S
        assert worst <= 1.2, worst
