"""One chip, one kubelet API (`--kubelet-api both`, allocation.chip_owners): step tables.

Each case is a sequence of calls on one table, each with what it must answer: "ok", or the
ChipTaken it raises ("dp" when the device plugin holds the chip, else the claim's uid)."""

from __future__ import annotations

import pytest
from ascend_device_plugin.allocation.chip_owners import ChipOwners, ChipTaken

C3, C4 = "Ascend910-3", "Ascend910-4"
Step = tuple[str, str, tuple[str, ...], float, str]  # (call, claim uid, chips, now, expected)

CASES: list[tuple[str, list[Step]]] = [
    ("an allocated chip refuses a claim", [
        ("allocate", "", (C3,), 0.0, "ok"),
        ("reserve", "u1", (C3, C4), 1.0, "dp"),
        ("reserve", "u1", (C4,), 1.0, "ok"),  # the refused reserve marked nothing: C4 was free
    ]),
    ("a reserved chip (prepared, or still preparing) refuses Allocate", [
        ("reserve", "u1", (C3,), 0.0, "ok"),
        ("allocate", "", (C4, C3), 1.0, "u1"),
        ("reserve", "u2", (C4,), 1.0, "ok"),  # the refused allocate marked nothing
    ]),
    ("a chip goes to one claim; the same claim again is no error", [
        ("reserve", "u1", (C3,), 0.0, "ok"),
        ("reserve", "u1", (C3,), 0.0, "ok"),
        ("reserve", "u2", (C3,), 0.0, "u1"),
    ]),
    ("release frees a claim's chips for Allocate", [
        ("reserve", "u1", (C3,), 0.0, "ok"),
        ("release", "u1", (), 0.0, "ok"),
        ("allocate", "", (C3,), 0.0, "ok"),
    ]),
    ("an Allocate's hold passes to the annotation and lasts as long as it", [
        ("allocate", "", (C3,), 0.0, "ok"),
        ("annotated", "", (C3,), 1.0, "ok"),
        ("reserve", "u1", (C3,), 500.0, "dp"),  # long past the hold: the annotation holds it
        ("annotated", "", (), 501.0, "ok"),  # the pod finished
        ("reserve", "u1", (C3,), 501.0, "ok"),
    ]),
    ("an Allocate no pod ever names is held for allocate_hold_s, then freed", [
        ("allocate", "", (C3,), 0.0, "ok"),
        ("reserve", "u1", (C3,), 119.9, "dp"),
        ("reserve", "u1", (C3,), 120.0, "ok"),
    ]),
    ("a chip an annotation names refuses a claim", [
        ("annotated", "", (C4,), 0.0, "ok"),
        ("reserve", "u1", (C4,), 0.0, "dp"),
    ]),
]  # fmt: skip


@pytest.mark.parametrize("steps", [c[1] for c in CASES], ids=[c[0] for c in CASES])
def test_one_chip_one_api(steps: list[Step]) -> None:
    owners = ChipOwners(allocate_hold_s=120.0)
    for call, uid, chips, now, expected in steps:
        try:
            if call == "allocate":
                owners.allocate(chips, now)
            elif call == "reserve":
                owners.reserve(uid, chips, now)
            elif call == "release":
                owners.release(uid)
            else:
                owners.set_annotated(chips)
            got = "ok"
        except ChipTaken as exc:
            got = exc.claim or "dp"
        assert got == expected, (call, uid, chips, now)


def test_the_holders_as_the_two_sides_read_them() -> None:
    owners = ChipOwners(allocate_hold_s=10.0)
    owners.allocate([C3], 0.0)
    owners.reserve("u1", [C4], 0.0)
    assert owners.device_plugin(5.0) == {C3}  # the slice leaves C3 out
    assert owners.claims() == {C4}  # the device plugin advertises C4 Unhealthy
    assert owners.device_plugin(10.0) == frozenset()
    with pytest.raises(ChipTaken, match=r"Ascend910-4 held by claim uid u1"):
        owners.allocate([C4], 11.0)
