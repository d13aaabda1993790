"""The immutable view of the node that HTTP handlers read, and the pure rules that build it.

A new Snapshot replaces the old one whole; readers never see a half-updated node.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property

from ascend_common.chip_traits import resource_type
from ascend_common.chips import ChipAddress, detect_family
from ascend_common.faults.codes import (
    CARD_DROP_CODE,
    LINK_DOWN_CODE,
    NETWORK_CODES,
    UB_PORT_DOWN_CODE,
    UB_SEPARATE_CODE,
    UB_SUBHEALTH_CODE,
    UBOE_PORT_DOWN_CODE,
    UBOE_PRESEPARATE_CODE,
    UBOE_SUBHEALTH_CODE,
)
from ascend_common.naming import chip_name
from ascend_common.schemas.exporter import (
    Chip,
    ChipChangeData,
    ChipDynamic,
    ChipList,
    ChipState,
    ChipStatic,
    NodeInfo,
    UbPorts,
)
from ascend_common.schemas.reading import Reading

NETWORK_OK_VALUES = frozenset({0, 6})  # 6: still initialising, which the reference counts as healthy
RC_NOT_READY = -8012


@dataclass(frozen=True)
class Snapshot:
    node: NodeInfo
    chips: tuple[Chip, ...] = ()
    by_logic: Mapping[int, Chip] = field(default_factory=dict)

    @staticmethod
    def build(node: NodeInfo, chips: Mapping[int, Chip], **node_update: object) -> Snapshot:
        """The snapshot of `chips`; `node` gets their counts and `node_update` in one copy."""
        ordered = tuple(chips[k] for k in sorted(chips))
        states = {s: 0 for s in ChipState}
        for chip in ordered:
            states[chip.state] += 1
        node = node.model_copy(
            update={
                **node_update,
                "chip_count": len(ordered),
                # A chip of the v2 library belongs to no card (card id -1): it counts none.
                "card_count": len({c.card_id for c in ordered if c.card_id >= 0}),
                "chips_by_state": states,
            }
        )
        return Snapshot(node=node, chips=ordered, by_logic=dict(chips))

    @cached_property
    def chips_json(self) -> bytes:
        return ChipList(last_event_id=self.node.last_event_id, chips=list(self.chips)).model_dump_json().encode()

    @cached_property
    def node_json(self) -> bytes:
        return self.node.model_dump_json().encode()

    def chip_json(self, logic_id: int) -> bytes | None:
        chip = self.by_logic.get(logic_id)
        return None if chip is None else chip.model_dump_json().encode()


def static_identity(addr: ChipAddress, static: ChipStatic) -> dict[str, object]:
    """Family, resource type and report name from what the library said the chip is."""
    family = None
    if static.chip_name.is_ok and static.chip_name.value:
        board = static.board_id.value if static.board_id.is_ok else None
        try:
            family = detect_family(static.chip_name.value, board)
        except ValueError:
            family = None
    rtype = resource_type(family) if family is not None else None
    name = chip_name(rtype, addr.phy_id) if rtype is not None else f"unknown-{addr.phy_id}"
    return {"family": family, "resource_type": rtype, "name": name}


def health_of(dynamic: ChipDynamic) -> tuple[bool | None, bool | None]:
    healthy = dynamic.health.value == 0 if dynamic.health.is_ok else None
    network = dynamic.network_health.value in NETWORK_OK_VALUES if dynamic.network_health.is_ok else None
    return healthy, network


def chip_ok(addr: ChipAddress, static: ChipStatic, dynamic: ChipDynamic, now: float) -> Chip:
    healthy, network = health_of(dynamic)
    return _chip(addr, static, ChipState.OK, healthy, network, dynamic, now)


def chip_discovered(addr: ChipAddress, static: ChipStatic) -> Chip:
    """A chip found but not read yet: nobody may trust its health."""
    return _chip(addr, static, ChipState.UNKNOWN, None, None, None, 0.0)


def _chip(
    addr: ChipAddress,
    static: ChipStatic,
    state: ChipState,
    healthy: bool | None,
    network: bool | None,
    dynamic: ChipDynamic | None,
    now: float,
) -> Chip:
    return Chip(
        logic_id=addr.logic_id,
        phy_id=addr.phy_id,
        card_id=addr.card_id,
        device_id=addr.device_id,
        state=state,
        healthy=healthy,
        network_healthy=network,
        static=static,
        dynamic=dynamic,
        updated_at=now,
        **static_identity(addr, static),
    )


def chip_dropped(prev: Chip, now: float) -> Chip:
    """The card dropped: the chip keeps its identity, reports code 40F84E00 and is unhealthy."""
    codes = codes_of(prev)
    if CARD_DROP_CODE not in codes:
        codes = [*codes, CARD_DROP_CODE]
    dynamic = (prev.dynamic or _codes_only(codes)).model_copy(
        update={"health": Reading[int].error(RC_NOT_READY), "error_codes": Reading[list[str]].ok(codes)}
    )
    return prev.model_copy(
        update={"state": ChipState.CARD_DROP, "healthy": False, "dynamic": dynamic, "updated_at": now}
    )


def chip_unknown(prev: Chip) -> Chip:
    """A call hung or failed: keep the last known values, but nobody may trust the health."""
    return prev.model_copy(update={"state": ChipState.UNKNOWN, "healthy": None})


def _codes_only(codes: list[str]) -> ChipDynamic:
    missing_int = Reading[int].error(RC_NOT_READY)
    return ChipDynamic(
        health=missing_int,
        error_codes=Reading[list[str]].ok(codes),
        network_health=missing_int,
        hbm=Reading.error(RC_NOT_READY),
        temperature_c=missing_int,
        power_w=Reading.error(RC_NOT_READY),
        utilization=Reading.error(RC_NOT_READY),
        processes=Reading.error(RC_NOT_READY),
        boot_status=missing_int,
        vnpus=Reading.error(RC_NOT_READY),
    )


def codes_of(chip: Chip | None) -> list[str]:
    if chip is None or chip.dynamic is None or not chip.dynamic.error_codes.is_ok:
        return []
    return list(chip.dynamic.error_codes.value or [])


def merge_codes(known: list[str], polled: list[str], touched: set[str]) -> list[str]:
    """The codes after a poll: the polled list, except for codes the subscription changed
    after the poll began (`touched`), whose state stays as the subscription left it in
    `known`. Without this, a poll that started just before an occur event would undo it
    and the next poll would report it again: one fault, three events.
    """
    merged = [c for c in polled if c not in touched or c in known]
    merged += [c for c in known if c in touched and c not in merged]
    return merged


def with_codes(chip: Chip, codes: list[str]) -> Chip:
    if chip.dynamic is None:
        return chip.model_copy(update={"dynamic": _codes_only(codes)})
    if chip.dynamic.error_codes.is_ok and chip.dynamic.error_codes.value == codes:
        return chip  # already so (a poll that agrees with the subscription): frozen, nothing to copy
    dynamic = chip.dynamic.model_copy(update={"error_codes": Reading[list[str]].ok(codes)})
    return chip.model_copy(update={"dynamic": dynamic})


def with_ub_ports(chip: Chip, ports: Reading[UbPorts] | None) -> Chip:
    if ports is None or chip.dynamic is None or chip.dynamic.ub_ports == ports:
        return chip
    return chip.model_copy(update={"dynamic": chip.dynamic.model_copy(update={"ub_ports": ports})})


def change_of(chip: Chip) -> ChipChangeData:
    state, healthy, network_healthy, boot = _change_fields(chip)
    return ChipChangeData(state=state, healthy=healthy, network_healthy=network_healthy, boot_status=boot)


def changed(prev: Chip, new: Chip) -> bool:
    """Whether `change_of` differs between the two (without building either: every poll asks)."""
    return _change_fields(prev) != _change_fields(new)


def _change_fields(chip: Chip) -> tuple[ChipState, bool | None, bool | None, int | None]:
    boot = chip.dynamic.boot_status.value if chip.dynamic and chip.dynamic.boot_status.is_ok else None
    return chip.state, chip.healthy, chip.network_healthy, boot


def placeholder_static(code: int) -> ChipStatic:
    err_s, err_i = Reading[str].error(code), Reading[int].error(code)
    return ChipStatic(
        chip_type=err_s,
        chip_name=err_s,
        chip_version=err_s,
        aicore=err_i,
        board_id=err_i,
        product_type=err_s,
        partner_card=err_i,
        numa_node=err_i,
        device_ip=err_s,
        super_pod_id=err_i,
        server_index=err_i,
        super_device_id=err_i,
        main_board_id=err_i,
        rack_id=err_i,
        super_pod_type=err_i,
        scale_type=err_i,
    )


# ---------------------------------------------------------------------- 950 UB / UBoE codes
# The reference derives these in the device plugin (fault_code.go a950HyperPlane*, a950ParameterPlane*;
# ascendcommon.go HandleLost*); ours derives them here, once, for every consumer.

UBOE_PRECISE = {1: UBOE_SUBHEALTH_CODE, 2: UBOE_PRESEPARATE_CODE}  # ParameterPlaneDownProtsNumToPreciseFaultCodeMap
UB_DERIVED_CODES = frozenset(
    {
        UB_PORT_DOWN_CODE,
        UB_SEPARATE_CODE,
        UB_SUBHEALTH_CODE,
        UBOE_PORT_DOWN_CODE,
        UBOE_SUBHEALTH_CODE,
        UBOE_PRESEPARATE_CODE,
    }
)


@dataclass(frozen=True)
class UbChipInput:
    """One 950 chip as the UB rule sees it.

    `raw`: the codes the library lists (without ours); `held`: the UB/UBoE codes we listed last
    time; `ports`: the latest port snapshot, None when never read or unreadable; `lost_ub` /
    `lost_uboe`: whether the lost-event check applies to that plane now (first round, after a
    reset, subscription failed; UBoE also: network unhealthy over 5 min, and a UBoE board).
    """

    raw: frozenset[str]
    held: frozenset[str] = frozenset()
    ports: UbPorts | None = None
    lost_ub: bool = False
    lost_uboe: bool = False


def _plane_down(code: str, raw: frozenset[str], held: frozenset[str], down: int | None, lost: bool) -> bool:
    """Whether the plane's port-down code is listed: the library says so; or we listed it (a recover
    while a port is still down re-occurs, a failed snapshot changes nothing); or an event was lost.
    `down`: the ports of the plane down at the last read, None when never read or unreadable."""
    if code in raw:
        return True
    if code in held:
        return down is None or down > 0
    return lost and down is not None and down > 0


def ub_codes(chips: Mapping[int, UbChipInput]) -> dict[int, list[str]]:
    """The codes each 950 chip gets on top of the library's, recomputed whole every time (ours:
    after every chip was 020000002, a partial recovery brings 020001002 back)."""
    ub_down = {
        logic: _plane_down(UB_PORT_DOWN_CODE, c.raw, c.held, c.ports.ub_down if c.ports else None, c.lost_ub)
        for logic, c in chips.items()
    }
    everyone = bool(chips) and all(ub_down.values())
    out: dict[int, list[str]] = {}
    for logic, chip in chips.items():
        extra: list[str] = []
        if ub_down[logic]:
            if UB_PORT_DOWN_CODE not in chip.raw:
                extra.append(UB_PORT_DOWN_CODE)
            extra.append(UB_SUBHEALTH_CODE if everyone else UB_SEPARATE_CODE)
        bonding = chip.ports.bonding_down if chip.ports else None
        if _plane_down(UBOE_PORT_DOWN_CODE, chip.raw, chip.held, bonding, chip.lost_uboe):
            if UBOE_PORT_DOWN_CODE not in chip.raw:
                extra.append(UBOE_PORT_DOWN_CODE)
            if bonding is None:
                # Unread: keep what we said (the reference skips the event on a failed snapshot).
                extra += [c for c in (UBOE_SUBHEALTH_CODE, UBOE_PRESEPARATE_CODE) if c in chip.held]
            elif (precise := UBOE_PRECISE.get(bonding)) is not None:
                extra.append(precise)
            # 0 or > 2 ports down: the reference drops the library's code too; ours keeps it.
        out[logic] = [c for c in extra if c not in chip.raw]
    return out


# ---------------------------------------------------------------------- 910 RoCE link (lost events)
# The reference synthesizes the link-down code from `hccn_tool -i <phy> -link -g` when the event may have
# been lost (ascendcommon.go queryParameterPlaneStatusWithoutFaultCode, getRoceParameterPlaneStatus).

ROCE_LINK_DOWN = "DOWN"  # NPUNetworkLinkDownStatus
# The library's parameter-plane codes (NETWORK_CODES, the reference's NetworkFaultCodes): any of them
# listed, the event was not lost, and the link is not asked.


@dataclass(frozen=True)
class RoceChipInput:
    """One 910 chip as the RoCE rule sees it.

    `raw`: the codes the library lists (without ours); `held`: whether we list 81078603 now; `link`: the
    link state at the last read ("UP", "DOWN", or whatever else the tool said), None when never read or
    unreadable; `lost`: whether the lost-event check applies now (first round, after a reset,
    subscription failed, network unhealthy over 5 min).
    """

    raw: frozenset[str]
    held: bool = False
    link: str | None = None
    lost: bool = False


def roce_codes(chip: RoceChipInput) -> list[str]:
    """The code a 910 chip gets on top of the library's: 81078603 while its link reads DOWN and its
    event was lost (or we listed it and no read since said otherwise); nothing when the library lists a
    parameter-plane code itself. Ours: a link that cannot be read raises nothing (the reference counts
    it as down)."""
    if chip.raw & NETWORK_CODES:
        return []
    down = None if chip.link is None else int(chip.link == ROCE_LINK_DOWN)
    held = frozenset({LINK_DOWN_CODE}) if chip.held else frozenset()
    return [LINK_DOWN_CODE] if _plane_down(LINK_DOWN_CODE, chip.raw, held, down, chip.lost) else []
