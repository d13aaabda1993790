"""Drills: a card that drops off the bus, and a library call that hangs on one chip."""

from __future__ import annotations

import json

from tests.e2e.stack import R, Stack, node_stack
from tests.support.waiting import until

CARD_DROP = "40F84E00"
RESTART_NPU = "8C1FA006"


async def chip(s: Stack, logic_id: int) -> dict[str, object]:
    async with s.exporter.client() as client:
        return dict((await client.get(f"/v1/chips/{logic_id}")).json())


async def test_card_drop_and_return() -> None:
    async with node_stack() as s:
        await s.agree(set())
        chips = await s.chips()
        card = next(c["card_id"] for c in chips if c["logic_id"] == 4)
        dropped = {c["name"] for c in chips if c["card_id"] == card}
        assert s.names[4] in dropped
        await s.sim("PUT", f"/v1/sim/cards/{card}/dropped", {"dropped": True})
        await s.agree(dropped)
        info = s.device_info()
        assert info is not None
        assert {f["npu_name"] for f in info.faults if f["fault_code"] == CARD_DROP} == dropped, info.faults

        # The reference makes FaultAutofill reasons only for isolations it finds without one, not for a drop.
        info = s.device_info()
        assert info is not None
        assert json.loads(info.raw["UpgradeFaultReason"]) == {}, info.raw["UpgradeFaultReason"]
        verdicts = await s.verdicts()
        assert all(CARD_DROP in verdicts[c]["codes"] for c in dropped), verdicts
        # The other chips keep working: a fault elsewhere still shows beside the dropped card.
        other = next(logic for logic, n in s.names.items() if n not in dropped)
        await s.fault(other, RESTART_NPU)
        await s.agree(dropped | {s.names[other]})
        await s.fault(other, RESTART_NPU, "recover")

        await s.sim("PUT", f"/v1/sim/cards/{card}/dropped", {"dropped": False})
        await s.agree(set(), timeout=15)
        info = s.device_info()
        assert info is not None
        assert info.faults == [], info.faults
        assert info.healthy == set(s.names.values()), info.raw["DeviceInfoCfg"]
        await s.no_event_lost()
        assert s.kubelet.registration_count(R) == 1


async def test_a_hanging_library_call_fails_only_its_chip() -> None:
    async with node_stack() as s:
        await s.agree(set())
        hung = s.names[6]
        await s.sim("PUT", "/v1/sim/chips/6/hang", {"seconds": 3600})
        await until(lambda: _state_is(s, 6, "unknown"), 5, "the hung chip reported unknown")
        await s.agree({hung})
        # The other chips are still read and their faults still reach every view.
        await s.fault(2, RESTART_NPU)
        await s.agree({hung, s.names[2]})
        await s.fault(2, RESTART_NPU, "recover")
        await s.agree({hung})

        await s.sim("DELETE", "/v1/sim/chips/6/hang", {})
        await until(lambda: _state_is(s, 6, "ok"), 10, "the chip read again")
        await s.agree(set(), timeout=15)
        await s.no_event_lost()
        assert s.kubelet.registration_count(R) == 1


async def _state_is(s: Stack, logic_id: int, state: str) -> bool:
    return (await chip(s, logic_id))["state"] == state
