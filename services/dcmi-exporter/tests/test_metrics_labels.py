"""The metrics' `vdie_id` label: the chip's VDIE as ChipStatic carries it, "" when unread
(npu-exporter's setVdieID leaves the label empty when GetDieID fails)."""

from __future__ import annotations

from ascend_common.schemas.exporter import Chip, NodeInfo, SubscriptionState
from ascend_common.schemas.reading import Reading
from dcmi_exporter.metrics.families import LABELS, ChipCollector
from dcmi_exporter.node.snapshot import Snapshot

from tests.support.chips import exporter_chip

VDIE = "00000001-0000ABCD-00000000-00000000-00000012"


def node() -> NodeInfo:
    return NodeInfo(
        backend="sim", profile="910b-8", run_id="r", dcmi_version=Reading[str].ok("24.1.rc2"), card_count=1,
        chip_count=2, chips_by_state={}, subscription=SubscriptionState.LIVE, poll_period_s=1.0, started_at=0.0,
        updated_at=0.0, last_event_id=None, ready=True,
    )  # fmt: skip


def with_vdie(chip: Chip, vdie: str | None) -> Chip:
    return chip.model_copy(update={"static": chip.static.model_copy(update={"vdie_id": vdie})})


def labels_by_family() -> dict[str, dict[str, dict[str, str]]]:
    chips = {0: with_vdie(exporter_chip(0, 3), VDIE), 1: with_vdie(exporter_chip(1, 5), None)}
    snap = Snapshot.build(node(), chips)
    out: dict[str, dict[str, dict[str, str]]] = {}
    for family in ChipCollector(lambda: snap, dict).collect():
        for sample in family.samples:
            if "id" in sample.labels:
                out.setdefault(sample.name, {})[sample.labels["id"]] = sample.labels
    return out


def test_vdie_id_label_is_the_chips_vdie_or_empty() -> None:
    families = labels_by_family()
    assert "vdie_id" in LABELS
    assert families["npu_chip_info_health_status"]["3"] == {
        "id": "3", "model_name": "Ascend910B3", "vdie_id": VDIE, "pcie_bus_info": "",
        "namespace": "", "pod_name": "", "container_name": "",  # CardLabel: no container holds the chip
    }  # fmt: skip
    assert families["npu_chip_info_health_status"]["5"]["vdie_id"] == ""
    # Every chip series carries the same label set.
    for name, by_phy in families.items():
        assert by_phy["3"]["vdie_id"] == VDIE, name
        assert by_phy["5"]["vdie_id"] == "", name
    assert set(families) == {  # the series tests.support.chips' chips have
        "npu_chip_info_health_status", "npu_chip_info_network_status", "npu_chip_info_process_info_num",
        "npu_chip_info_name",
    }  # fmt: skip  # no error_code series: the chips have no code (npu-exporter emits none then)
