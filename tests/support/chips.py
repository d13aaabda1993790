"""Exporter chips for the plugin's tests, shaped like a simulator profile."""

from __future__ import annotations

from ascend_common.chip_traits import resource_type
from ascend_common.chips import detect_family
from ascend_common.naming import chip_name
from ascend_common.schemas.exporter import Chip, ChipDynamic, ChipState, ChipStatic, Vnpu
from ascend_common.schemas.reading import Reading

UNSUPPORTED = -8255


def exporter_chip(
    logic_id: int,
    phy_id: int,
    *,
    name: str = "910B3",
    board: int = 0x22,
    aicore: int = 20,
    card_id: int | None = None,
    numa: int | None = 0,
    codes: list[str] | None = None,
    state: ChipState = ChipState.OK,
    healthy: bool | None = True,
    vnpus: list[Vnpu] | None = None,
    product: str = "Atlas 800T A2",
    ip: str | None = None,
    vdie: str | None = None,
    ddie: str | None = None,
) -> Chip:
    family = detect_family(name, board)
    rtype = resource_type(family)
    err_i = Reading[int].error(UNSUPPORTED)
    static = ChipStatic(
        chip_type=Reading[str].ok("Ascend"),
        chip_name=Reading[str].ok(name),
        chip_version=Reading[str].ok("V1"),
        aicore=Reading[int].ok(aicore),
        board_id=Reading[int].ok(board),
        product_type=Reading[str].ok(product),
        partner_card=err_i,
        numa_node=Reading[int].ok(numa) if numa is not None else err_i,
        device_ip=Reading[str].ok(ip or f"192.168.100.{phy_id + 1}"),
        vdie_id=vdie,
        ddie_id=ddie,
    )
    dynamic = ChipDynamic(
        health=Reading[int].ok(0 if healthy else 2),
        error_codes=Reading[list[str]].ok(codes or []),
        network_health=Reading[int].ok(0),
        hbm=Reading.error(UNSUPPORTED),
        temperature_c=err_i,
        power_w=Reading.error(UNSUPPORTED),
        utilization=Reading.error(UNSUPPORTED),
        processes=Reading.ok([]),
        boot_status=Reading[int].ok(16),
        vnpus=Reading.ok(vnpus or []),
    )
    return Chip(
        logic_id=logic_id,
        phy_id=phy_id,
        card_id=card_id if card_id is not None else logic_id,
        device_id=0,
        name=chip_name(rtype, phy_id),
        family=family,
        resource_type=rtype,
        state=state,
        healthy=healthy,
        network_healthy=True,
        static=static,
        dynamic=dynamic,
        updated_at=1.0,
    )


def node_910b(n: int = 8) -> dict[int, Chip]:
    """8 x 910B3 whose logic ids differ from their phy ids, like the sim's 910b-8."""
    return {logic: exporter_chip(logic, (logic + 4) % n, numa=0 if (logic + 4) % n < 4 else 1) for logic in range(n)}


def node_910a() -> dict[int, Chip]:
    return {i: exporter_chip(i, i, name="910A", board=0x10, aicore=32, numa=i // 4) for i in range(8)}


A5_SERVER_BOARD = 0x50  # the sim's 950 server board (not an Atlas 350 card)
A5_SERVER_MAIN_BOARD = 0x03


def node_950(
    n: int = 8,
    *,
    shift: int = 4,
    board: int = A5_SERVER_BOARD,
    main_board: int = A5_SERVER_MAIN_BOARD,
    super_pod_type: int | None = 2,
    super_pod_id: int = 5,
    server_index: int = 1,
    rack_id: int = 3,
) -> dict[int, Chip]:
    """n x Ascend950DT as the v2 library reports them, like the sim's a5-superpod-8: no card, no
    product type or IP; logic id i is phy id (i + shift) % n. `super_pod_type` None: the chips'
    super-pod information could not be read."""

    def ok(value: int) -> Reading[int]:
        return Reading[int].ok(value)

    chips: dict[int, Chip] = {}
    for logic in range(n):
        phy = (logic + shift) % n
        chip = exporter_chip(logic, phy, name="Ascend950DT", board=board, aicore=25, card_id=-1)
        pod: dict[str, Reading[int]] = {}
        if super_pod_type is not None:
            pod = {
                "super_pod_id": ok(super_pod_id), "server_index": ok(server_index),
                "super_device_id": ok(server_index << 22 | phy), "rack_id": ok(rack_id),
                "super_pod_type": ok(super_pod_type), "scale_type": ok(8192),
            }  # fmt: skip
        static = chip.static.model_copy(
            update={
                "product_type": Reading[str].error(UNSUPPORTED),
                "device_ip": Reading[str].error(UNSUPPORTED),
                "main_board_id": ok(main_board),
                **pod,
            }
        )
        chips[logic] = chip.model_copy(update={"static": static, "device_id": -1})
    return chips
