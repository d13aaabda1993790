"""Drill: UB ports on an Atlas 950 super-pod server (a5-superpod-8, issue 25 B). A UB port down on
one chip makes the exporter add 020001002: the chip is SeparateNPU, Unhealthy for the kubelet, in
the verdicts and in the ConfigMap; its recovery restores it. Every chip's UB port down is the
fabric, not the chips: 020000002 each (SubHealthFault), all still schedulable."""

from __future__ import annotations

from tests.e2e.stack import node_stack
from tests.support.waiting import until

NPU = "huawei.com/npu"
CHIP = 3
CHIPS = 8


def port(up: bool) -> dict[str, object]:
    return {"kind": "UB", "up": up}


async def test_ub_port_down_separates_one_chip_and_every_chip_down_is_sub_health() -> None:
    async with node_stack(profile="a5-superpod-8", resource=NPU) as s:
        chip = s.names[CHIP]
        await s.agree(set(), resource=NPU)

        await s.sim("PUT", f"/v1/sim/chips/{CHIP}/ub-ports/0/1", port(up=False))
        await s.agree({chip}, timeout=15, resource=NPU)
        verdict = (await s.verdicts())[chip]
        assert verdict["fault_level"] == "SeparateNPU" and not verdict["schedulable"], verdict

        await s.sim("PUT", f"/v1/sim/chips/{CHIP}/ub-ports/0/1", port(up=True))
        await s.agree(set(), timeout=15, resource=NPU)

        for logic in range(CHIPS):
            await s.sim("PUT", f"/v1/sim/chips/{logic}/ub-ports/0/1", port(up=False))

        async def all_sub_health() -> bool:
            verdicts = await s.verdicts()
            return len(verdicts) == CHIPS and all(v["fault_level"] == "SubHealthFault" for v in verdicts.values())

        await until(all_sub_health, 15, "every chip SubHealthFault")
        await s.agree(set(), timeout=15, resource=NPU)
        assert all(v["schedulable"] for v in (await s.verdicts()).values())


def bonding(up: bool, event: bool = True) -> dict[str, object]:
    return {"kind": "ETH", "up": up, "event": event}


async def test_uboe_bonding_ports_down_set_the_network_level_on_an_atlas_850_server() -> None:
    """Issue 25's UBoE row over the whole node, on a5-8 (an Atlas 850 server, main board 0x25): one bonding
    port down adds 110000002 (network SubHealthFault), two add 110001024 (network PreSeparateNPU); the chip
    stays schedulable, its network is in `-NetworkUnhealthy`; every port back up restores it."""
    async with node_stack(profile="a5-8", resource=NPU) as s:
        logic = 2
        chip = s.names[logic]
        await s.agree(set(), resource=NPU, network=set())

        async def network_level(level: str) -> bool:
            return bool((await s.verdicts())[chip]["network_level"] == level)

        await s.sim("PUT", f"/v1/sim/chips/{logic}/ub-ports/1/0", bonding(up=False))
        await until(lambda: network_level("SubHealthFault"), 15, "network SubHealthFault for one bonding port down")
        await s.agree(set(), timeout=15, resource=NPU, network={chip})
        assert {"81078607", "110000002"} <= set((await s.verdicts())[chip]["codes"])
        await s.sim("PUT", f"/v1/sim/chips/{logic}/ub-ports/1/0", bonding(up=True))
        await until(lambda: network_level("NormalNPU"), 15, "the network back to NormalNPU")
        await s.agree(set(), timeout=15, resource=NPU, network=set())

        # Two ports go down with the driver's plane event only once (the sim raises it per plane, not per port).
        await s.sim("PUT", f"/v1/sim/chips/{logic}/ub-ports/1/1", bonding(up=False, event=False))
        await s.sim("PUT", f"/v1/sim/chips/{logic}/ub-ports/1/0", bonding(up=False, event=False))
        await s.fault(logic, "81078607")
        await until(lambda: network_level("PreSeparateNPU"), 15, "network PreSeparateNPU for two bonding ports down")
        await s.agree(set(), timeout=15, resource=NPU, network={chip})
        verdict = (await s.verdicts())[chip]
        assert {"81078607", "110001024"} <= set(verdict["codes"]) and "110000002" not in verdict["codes"], verdict
        assert verdict["schedulable"] and verdict["fault_level"] == "NormalNPU", verdict

        await s.sim("PUT", f"/v1/sim/chips/{logic}/ub-ports/1/1", bonding(up=True, event=False))
        await s.sim("PUT", f"/v1/sim/chips/{logic}/ub-ports/1/0", bonding(up=True, event=False))
        await s.fault(logic, "81078607", "recover")
        await until(lambda: network_level("NormalNPU"), 15, "the network back to NormalNPU")
        await s.agree(set(), timeout=15, resource=NPU, network=set())
        assert not set((await s.verdicts())[chip]["codes"]) & {"81078607", "110000002", "110001024"}
