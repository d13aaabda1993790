"""The fault-manager's Kubernetes Events: fault occurrence and recovery, rate-limited per chip,
isolation and release, and the reference's EventReleaseUpgradeFault.

The reactor calls FaultEvents' sync methods (`occurred`, `recovered`, `isolated`, `released`)
and never waits: they only put a ready Event body on a bounded queue, and a background task
hands it to a sink (the API server, or a file in offline mode: the sinks and the Event body are
the by-verb adapter `ascend_common.adapters.kube.events`). Events are a courtesy to whoever reads
`kubectl describe node`; losing one must never hold up or break fault handling, so a failure is
logged and the event dropped.

A flapping chip can report the same code many times a second. Each chip has a token bucket;
what it refuses is counted, and one summary event ("N more fault events on Ascend910-3
suppressed") goes out once the bucket has a token again.

Two formats for a fault's occurrence and recovery (`--fault-event-format`): ours (default), one
`NPUFaultOccurred` / `NPUFaultRecovered` Event on the Node per code the policy applied, with the
chip's level; or the reference's (`events.reference`), one Event about the writer's pod per fault
event the chip reported. The per-chip buckets limit both: the reference's one node-wide limiter
(10 a minute) lets one flapping chip silence every other. In the reference's format what a
bucket refused is logged and counted, not summarised in an Event of a shape the reference has not.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from ascend_common.adapters.kube.client import status_of
from ascend_common.adapters.kube.events import EventSink, event_body, micro_time

from fault_manager.events.reference import FaultNotice, NoticeError, reference_fault_event

log = logging.getLogger(__name__)

COMPONENT = "fault-manager"
REASON_OCCURRED = "NPUFaultOccurred"
REASON_RECOVERED = "NPUFaultRecovered"
REASON_ISOLATED = "NPUIsolated"
REASON_RELEASED = "NPUReleased"
REASON_SUPPRESSED = "NPUFaultEventsSuppressed"
REASON_REFERENCE = "reference-format fault"  # what a refused reference-format Event is logged as

FaultEventFormat = Literal["ours", "reference"]


REASON_RELEASE_UPGRADE_FAULT = "EventReleaseUpgradeFault"


def release_event_body(pod: str, node: str, message: str, now: float) -> dict[str, Any]:
    """The Event the reference writes when UpgradeFaultReason entries are removed
    (ascendcommon.go `WriteUpgradeReasonRemoveEvent`): named `<pod>.EventReleaseUpgradeFault.<unix ms>`,
    about the writer's own pod in kube-system, the removed reasons as the message, in the
    UpgradeFaultReason format. Like the reference it sets eventTime and no first/last timestamps;
    the source names us, not the reference's component."""
    ms = int(now * 1000)
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": f"{pod}.{REASON_RELEASE_UPGRADE_FAULT}.{ms}"},
        "involvedObject": {"kind": "pod", "namespace": "kube-system", "name": pod},
        "reason": REASON_RELEASE_UPGRADE_FAULT,
        "action": REASON_RELEASE_UPGRADE_FAULT,
        "message": message,
        "type": "Normal",
        "source": {"component": COMPONENT, "host": node},
        "eventTime": micro_time(ms / 1000),
        "reportingComponent": COMPONENT,
        "reportingInstance": pod,
    }


@dataclass
class _Bucket:
    tokens: float
    at: float
    suppressed: int = 0
    first_suppressed: float = 0.0
    last_suppressed: float = 0.0

    def refill(self, now: float, rate: float, capacity: float) -> None:
        # max(0, ...): a wall clock stepped back must not burn tokens.
        self.tokens = min(capacity, self.tokens + max(0.0, now - self.at) * rate)
        self.at = now


@dataclass(frozen=True)
class _Pending:
    chip: str
    body: dict[str, Any]


