"""Answers tolerate fields a newer peer adds; requests refuse fields nobody defined.

During a rolling update the three DaemonSets do not restart together: a newer exporter may answer
an older plugin or fault-manager, and a newer fault-manager an older plugin.
"""

from __future__ import annotations

from typing import Any

import pytest
from ascend_common.chips import ChipFamily
from ascend_common.faults import FaultLevel
from ascend_common.schemas.exporter import (
    Chip,
    ChipList,
    ChipState,
    ChipStatic,
    NodeInfo,
    ResetRequest,
    VnpuCreateRequest,
)
from ascend_common.schemas.reading import Reading
from ascend_common.schemas.verdict import ChipVerdict, VerdictList, VerdictReason
from pydantic import ValidationError


def _chip() -> Chip:
    static = ChipStatic(
        chip_type=Reading[str].ok("Ascend"),
        chip_name=Reading[str].ok("910B3"),
        chip_version=Reading[str].ok("V1"),
        aicore=Reading[int].ok(20),
        board_id=Reading[int].ok(0x22),
        product_type=Reading[str].ok(""),
        partner_card=Reading[int].error(-8255),
        numa_node=Reading[int].ok(0),
        device_ip=Reading[str].ok("192.168.100.1"),
    )
    return Chip(
        logic_id=0, phy_id=0, card_id=0, device_id=0, name="Ascend910-0", family=ChipFamily.ASCEND910B,
        resource_type=None, state=ChipState.OK, healthy=True, network_healthy=True, static=static, dynamic=None,
        updated_at=1.0,
    )  # fmt: skip


def _with_added_fields(body: dict[str, Any]) -> dict[str, Any]:
    """`body` with a field no model defines, at every level of nesting."""
    out: dict[str, Any] = {k: _with_added_fields(v) if isinstance(v, dict) else v for k, v in body.items()}
    for k, v in out.items():
        if isinstance(v, list):
            out[k] = [_with_added_fields(x) if isinstance(x, dict) else x for x in v]
    out["added_later"] = {"by": "a newer peer"}
    return out


def test_a_chip_list_with_fields_this_build_does_not_know_is_read() -> None:
    listing = ChipList(last_event_id="r-1", chips=[_chip()])
    read = ChipList.model_validate(_with_added_fields(listing.model_dump(mode="json")))
    assert read == listing


def test_a_verdict_list_with_fields_this_build_does_not_know_is_read() -> None:
    verdict = ChipVerdict(
        chip="Ascend910-0", logic_id=0, phy_id=0, fault_level=FaultLevel.NORMAL_NPU, schedulable=True,
        reason=VerdictReason.FAULT_CODE, since=0.0,
    )  # fmt: skip
    listing = VerdictList(epoch="e", revision=3, verdicts=[verdict])
    assert VerdictList.model_validate(_with_added_fields(listing.model_dump(mode="json"))) == listing


@pytest.mark.parametrize(
    ("model", "body"),
    [(ResetRequest, {"channel": "inband", "chanel": "outband"}), (VnpuCreateRequest, {"template": "vir02", "x": 1})],
)
def test_a_request_with_an_unknown_field_is_refused(
    model: type[ResetRequest | VnpuCreateRequest], body: dict[str, object]
) -> None:
    with pytest.raises(ValidationError, match="Extra inputs"):
        model.model_validate(body)


def test_an_unknown_field_does_not_hide_a_missing_one() -> None:
    with pytest.raises(ValidationError):
        NodeInfo.model_validate({"added_later": 1})
