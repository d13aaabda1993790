"""Fault Events in the reference's format (ascendcommon.go `doWriteFaultToEvent`), for
`--fault-event-format reference`: operators' alert rules written for the reference's device plugin
match on their name, reason, action and message.

One Event per fault event the chip reported, as it arrives (the reference queues `allFaultInfo`
before its HBM / AI-core association, so an echo that the policy then drops still has its Event):

- name `<pod>.<unix ms><logic id>` in kube-system, the digits run together as the reference's
  `%s.%d%d` writes them; the time is when the Event is made, not when the fault was raised
  (the reference overwrites AlarmRaisedTime with time.Now());
- involvedObject `{kind: pod, namespace: kube-system, name: <pod>}`: the writer's own pod, as the
  reference names it from $HOSTNAME (no uid, no apiVersion);
- reason the assertion (`Occur`, `Recovery`, `Notice`), action the code's own level
  (`GetFaultTypeByCode` / `GetNetworkFaultTypeByCode` of that one code, not the chip's level);
  type Warning for an occurrence, Normal otherwise;
- message `device fault, nodeName:<node>, assertion:<reason>, cardID:<c>, deviceID:<d>,
  faultCodes:<CODE>, faultLevelName:<action>, alarmRaisedTime:<YYYY-MM-DD hh:mm:ss>` (a 950 node
  writes `logicID:<l>` in place of the card and device ids); the time in the process's local zone,
  as Go's time.UnixMilli(...).Format;
- eventTime that instant, reportingComponent and source.component the reference's component,
  `device-plugin` (its common.Component: the writer of these Events there), so that an alert or a
  log pipeline filtering on it finds ours; reportingInstance the pod; no first/last timestamp and no
  count, as the reference.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from ascend_common.adapters.kube.events import MAX_MESSAGE, micro_time

NAMESPACE = "kube-system"  # api.KubeNS
COMPONENT = "device-plugin"  # the reference's common.Component
TIME_FORMAT = "%Y-%m-%d %H:%M:%S"  # common.TimeFormat "2006-01-02 15:04:05"
# common.GetFaultAssertionName: FaultRecover -> Recovery, FaultOccur -> Occur, FaultOnce -> Notice.
ASSERTION_NAMES = {"occur": "Occur", "recover": "Recovery", "once": "Notice"}


@dataclass(frozen=True)
class FaultNotice:
    """One fault event of one chip, with what the reference's Event says of it."""

    chip: str
    logic_id: int
    card_id: int | None  # None: not known (off the 950 the reference then writes no Event)
    device_id: int | None
    a5: bool  # a 950 chip (the reference's Ascend910A5): the message names the logic id
    code: str  # as the policy spells it (FormatFaultCodeHex); written upper-case
    assertion: str  # occur / recover / once
    level: str  # the code's own level name


class NoticeError(ValueError):
    """A fault event the reference's format cannot describe (the reference logs it and writes nothing)."""


def reference_fault_event(pod: str, node: str, notice: FaultNotice, now_ms: int) -> dict[str, Any]:
    """The Event `doWriteFaultToEvent` writes for `notice` at `now_ms`; NoticeError when it writes none."""
    reason = ASSERTION_NAMES.get(notice.assertion)
    if reason is None:
        raise NoticeError(f"failed to get name of assertion: {notice.assertion!r}")
    if notice.a5:
        dev = f"logicID:{notice.logic_id}"
    elif notice.card_id is None or notice.device_id is None:
        raise NoticeError(f"failed to get cardID and deviceID of {notice.chip} (logic id {notice.logic_id})")
    else:
        dev = f"cardID:{notice.card_id}, deviceID:{notice.device_id}"
    raised = datetime.fromtimestamp(now_ms / 1000).strftime(TIME_FORMAT)  # local time, as Go's Format
    message = (
        f"device fault, nodeName:{node}, assertion:{reason}, {dev}, faultCodes:{notice.code.upper()}, "
        f"faultLevelName:{notice.level}, alarmRaisedTime:{raised}"
    )
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": f"{pod}.{now_ms}{notice.logic_id}", "namespace": NAMESPACE},
        "involvedObject": {"kind": "pod", "namespace": NAMESPACE, "name": pod},
        "reason": reason,
        "action": notice.level,
        "message": message[:MAX_MESSAGE],
        "type": "Warning" if notice.assertion == "occur" else "Normal",
        "source": {"component": COMPONENT, "host": node},
        "eventTime": micro_time(now_ms / 1000),
        "reportingComponent": COMPONENT,
        "reportingInstance": pod,
    }