class FaultEvents:
    """Queues, rate-limits and sends the fault-manager's Events for one node.

    The sync methods must be called from the event loop's thread (they wake the sender).
    Counters for metrics: `sent`, `failed` (the sink raised), `suppressed` (refused by a
    chip's bucket, reported in summaries) and `dropped` (queue overflow or unsent at stop).
    """

    def __init__(
        self,
        sink: EventSink,
        node_name: str,
        clock_now: Callable[[], float],
        *,
        per_chip_per_minute: int = 6,
        burst: int | None = None,
        max_pending: int = 1000,
        node_uid: str | None = None,
        tick_s: float = 1.0,
        pod: str = "",
        fault_format: FaultEventFormat = "ours",
    ) -> None:
        if per_chip_per_minute <= 0 or (burst is not None and burst <= 0) or max_pending <= 0:
            raise ValueError("per_chip_per_minute, burst and max_pending must be positive")
        self._sink = sink
        self._node = node_name
        self._node_uid = node_uid
        self._pod = pod or node_name
        self._now = clock_now
        self._rate = per_chip_per_minute / 60.0
        self._capacity = float(burst if burst is not None else per_chip_per_minute)
        self._max_pending = max_pending
        self._tick_s = tick_s
        self.fault_format = fault_format
        self._last_ms = 0  # the last reference-format Event's time: two never share a name
        self._buckets: dict[str, _Bucket] = {}
        self._pending: deque[_Pending] = deque()
        self._wake = asyncio.Event()
        self._send_lock = asyncio.Lock()
        self._task: asyncio.Task[None] | None = None
        self._closing = False
        self.sent = 0
        self.failed = 0
        self.suppressed = 0
        self.dropped = 0

    # -- what the reactor calls (sync, never raises) ------------------------------------------

    def occurred(self, chip: str, code: str, level: str) -> None:
        """The policy applied an occurrence of `code` (ours; the chip now at `level`)."""
        if self.fault_format == "ours":
            self._limited(chip, REASON_OCCURRED, "Warning", f"{chip}: fault {code} occurred, level {level}")

    def recovered(self, chip: str, code: str) -> None:
        """The policy applied a recovery of `code` (ours)."""
        if self.fault_format == "ours":
            self._limited(chip, REASON_RECOVERED, "Normal", f"{chip}: fault {code} recovered")

    def arrived(self, notice: FaultNotice) -> None:
        """The chip reported a fault event (the reference's format writes one Event for each)."""
        if self.fault_format == "reference":
            self._limited(notice.chip, REASON_REFERENCE, "", "", notice=notice)

    # Isolation and release are decisions (of the policy or an operator), not hardware noise:
    # rare, and each one matters, so they skip the rate limit.

    def isolated(self, chip: str, reason: str) -> None:
        self._unlimited(chip, REASON_ISOLATED, "Warning", f"{chip} isolated: {reason}")

    def released(self, chip: str, by: str) -> None:
        self._unlimited(chip, REASON_RELEASED, "Normal", f"{chip} released by {by}")

    def reasons_released(self, message: str) -> None:
        """UpgradeFaultReason entries were removed (`message`: them, as that key writes them)."""
        try:
            self._enqueue("", release_event_body(self._pod, self._node, message, self._now()))
        except Exception:
            log.exception("release event not queued", extra={"reason": REASON_RELEASE_UPGRADE_FAULT})

    def _limited(self, chip: str, reason: str, type_: str, message: str, notice: FaultNotice | None = None) -> None:
        try:
            now = self._now()
            bucket = self._buckets.get(chip)
            if bucket is None:
                bucket = self._buckets[chip] = _Bucket(self._capacity, now)
            bucket.refill(now, self._rate, self._capacity)
            self._summary_if_due(chip, bucket, force=False)  # the summary goes before what follows it
            if bucket.tokens >= 1.0:
                bucket.tokens -= 1.0
                if notice is None:
                    self._push(chip, reason, type_, message, now)
                else:
                    self._push_reference(notice, now)
                return
            if not bucket.suppressed:
                bucket.first_suppressed = now
            bucket.suppressed += 1
            bucket.last_suppressed = now
            self.suppressed += 1
            self._wake.set()  # the sender starts polling for this chip's refill
        except Exception:
            log.exception("fault event not queued", extra={"chip": chip, "reason": reason})

    def _push_reference(self, notice: FaultNotice, now: float) -> None:
        # Unique names: two Events of one chip in one millisecond would otherwise collide (409).
        ms = max(int(now * 1000), self._last_ms + 1)
        try:
            body = reference_fault_event(self._pod, self._node, notice, ms)
        except NoticeError as exc:
            log.error("fault event not written", extra={"chip": notice.chip, "code": notice.code, "error": str(exc)})
            return
        self._last_ms = ms
        self._enqueue(notice.chip, body)

    def _unlimited(self, chip: str, reason: str, type_: str, message: str) -> None:
        try:
            self._push(chip, reason, type_, message, self._now())
        except Exception:
            log.exception("fault event not queued", extra={"chip": chip, "reason": reason})

    def _push(
        self, chip: str, reason: str, type_: str, message: str, first: float, last: float | None = None, count: int = 1
    ) -> None:
        body = event_body(
            self._node,
            reason,
            message,
            type_,
            component=COMPONENT,
            first=first,
            last=last,
            count=count,
            node_uid=self._node_uid,
        )
        self._enqueue(chip, body)

    def _enqueue(self, chip: str, body: dict[str, Any]) -> None:
        if len(self._pending) >= self._max_pending:
            # The oldest goes: under a flood the newest tells more about the chip's state now.
            lost = self._pending.popleft()
            self.dropped += 1
            if self.dropped == 1 or self.dropped % 100 == 0:  # a log line per drop would be a flood too
                log.warning(
                    "fault event queue full, oldest dropped", extra={"chip": lost.chip, "dropped": self.dropped}
                )
        self._pending.append(_Pending(chip, body))
        self._wake.set()

    def _summary_if_due(self, chip: str, bucket: _Bucket, *, force: bool) -> None:
        if not bucket.suppressed or not (force or bucket.tokens >= 1.0):
            return
        # The summary spends a token too, so a chip's long-run rate stays within its limit.
        bucket.tokens = max(0.0, bucket.tokens - 1.0)
        n, bucket.suppressed = bucket.suppressed, 0
        message = f"{n} more fault events on {chip} suppressed"
        if self.fault_format == "reference":
            log.warning("fault events suppressed", extra={"chip": chip, "count": n})
            return
        self._push(chip, REASON_SUPPRESSED, "Warning", message, bucket.first_suppressed, bucket.last_suppressed, n)

    def _tick(self, *, force: bool = False) -> None:
        now = self._now()
        for chip, bucket in list(self._buckets.items()):
            bucket.refill(now, self._rate, self._capacity)
            self._summary_if_due(chip, bucket, force=force)
            if not bucket.suppressed and bucket.tokens >= self._capacity:
                del self._buckets[chip]  # a full, quiet bucket is the same as none: memory stays bounded

    # -- sending ------------------------------------------------------------------------------

    @property
    def pending(self) -> int:
        return len(self._pending)

    async def flush(self) -> None:
        """Send what is due now: the queue, and summaries of chips whose bucket has refilled."""
        self._tick()
        await self._drain()

    async def _drain(self) -> None:
        async with self._send_lock:  # flush() and the sender must not interleave: order matters
            while self._pending:
                await self._send(self._pending.popleft())

    async def _send(self, item: _Pending) -> None:
        try:
            await self._sink.emit(item.body)
        except asyncio.CancelledError:
            self.dropped += 1  # stop() gave up on it mid-flight
            raise
        except Exception as exc:
            self.failed += 1
            log.warning(
                "fault event not sent, dropped",
                extra={
                    "chip": item.chip,
                    "reason": item.body.get("reason"),
                    "status": status_of(exc),
                    "error": str(exc) or type(exc).__name__,
                },
            )
        else:
            self.sent += 1

    def start(self) -> None:
        """Start the sender on the running loop."""
        if self._task is None:
            self._closing = False
            self._task = asyncio.get_running_loop().create_task(self._run(), name="fault-events")
            self._task.add_done_callback(_log_crash)

    async def stop(self, grace: float = 5.0) -> None:
        """Send what is left, summaries included whether or not their bucket has refilled, for at most `grace` s.

        What is still unsent then is counted in `dropped`: the bound is enforced here rather than
        by the caller's timeout so that a cancelled flush still leaves the counters right.
        """
        self._closing = True
        task, self._task = self._task, None
        if task is None:  # never started: one last pass all the same
            task = asyncio.get_running_loop().create_task(self._run(), name="fault-events-final")
            task.add_done_callback(_log_crash)
        self._wake.set()
        done, _ = await asyncio.wait({task}, timeout=grace)
        if not done:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        if self._pending:
            log.warning("fault events not sent before stop", extra={"count": len(self._pending)})
            self.dropped += len(self._pending)
            self._pending.clear()

    async def _run(self) -> None:
        while not self._closing:
            self._wake.clear()  # before the pass, so a wake during it is not lost
            self._tick()
            await self._drain()
            if self._closing:
                break
            # Nothing to wait for but new events unless a chip holds suppressed ones: then poll for
            # its refill (the clock is injected, so the refill time cannot simply be slept to).
            timeout = self._tick_s if any(b.suppressed for b in self._buckets.values()) else None
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), timeout)
        self._tick(force=True)
        await self._drain()


def _log_crash(task: asyncio.Task[None]) -> None:
    if not task.cancelled() and task.exception() is not None:
        log.error("fault event sender crashed", exc_info=task.exception())
