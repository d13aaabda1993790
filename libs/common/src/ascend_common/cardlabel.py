"""npu-exporter's CardLabel container part, shared by the exporter's chip series and the device
plugin's container series so that the two endpoints' labels agree."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

NOT_DISPLAYED_FOR_MULTI_POD = "not_displayed_for_multi_pod"  # npu-exporter's value for a shared chip


class Holder(Protocol):
    @property
    def namespace(self) -> str: ...
    @property
    def pod(self) -> str: ...
    @property
    def container(self) -> str: ...


def card_labels(holders: Sequence[Holder]) -> tuple[str, str, str]:
    """(namespace, pod_name, container_name) as npu-exporter's getContainerLabels fills them: one
    holder's, `not_displayed_for_multi_pod` in all three when several hold the chip, "" when none."""
    if len(holders) == 1:
        return holders[0].namespace, holders[0].pod, holders[0].container
    if holders:
        return (NOT_DISPLAYED_FOR_MULTI_POD,) * 3
    return "", "", ""
