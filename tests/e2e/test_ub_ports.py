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
