"""Drill: a 16-chip Atlas A3 node with static vNPUs, a chip fault and a switch fault."""

from __future__ import annotations

import json
from typing import Any

from tests.e2e.stack import R, node_stack
from tests.support.exporter import ExporterProc, auth
from tests.support.fake_apiserver import FakeApiServer
from tests.support.waiting import until

RESTART_NPU = "8C1FA006"
VNPU = "huawei.com/Ascend910-6c.1cpu.16g"
CUT = range(8)  # logic ids cut into two vNPUs each; chips 8..15 stay whole


async def test_a3_node_with_vnpus() -> None:
    vnpus: dict[int, list[dict[str, Any]]] = {}
    phy: dict[int, int] = {}

    async def cut_chips(api: FakeApiServer, exporter: ExporterProc) -> None:
        async with exporter.client() as client:
            for chip in (await client.get("/v1/chips")).json()["chips"]:
                phy[chip["logic_id"]] = chip["phy_id"]
            for logic in CUT:
                for _ in range(2):
                    r = await client.post(f"/v1/chips/{logic}/vnpus", json={"template": "vir06_1c_16g"},
                                          headers=auth("vnpu"))  # fmt: skip
                    assert r.status_code == 201, r.text
                    vnpus.setdefault(logic, []).append(r.json())

    def vnpu_ids(logic: int) -> set[str]:
        return {f"Ascend910-6c.1cpu.16g-{v['vdev_id']}-{phy[logic]}" for v in vnpus[logic]}

    async with node_stack(profile="a3-16", prepare=cut_chips, every_chip_listed=False) as s:
        assert len(s.names) == 16
        whole = {s.names[logic] for logic in range(8, 16)}
        every_vnpu = set().union(*(vnpu_ids(logic) for logic in CUT))
        await s.kubelet.wait_for(R, lambda m: m.healthy == whole, timeout=10)
        await s.kubelet.wait_for(VNPU, lambda m: m.healthy == every_vnpu, timeout=10)
        assert len(every_vnpu) == 16
        await s.agree(set(), resource=R)
        info = s.device_info()
        assert info is not None and "SuperPodID" in json.loads(info.raw["DeviceInfoCfg"])

        # A fault on a cut chip: both its vNPUs turn Unhealthy, the chip is unusable everywhere.
        await s.fault(3, RESTART_NPU)
        await s.kubelet.wait_for(VNPU, lambda m: m.unhealthy == vnpu_ids(3), timeout=5)
        assert (await s.views())["verdicts"] == {s.names[3]}
        await until(lambda: (i := s.device_info()) and s.names[3] in i.unhealthy, 5, "the chip in -Unhealthy")
        # A fault on a whole chip shows on the physical resource.
        await s.fault(12, RESTART_NPU)
        await s.kubelet.wait_for(R, lambda m: m.unhealthy == {s.names[12]}, timeout=5)

        # A switch fault (SubHealth) makes the node SubHealthy in SwitchInfoCfg and no chip unusable.
        await s.sim("POST", "/v1/sim/switch-faults", {"alarm_id": 0x00F103B6, "fault_id": 155908, "switch_port_id": 4})
        await until(lambda: _switch(s).get("NodeStatus") == "SubHealthy", 5, "SwitchInfoCfg SubHealthy")

        # A vNPU is allocated as the Ascend Docker Runtime expects it.
        [healthy_vnpu] = sorted(vnpu_ids(0))[:1]
        resp = await s.kubelet.allocate(VNPU, [[healthy_vnpu]])
        envs = dict(resp.container_responses[0].envs)
        assert envs["ASCEND_RUNTIME_OPTIONS"] == "VIRTUAL"
        assert envs["ASCEND_VISIBLE_DEVICES"] == healthy_vnpu.split("-")[2]

        # Everything recovers.
        await s.fault(3, RESTART_NPU, "recover")
        await s.fault(12, RESTART_NPU, "recover")
        await s.sim("POST", "/v1/sim/switch-faults", {"alarm_id": 0x00F103B6, "fault_id": 155908, "switch_port_id": 4,
                                                      "assertion": "recover"})  # fmt: skip
        await s.kubelet.wait_for(VNPU, lambda m: m.healthy == every_vnpu, timeout=5)
        await s.agree(set())
        await until(lambda: _switch(s).get("NodeStatus") == "Healthy", 5, "SwitchInfoCfg Healthy")
        assert await s.no_event_lost() == 4
        assert s.kubelet.registration_count(R) == 1 and s.kubelet.registration_count(VNPU) == 1


def _switch(s: Any) -> dict[str, Any]:
    info = s.device_info()
    return dict(json.loads(info.raw["SwitchInfoCfg"])) if info and "SwitchInfoCfg" in info.raw else {}
