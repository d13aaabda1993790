"""Ports of the reference's Go tests of the reset ring (pkg/server/hot_reset_manager_test.go).

The reference tests methods of UnifiedHotResetManager, which read the card type, the board id
and the Atlas 300I Duo flag from process globals (common.ParamOption) and gomonkey patches.
Ours are pure functions, so each case passes those as arguments:
- getRingSize(dev, boardId, deviceNum) with ParamOption.RealCardType -> ring_size(family, board_id, device_num);
- getHccsRingDevices(faultDev, ringSize, groupDevice) -> hccs_ring(logic_id, size, logic_ids); the
  Go method also hands back the fault device it was given, which a pure function has no need to;
- getResetRingDevices / getDuoCardDevices (the whole rule) -> reset_group(chip, chips);
- getA3AssociatedDevices failing (no brother card) -> unknown_group_reason(chip).
Test names are the Go test's, then the convey case.
"""

from __future__ import annotations

import pytest
from ascend_common.chips import ChipFamily, ChipTopology
from ascend_common.reset_groups import (
    A200T_A2_RING_SIZE,
    ASCEND910_RING_SIZE,
    ASCEND910B_TRAIN_RING_SIZE,
    ASCEND950_RING_SIZE,
    group_of,
    hccs_ring,
    reset_group,
    ring_size,
    unknown_group_reason,
)
from ascend_common.schemas.exporter import Chip, ChipState, ChipStatic
from ascend_common.schemas.reading import Reading

A300I_A2_BOARD_ID = 0x28  # common.A300IA2BoardId

# --- TestGetRingSize: 5 convey cases ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("family", "board_id", "device_num", "expected"),
    [
        pytest.param(ChipFamily.ASCEND910, 0, 0, ASCEND910_RING_SIZE, id="Ascend910A should return 4"),
        pytest.param(ChipFamily.ASCEND910B, A300I_A2_BOARD_ID, 4, 1, id="910B infer board should return 1"),
        pytest.param(ChipFamily.ASCEND910B, 0, 16, A200T_A2_RING_SIZE, id="910B large device count should return 16"),
        pytest.param(ChipFamily.ASCEND910B, 0, 8, ASCEND910B_TRAIN_RING_SIZE, id="910B train should return 8"),
        # RealCardType "unknown": any card type the reference does not list.
        pytest.param("unknown", 0, 0, 1, id="unknown type should return 1"),
        # ours: the Go test has no A5 case; getRingSize answers Ascend910A5RingsNum whatever the node.
        pytest.param(ChipFamily.ASCEND950, 0, 8, ASCEND950_RING_SIZE, id="ours: Ascend910A5 should return 1"),
        pytest.param(ChipFamily.ASCEND950, A300I_A2_BOARD_ID, 16, ASCEND950_RING_SIZE, id="ours: A5 of 16 returns 1"),
    ],
)
def test_GetRingSize(family: str, board_id: int, device_num: int, expected: int) -> None:
    assert ring_size(family, board_id, device_num) == expected


def test_GetRingSize_constants() -> None:
    # The Go cases compare with the constants; these are their values (pkg/common/constants.go).
    assert (ASCEND910_RING_SIZE, ASCEND910B_TRAIN_RING_SIZE, A200T_A2_RING_SIZE) == (4, 8, 16)
    assert ASCEND950_RING_SIZE == 1  # Ascend910A5RingsNum


# --- TestGetHccsRingDevices: 2 convey cases --------------------------------------------------------


def test_GetHccsRingDevices_should_return_devices_in_same_ring() -> None:
    ring = hccs_ring(1, 4, [0, 1, 2, 3, 4])
    assert len(ring) == 4
    assert 1 in ring  # the Go case checks the returned fault device is logic id 1
    assert ring == (0, 1, 2, 3)


def test_GetHccsRingDevices_ring_size_1_should_return_single_device() -> None:
    ring = hccs_ring(5, 1, [5])
    assert len(ring) == 1
    assert ring == (5,)


# --- TestGetResetRingDevices: 1 convey case --------------------------------------------------------


def _topo(logic: int, family: ChipFamily, *, card: int | None = None, product: str | None = None) -> ChipTopology:
    return ChipTopology(
        logic_id=logic, phy_id=logic, card_id=logic if card is None else card, family=family, product_type=product
    )


