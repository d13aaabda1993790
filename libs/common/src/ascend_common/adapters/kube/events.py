"""Kubernetes Events, by verb: the body of a core/v1 Event about a Node, and the sinks that deliver
one (the API server through the kube client, or a file in offline mode).

Which Events a service sends, and how often, is the service's own policy: the fault-manager's
(per-chip rate limits, summaries) is in `fault_manager.events`.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections import deque
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol

from ascend_common.adapters.kube.client import ApiClient, core_v1, json_of, retrying

MAX_MESSAGE = 1024  # the apiserver refuses a longer note on an Event that carries eventTime


class EventSink(Protocol):
    async def emit(self, event: dict[str, Any]) -> None:
        """Deliver one core/v1 Event body (without namespace or name); raise when it was not delivered."""


def _rfc3339(ts: float) -> str:
    return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def micro_time(ts: float) -> str:
    """A MicroTime as the apiserver reads it: six digits of fraction always, "Z" for UTC."""
    return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def event_body(
    node: str,
    reason: str,
    message: str,
    type_: str,
    *,
    component: str,
    first: float,
    last: float | None = None,
    count: int = 1,
    node_uid: str | None = None,
) -> dict[str, Any]:
    """A core/v1 Event about a Node, reported by `component` (its source and reportingComponent).

    A Node is cluster-scoped, and the apiserver accepts such an Event outside "default" only if
    it carries eventTime with reportingComponent, reportingInstance and action, so those are
    always set. Without the Node's uid we use its name, as the kubelet does: `kubectl describe
    node` searches for both.
    """
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"generateName": f"{node}.npu-"},
        "involvedObject": {"apiVersion": "v1", "kind": "Node", "name": node, "uid": node_uid or node},
        "reason": reason,
        "message": message[:MAX_MESSAGE],
        "type": type_,
        "source": {"component": component, "host": node},
        "firstTimestamp": _rfc3339(first),
        "lastTimestamp": _rfc3339(first if last is None else last),
        "count": count,
        "eventTime": micro_time(first if last is None else last),
        "reportingComponent": component,
        "reportingInstance": f"{component}-{node}"[:128],
        "action": reason,
    }


class ApiEventSink:
    """Creates Events through the API server, with the retry policy of the libs/common kube helpers.

    429, 5xx, 409 (a generateName collision), timeouts and transport errors are retried with
    jittered backoff; any other refusal (403, 422, ...) raises at once.
    """

    def __init__(
        self,
        api: ApiClient,
        namespace: str = "kube-system",
        *,
        timeout: float = 10.0,
        retries: int = 3,
        base_delay: float = 0.2,
        max_delay: float = 5.0,
    ) -> None:
        self.namespace = namespace
        self._v1 = core_v1(api)
        self._timeout = timeout
        self._retries = retries
        self._base_delay = base_delay
        self._max_delay = max_delay

    async def emit(self, event: dict[str, Any]) -> None:
        body = {**event, "metadata": {**(event.get("metadata") or {}), "namespace": self.namespace}}

        async def create() -> Any:
            # The bytes must go out as written: the body is a dict of JSON values, which the
            # ApiClient passes through as it is. A typed CoreV1Event would turn eventTime (a
            # MicroTime, ".000000Z") into a datetime whose isoformat() drops a zero fraction
            # ("+00:00"), and the apiserver refuses such an Event (400).
            return await json_of(await self._v1.create_namespaced_event(self.namespace, body, timeout=self._timeout))

        await retrying(
            create, f"create event in {self.namespace}", self._retries, self._base_delay, max_delay=self._max_delay
        )


class OfflineEventSink:
    """Offline mode: Events appended as JSON lines to `<root>/events.jsonl`, the last `keep` in memory.

    A line is appended on the event loop, without a thread: it is a few hundred bytes to a local
    file, at the pace the per-chip buckets allow, cheaper than a thread hop, and the lines stay
    in the order they were emitted without a lock.
    """

    def __init__(self, root: Path, *, keep: int = 200, max_bytes: int = 8 * 1024 * 1024) -> None:
        self.path = root / "events.jsonl"
        self._recent: deque[dict[str, Any]] = deque(maxlen=keep)
        self._max_bytes = max_bytes

    async def emit(self, event: dict[str, Any]) -> None:
        line = json.dumps(event, separators=(",", ":"), sort_keys=True) + "\n"
        self._append(line)
        self._recent.append(event)

    def recent(self) -> list[dict[str, Any]]:
        """The last events emitted, oldest first."""
        return list(self._recent)

    def _append(self, line: str) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        # One older generation is kept, so a node that runs offline for months cannot fill its disk.
        with contextlib.suppress(FileNotFoundError):
            if self.path.stat().st_size + len(line) > self._max_bytes:
                os.replace(self.path, self.path.with_name(self.path.name + ".1"))
        with self.path.open("a", encoding="utf-8") as f:
            f.write(line)
