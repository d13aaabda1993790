"""The fault-manager's per-chip verdict: what the device-plugin and the cluster reports act on.

API (fault-manager, Unix socket):
  GET /v1/verdicts          -> VerdictList: every chip, with the revision it reflects
  GET /v1/verdicts/events   -> server-sent events; `id` = the revision, `event` = "verdict"
                               or "reset"; data = VerdictEvent
Resume rules (architecture doc): a client resumes with Last-Event-ID = the last revision it
applied. After a gap (a revision was skipped), a `reset` event, or a new fault-manager epoch
(it restarted), the client re-reads GET /v1/verdicts and continues from its revision.
`VerdictCursor` implements these rules for consumers.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from pydantic import Field

from ascend_common.faults import FaultLevel
from ascend_common.schemas.answer import Answer

VERDICTS_PATH = "/v1/verdicts"
VERDICT_EVENTS_PATH = "/v1/verdicts/events"


class VerdictReason(StrEnum):
    NORMAL = "Normal"
    FAULT_CODE = "FaultCode"  # the level of the chip's current codes
    FAULT_DURATION = "FaultDuration"  # a code lasted longer than its FaultTimeout
    FAULT_FREQUENCY = "FaultFrequency"  # a code came back too often in its window
    FAULT_AUTOFILL = "FaultAutofill"  # a synthesised code (card drop, hung library call)
    MANUAL = "ManuallySeparated"  # an administrator isolated the chip
    UNKNOWN = "Unknown"  # the exporter cannot read the chip
    DUO_CARD = "DuoCard"  # its Atlas 300I Duo cardmate is unschedulable (inference hot reset, setHealthyIfDuoCard)


class ChipVerdict(Answer):
    chip: str  # "<type>-<phyID>"
    logic_id: int
    phy_id: int
    fault_level: FaultLevel
    network_level: FaultLevel = FaultLevel.NORMAL_NPU
    schedulable: bool  # Healthy for the kubelet (contract section 7, incl. the running-pod rule)
    network_healthy: bool = True
    reason: VerdictReason
    since: float  # unix seconds the chip has had this level
    codes: list[str] = Field(default_factory=list)  # upper-case hex
    resetting: bool = False  # a hot reset is under way (the chip is in `-Recovering`)
    manually_separated: bool = False


class VerdictList(Answer):
    epoch: str  # changes when the fault-manager restarts
    revision: int  # every verdict below reflects all changes up to this revision
    verdicts: list[ChipVerdict]


class VerdictEvent(Answer):
    epoch: str
    revision: int
    verdict: ChipVerdict


class CursorAction(StrEnum):
    APPLY = "apply"  # the next revision: apply it
    SKIP = "skip"  # already applied (a replay after reconnecting)
    RESYNC = "resync"  # a gap or a new epoch: re-read GET /v1/verdicts


@dataclass(frozen=True)
class VerdictCursor:
    """Where a consumer is in the verdict stream; pure, so its rules are table-tested."""

    epoch: str | None = None
    revision: int = 0

    def decide(self, event_epoch: str, event_revision: int) -> CursorAction:
        if self.epoch is None or event_epoch != self.epoch:
            return CursorAction.RESYNC
        if event_revision <= self.revision:
            return CursorAction.SKIP
        if event_revision == self.revision + 1:
            return CursorAction.APPLY
        return CursorAction.RESYNC

    def applied(self, event_revision: int) -> VerdictCursor:
        return VerdictCursor(self.epoch, event_revision)

    @staticmethod
    def from_list(listing: VerdictList) -> VerdictCursor:
        return VerdictCursor(listing.epoch, listing.revision)

    def last_event_id(self) -> str | None:
        """The Last-Event-ID header to resume with (None: start from a fresh list)."""
        return None if self.epoch is None else str(self.revision)