def test_GetResetRingDevices_ringSize_1_should_return_single_device() -> None:
    # RealCardType "unknown" with board id 0: a family getRingSize does not list (Ascend310).
    chip = _topo(0, ChipFamily.ASCEND310)
    assert reset_group(chip, [chip]) == (0,)


@pytest.mark.parametrize("chips", [8, 16, 4])
def test_GetResetRingDevices_a5_resets_one_chip_at_a_time(chips: int) -> None:
    # ours: the Go test has no A5 case. A 950 chip reports no card (-1 for every chip of the node), so
    # nothing groups chips by card: each is reset alone (ring size 1), whatever the node's size.
    node = [_topo(logic, ChipFamily.ASCEND950, card=-1) for logic in range(chips)]
    assert [reset_group(chip, node) for chip in node] == [(logic,) for logic in range(chips)]


# --- TestGetResetRingDevicesDuoCard: 1 convey case -------------------------------------------------


def test_GetResetRingDevicesDuoCard_should_return_duo_card_devices() -> None:
    # IsContainAtlas300IDuo patched true: the node's chips report the Duo product type.
    duo = "Atlas 300I Duo"
    chips = [
        _topo(0, ChipFamily.ASCEND310P, card=1, product=duo),
        _topo(1, ChipFamily.ASCEND310P, card=1, product=duo),
        _topo(2, ChipFamily.ASCEND310P, card=2, product=duo),
    ]
    group = reset_group(chips[0], chips)
    assert len(group) == 2
    assert group == (0, 1)


# --- TestGetDuoCardDevices: 1 convey case ----------------------------------------------------------


def test_GetDuoCardDevices_should_return_devices_with_same_CardID() -> None:
    chips = [
        _topo(0, ChipFamily.ASCEND310P, card=1, product="Atlas 300I Duo"),
        _topo(1, ChipFamily.ASCEND310P, card=1, product="Atlas 300I Duo"),
        _topo(2, ChipFamily.ASCEND310P, card=2, product="Atlas 300I Duo"),
    ]
    assert len(reset_group(chips[0], chips)) == 2


# --- TestGetA3AssociatedDevices: 2 convey cases ----------------------------------------------------
# Both Go cases make a DCMI call fail and expect no ring at all (so no reset). Ours reads the
# brother card once, at discovery: either failure shows as an unreadable partner_card, for which
# unknown_group_reason() answers a reason. Deliberate difference: group_of() still answers the
# card's own dies (its signature has no "unknown"); callers must check unknown_group_reason().


def _a3_chip(logic: int, partner: Reading[int]) -> Chip:
    static = ChipStatic(
        chip_type=Reading[str].ok("Ascend"),
        chip_name=Reading[str].ok("910_9391"),
        chip_version=Reading[str].ok("V1"),
        aicore=Reading[int].ok(24),
        board_id=Reading[int].ok(0xB0),
        product_type=Reading[str].ok("Atlas 900 A3 SuperPoD"),
        partner_card=partner,
        numa_node=Reading[int].ok(0),
        device_ip=Reading[str].ok("192.168.100.1"),
    )
    return Chip(
        logic_id=logic,
        phy_id=logic,
        card_id=logic // 2,
        device_id=logic % 2,
        name=f"Ascend910-{logic}",
        family=ChipFamily.ASCEND910A3,
        resource_type=None,
        state=ChipState.OK,
        healthy=True,
        network_healthy=True,
        static=static,
        dynamic=None,
        updated_at=1.0,
    )


@pytest.mark.parametrize(
    "failure",
    [
        pytest.param(-8005, id="GetCardIDDeviceID failed should return nil"),
        pytest.param(-8255, id="GetAssociatedLogicIDs failed should return nil"),
    ],
)
def test_GetA3AssociatedDevices(failure: int) -> None:
    chips = [_a3_chip(logic, Reading[int].error(failure)) for logic in range(4)]
    assert unknown_group_reason(chips[0]) is not None
    assert [c.logic_id for c in group_of(chips[0], chips)] == [0, 1]  # the card alone (see above)


def test_GetA3AssociatedDevices_known_brother_card() -> None:
    chips = [_a3_chip(logic, Reading[int].ok((logic // 2) ^ 1)) for logic in range(4)]
    assert unknown_group_reason(chips[0]) is None
    assert [c.logic_id for c in group_of(chips[0], chips)] == [0, 1, 2, 3]
