"""Which chips pods use, from their allocation annotations (contract section 8)."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest
from ascend_common.inuse import chips_in_use, chips_named


@dataclass(frozen=True)
class Pod:
    phase: str
    annotations: dict[str, str] = field(default_factory=dict)


@pytest.mark.parametrize(
    ("value", "chips"),
    [
        ("Ascend910-0,Ascend910-3", {"Ascend910-0", "Ascend910-3"}),
        ("Ascend910-5c.1cpu.16g-100-2_0", {"Ascend910-2"}),  # a dynamic vNPU with its vfg id
        ("Ascend910-2c-101-6", {"Ascend910-6"}),
        ("Ascend310P-1-2", {"Ascend310P-1"}),  # a shared copy
        ("npu-core-4,npu-core-5", set()),
        (" Ascend910-1 , ,junk,GPU-0", {"Ascend910-1"}),
        ("", set()),
    ],
)
def test_chips_named(value: str, chips: set[str]) -> None:
    assert chips_named(value) == chips


def test_chips_in_use_counts_pending_and_running_pods_only() -> None:
    pods = [
        Pod("Running", {"huawei.com/AscendReal": "Ascend910-0"}),
        Pod("Pending", {"huawei.com/kltDev": "Ascend910-1"}),
        Pod("Succeeded", {"huawei.com/AscendReal": "Ascend910-2"}),
        Pod("Running", {"other": "Ascend910-3"}),
    ]
    assert chips_in_use(pods) == {"Ascend910-0", "Ascend910-1"}
    assert chips_in_use(pods, phases=("Running",)) == {"Ascend910-0"}
