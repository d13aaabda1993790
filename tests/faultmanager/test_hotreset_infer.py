"""Inference hot reset (the reference's -hotReset=0, `--hot-reset-mode 0`) over the simulator.

An idle faulty inference chip is reset with no job ConfigMap: the chip alone on a 910B inference
node (Atlas 300I A2, no HCCS), the whole card on an Atlas 300I Duo, whose cardmate is unschedulable
meanwhile (setHealthyIfDuoCard). Each reset costs the faulty chip one token of its bucket.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from tests.faultmanager.test_hotreset import RESTART_NPU, SCALE, finished_attempt, reset_token, resets
from tests.faultmanager.test_service import sim, verdicts
from tests.support.exporter import ExporterProc, auth, start_exporter
from tests.support.fake_apiserver import FakeApiServer, write_kubeconfig
from tests.support.faultmanager import FaultManagerProc, start_fault_manager, wait_ready
from tests.support.waiting import until


def start_infer_reset(tmp_path: Path, exporter: ExporterProc, *extra: str, kube: str = "offline") -> FaultManagerProc:
    token = reset_token(tmp_path / "fm-token")
    return start_fault_manager(
        tmp_path / "fm", exporter, "--hot-reset-mode", "0", "--token-file", str(token), "--time-scale", SCALE,
        *extra, kube=kube,
    )  # fmt: skip


async def chip(exporter: ExporterProc, logic_id: int) -> dict[str, Any]:
    async with exporter.client() as client:
        return dict((await client.get(f"/v1/chips/{logic_id}")).json())


async def processes(exporter: ExporterProc, logic_id: int, procs: list[dict[str, int]]) -> None:
    async with exporter.client() as client:
        r = await client.put(f"/v1/sim/chips/{logic_id}/processes", json={"processes": procs}, headers=auth("sim"))
        assert r.status_code == 204, r.text


async def test_infer_910b_idle_faulty_chip_is_reset_alone_once_no_pod_holds_it(tmp_path: Path) -> None:
    with FakeApiServer() as api:
        exporter = start_exporter(
            tmp_path / "exporter", "--time-scale", SCALE, "--reset-poll-period", "0.05", profile="910b-infer-4"
        )
        faulty = await chip(exporter, 2)
        name = faulty["name"]
        # An inference service's pod (no Volcano job, no reset ConfigMap) holds the chip.
        api.add_pod("infer-0", "serving", node="node-a", phase="Running", annotations={"huawei.com/AscendReal": name})
        kubeconfig = str(write_kubeconfig(tmp_path / "kc", api.url))
        fm = start_infer_reset(tmp_path, exporter, "--kubeconfig", kubeconfig, kube="api")
        try:
            await wait_ready(fm)
            await sim(exporter, "/v1/sim/chips/2/faults", {"code": RESTART_NPU})

            async def restart_npu() -> bool:
                return (await verdicts(fm))[name]["fault_level"] == "RestartNPU"

            await until(restart_npu, what=f"{name}'s RestartNPU verdict")
            # Held by a pod, the chip is not reset however long it is idle (3 s = the 60 s idle period).
            await asyncio.sleep(4.0)
            assert (await resets(fm))["attempts"] == []
            assert "pod serving/infer-0 uses" in fm.log_path.read_text()

            api.remove("pods", "infer-0", "serving")
            attempt = await finished_attempt(fm, 20)
            assert attempt["outcome"] == "succeeded", attempt
            assert attempt["chips"] == [name], "no HCCS: the chip alone"
            assert attempt["channel"] == "auto"
            view = await resets(fm)
            assert view["tokens"][name] == 2 and all(n == 3 for c, n in view["tokens"].items() if c != name)

            async def healed() -> bool:
                v = (await verdicts(fm))[name]
                return v["fault_level"] == "NormalNPU" and bool(v["schedulable"])

            await until(healed, 15, f"{name} healthy again")
            # No job took part: hot reset wrote no ConfigMap at all.
            assert not any(r.method in ("POST", "PUT", "PATCH") and "/configmaps/reset-config" in r.path
                           for r in api.requests)  # fmt: skip
            assert not [cm for cm in api.objects("configmaps") if cm["metadata"]["name"].startswith("reset-config-")]
        finally:
            fm.stop()
            exporter.stop()


async def test_infer_duo_card_is_reset_whole_and_its_cardmate_is_unschedulable_meanwhile(tmp_path: Path) -> None:
    exporter = start_exporter(
        tmp_path / "exporter", "--time-scale", SCALE, "--reset-poll-period", "0.05", profile="310p-duo-4"
    )
    fm = start_infer_reset(tmp_path, exporter)
    try:
        await wait_ready(fm)
        card = [await chip(exporter, n) for n in range(4)]
        faulty, mate, other = card[1], card[0], card[2:]
        assert faulty["card_id"] == mate["card_id"] and all(c["card_id"] != faulty["card_id"] for c in other)
        # A process on the cardmate holds the card's reset back while the health rule is looked at.
        await processes(exporter, 0, [{"pid": 77}])
        await sim(exporter, "/v1/sim/chips/1/faults", {"code": RESTART_NPU})

        async def mate_unschedulable() -> dict[str, Any] | None:
            v = await verdicts(fm)
            if v[faulty["name"]]["fault_level"] == "RestartNPU" and v[mate["name"]]["schedulable"] is False:
                return v
            return None

        seen = await until(mate_unschedulable, what="the Duo cardmate unschedulable with the faulty chip")
        # setHealthyIfDuoCard: only the health of the cardmate changes, and the reason says why.
        assert seen[mate["name"]]["fault_level"] == "NormalNPU" and seen[mate["name"]]["codes"] == []
        assert seen[mate["name"]]["reason"] == "DuoCard" and seen[mate["name"]]["resetting"] is False
        # The other card is left alone.
        assert all(seen[c["name"]]["schedulable"] is True for c in other)
        await asyncio.sleep(4.0)  # an absence, so a time: past the idle period, a process still runs on the card
        assert (await resets(fm))["attempts"] == []
        await processes(exporter, 0, [])

        attempt = await finished_attempt(fm, 20)
        assert attempt["outcome"] == "succeeded", attempt
        assert attempt["chips"] == [mate["name"], faulty["name"]], "the Duo card: both its chips at once"
        view = await resets(fm)
        # The faulty chip pays; its cardmate and the other card keep their tokens.
        assert view["tokens"][faulty["name"]] == 2
        assert all(view["tokens"][c["name"]] == 3 for c in (mate, *other))

        async def card_healthy() -> bool:
            v = await verdicts(fm)
            return all(v[c["name"]]["schedulable"] and v[c["name"]]["reason"] == "Normal" for c in card)

        await until(card_healthy, 15, "both chips of the card schedulable again")
    finally:
        fm.stop()
        exporter.stop()


async def test_infer_mode_and_hot_reset_flag_together_are_refused(tmp_path: Path) -> None:
    exporter = start_exporter(tmp_path / "exporter", profile="910b-infer-4")
    token = reset_token(tmp_path / "fm-token")
    fm = start_fault_manager(
        tmp_path / "fm", exporter, "--hot-reset", "--hot-reset-mode", "0", "--token-file", str(token)
    )
    try:
        assert fm.proc.wait(timeout=20) != 0
        assert "contradicts --hot-reset-mode 0" in fm.log_path.read_text()
    finally:
        fm.stop()
        exporter.stop()
