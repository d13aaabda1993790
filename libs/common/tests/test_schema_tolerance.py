"""Answers tolerate fields a newer peer adds; requests refuse fields nobody defined.

During a rolling update the three DaemonSets do not restart together: a newer exporter may answer
an older plugin or fault-manager, and a newer fault-manager an older plugin.
"""

from __future__ import annotations

from typing import Any

import pytest
from ascend_common.faults import FaultLevel
from ascend_common.schemas.exporter import (
    ChipList,
    NodeInfo,
    ResetRequest,
    VnpuCreateRequest,
)
from ascend_common.schemas.verdict import ChipVerdict, VerdictList, VerdictReason
from pydantic import ValidationError

from tests.support.chips import exporter_chip


def _with_added_fields(body: dict[str, Any]) -> dict[str, Any]:
    """`body` with a field no model defines, at every level of nesting."""
    out: dict[str, Any] = {k: _with_added_fields(v) if isinstance(v, dict) else v for k, v in body.items()}
    for k, v in out.items():
        if isinstance(v, list):
            out[k] = [_with_added_fields(x) if isinstance(x, dict) else x for x in v]
    out["added_later"] = {"by": "a newer peer"}
    return out


def test_a_chip_list_with_fields_this_build_does_not_know_is_read() -> None:
    listing = ChipList(last_event_id="r-1", chips=[exporter_chip(0, 0)])
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


def test_a_chip_static_from_an_exporter_without_die_ids_reads_as_none() -> None:
    """An exporter older than issue 23 sends no vdie_id / ddie_id: the chip reads, the die ids are None."""
    listing = ChipList(last_event_id="r-1", chips=[exporter_chip(0, 0)])
    body = listing.model_dump(mode="json")
    for chip in body["chips"]:
        del chip["static"]["vdie_id"], chip["static"]["ddie_id"]
    read = ChipList.model_validate(body)
    assert read == listing
    assert read.chips[0].static.vdie_id is None and read.chips[0].static.ddie_id is None


def test_a_chip_static_with_die_ids_round_trips() -> None:
    chip = exporter_chip(0, 0)
    vdie, ddie = "00000001-0000ABCD-00000000-00000000-00000012", "00000002-00000D1E-00000000-00000000-00000000"
    static = chip.static.model_copy(update={"vdie_id": vdie, "ddie_id": ddie})
    listing = ChipList(last_event_id="r-1", chips=[chip.model_copy(update={"static": static})])
    body = listing.model_dump(mode="json")
    assert body["chips"][0]["static"]["vdie_id"] == vdie and body["chips"][0]["static"]["ddie_id"] == ddie
    read = ChipList.model_validate(_with_added_fields(body))
    assert read == listing
    assert read.chips[0].static.vdie_id == vdie and read.chips[0].static.ddie_id == ddie
