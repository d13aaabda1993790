"""Groups hot reset hands to an operator: `GET /v1/resets` says why, and the node annotation `ResetInfo`
lists their chips (ManualResetDevs) until they are healthy again, in the reference's bytes."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Protocol

from ascend_common.chip_traits import ResetScope, traits
from ascend_common.schemas.exporter import Chip
from ascend_common.schemas.verdict import ChipVerdict

from fault_manager.hotreset.planner import healthy
from fault_manager.hotreset.reset_info import (
    EMPTY,
    NO_ID,
    RESET_INFO_ANNOTATION,
    ResetDevice,
    ResetInfo,
    clear_need_external_ops,
    mark_need_external_ops,
    read_annotation,
    render_reset_info,
)

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class OperatorItem:
    """A group that needs an operator, and why."""

    chips: tuple[str, ...]
    reason: str
    since_ms: int


class NodeAnnotations(Protocol):
    """The node object's annotations, where ResetInfo is kept (fault_manager.hotreset.node_annotations)."""

    async def read(self) -> Mapping[str, str] | None:
        """The node's annotations (None: no node object, so nothing was left on it)."""

    async def write_reset_info(self, info: str) -> None: ...


@dataclass
class OperatorHandoff:
    node: NodeAnnotations | None
    node_name: str
    items: dict[tuple[str, ...], OperatorItem] = field(default_factory=dict)
    info: ResetInfo = EMPTY  # the node annotation ResetInfo, in the reference's schema
    listed_at_start: set[int] = field(default_factory=set)  # phy ids ResetInfo named when we started
    known: bool = False  # the node's ResetInfo has been read (or there is no node to read)
    _written: str | None = None

    async def read(self) -> None:
        """The chips an earlier run (ours or the reference's) left for an operator (InitResetInfoMgr):
        they stay listed until they are healthy, and hot reset leaves them to the operator. Until the
        node has been read, nothing is reset or written (the next round reads again): an unreadable
        node must not erase what an earlier run asked an operator to do."""
        if self.node is None:
            self.known = True
            return
        try:
            annotations = await self.node.read()
        except Exception as exc:
            log.warning("ResetInfo not read; hot reset waits", extra={"node": self.node_name, "error": str(exc)})
            return
        self.known = True
        info, error = read_annotation(annotations)
        if error is not None:  # as the reference: dropped whole, and our next write replaces it
            log.warning("ignoring a malformed ResetInfo annotation",
                        extra={"node": self.node_name, "error": str(error)})  # fmt: skip
            return
        self.info = info
        self._written = render_reset_info(info) if annotations and RESET_INFO_ANNOTATION in annotations else None
        self.listed_at_start = {dev.phy_id for dev in info.manual_reset_devs}
        if info.manual_reset_devs:
            log.info("chips left for an operator by an earlier run",
                     extra={"node": self.node_name, "phy_ids": sorted(self.listed_at_start)})  # fmt: skip

    def hand_over(
        self, key: tuple[str, ...], reason: str, at_ms: int, chips: list[Chip], *, failed: bool = False
    ) -> None:
        """Hand the group to an operator: `GET /v1/resets` says why, and `chips` join ResetInfo's
        ManualResetDevs (the faulty chip, as markNeedExternalOps; a failed reset's whole ring, with
        its associated card, as execRescan / fillResetDevs)."""
        if key not in self.items:
            log.warning("hot reset needs an operator", extra={"chips": list(key), "reason": reason})
        self.items[key] = OperatorItem(key, reason, at_ms)
        for chip in chips:
            self.info = mark_need_external_ops(self.info, _reset_device(chip, failed=failed))

    def forget_healed(self, verdicts: Mapping[str, ChipVerdict]) -> None:
        """A chip that is healthy again needs no operator any more (checkDeviceRecovered ->
        clearNeedExternalOps), nor does a group whose chips all are."""
        well = [v for v in verdicts.values() if healthy(v)]
        cleared = clear_need_external_ops(self.info, [ResetDevice(phy_id=v.phy_id, logic_id=v.logic_id) for v in well])
        if cleared is not None:
            self.info = cleared
        self.listed_at_start -= {v.phy_id for v in well}
        for key in list(self.items):
            if all(c in verdicts and healthy(verdicts[c]) for c in key):
                self.items.pop(key, None)

    def reset_info(self) -> str:
        """The node annotation `ResetInfo`, byte for byte as the reference writes it."""
        return render_reset_info(self.info)

    async def publish(self) -> None:
        info = self.reset_info()
        if info != self._written and self.node is not None:
            await self.node.write_reset_info(info)
            self._written = info


def _reset_device(chip: Chip, *, failed: bool) -> ResetDevice:
    """A chip as ResetInfo lists it. A failed reset's entry carries the associated card
    (fillResetDevs: the partner card on A3, -1 elsewhere or when unknown); markNeedExternalOps' leaves it 0."""
    associated = 0
    if failed:
        partner = chip.static.partner_card
        associated = (
            partner.value
            if chip.family is not None
            and traits(chip.family).reset_scope is ResetScope.BROTHER_CARDS
            and partner.is_ok
            and partner.value is not None
            else NO_ID
        )
    return ResetDevice(chip.card_id, chip.device_id, associated, chip.phy_id, chip.logic_id)
