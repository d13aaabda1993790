"""Drill: inference hot reset (`--hot-reset-mode 0`, the reference's -hotReset=0) on an Atlas 300I Duo node.

A RestartNPU fault on one chip of a Duo card takes both chips of the card away from the kubelet and
the ConfigMap (setHealthyIfDuoCard); once no process runs on the card it is reset whole, with no job
ConfigMap, for one token of the faulty chip, and both chips come back everywhere.
"""

from __future__ import annotations

from typing import Any

from tests.e2e.stack import node_stack

RESTART_NPU = "8C1FA006"
R310P = "huawei.com/Ascend310P"


async def test_duo_card_reset_whole_with_no_job_configmap() -> None:
    async with node_stack(profile="310p-duo-4", fm_args=("--hot-reset-mode", "0"), resource=R310P) as s:
        chips = {c["logic_id"]: c for c in await s.chips()}
        faulty, mate = chips[1], chips[0]
        assert faulty["card_id"] == mate["card_id"]
        card = {faulty["name"], mate["name"]}
        await s.agree(set(), resource=R310P)
        await s.processes(0, [4242])  # a process on the cardmate holds the card's reset back

        await s.fault(1, RESTART_NPU)
        # Both chips of the card are unusable in every view. The `-Fault` list has the code on the faulty
        # chip alone; the cardmate, Unhealthy for the kubelet, gets its CardUnhealthy entry with no code,
        # as the reference's getDeviceFaults writes one for any Unhealthy chip.
        await s.agree(card, resource=R310P)
        info = s.device_info(R310P)
        assert info is not None
        entries = {f["npu_name"]: (f["fault_type"], f["fault_code"], f["fault_level"]) for f in info.faults}
        assert entries == {
            faulty["name"]: ("CardUnhealthy", RESTART_NPU, "RestartNPU"),
            mate["name"]: ("CardUnhealthy", "", "NormalNPU"),
        }
        async with s.fm.client() as client:
            assert (await client.get("/v1/resets")).json()["attempts"] == []

        await s.processes(0, [])
        await s.agree(set(), timeout=20, resource=R310P)
        async with s.fm.client() as client:
            view: dict[str, Any] = (await client.get("/v1/resets")).json()
        [attempt] = view["attempts"]
        assert attempt["outcome"] == "succeeded" and set(attempt["chips"]) == card, attempt
        assert view["tokens"][faulty["name"]] == 2 and view["tokens"][mate["name"]] == 3
        assert (await s.verdicts())[faulty["name"]]["fault_level"] == "NormalNPU"
        # No job took part: no reset ConfigMap was written.
        assert not [cm for cm in s.api.objects("configmaps") if cm["metadata"]["name"].startswith("reset-config-")]
        assert await s.no_event_lost() >= 2
