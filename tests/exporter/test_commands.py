"""Resets, vNPUs, tokens and bad input on the exporter's mutating calls."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support.exporter import ExporterProc, auth, running_exporter
from tests.support.waiting import until, until_sync


async def wait_job(client: httpx.AsyncClient, job_id: str) -> dict[str, Any]:
    async def finished() -> dict[str, Any] | None:
        job: dict[str, Any] = (await client.get(f"/v1/jobs/{job_id}")).json()
        return job if job["state"] in ("succeeded", "failed") else None

    return await until(finished, 20, f"job {job_id} to finish")


async def dynamic(client: httpx.AsyncClient, logic_id: int, reading: str) -> Any:
    """The value of one of a chip's dynamic readings, as the exporter's last poll left it."""
    return (await client.get(f"/v1/chips/{logic_id}")).json()["dynamic"][reading]["value"]


RESET_ARGS = ("--time-scale", "20", "--reset-poll-period", "0.05", "--reset-timeout", "5")


async def test_reset_refused_while_processes_run_then_succeeds(tmp_path: Path) -> None:
    with running_exporter(tmp_path, *RESET_ARGS) as ep:
        async with ep.client() as client:
            await client.put(
                "/v1/sim/chips/0/processes",
                json={"processes": [{"pid": 4242, "memory_bytes": 1 << 30}]},
                headers=auth("sim"),
            )
            await until(lambda: dynamic(client, 0, "processes"), what="a poll that sees the process on chip 0")
            refused = await client.post("/v1/chips/3/reset", headers=auth("reset"))
            # 910B with HCCS: every chip is in one reset group, so a process on chip 0 blocks chip 3.
            assert refused.status_code == 409
            assert "4242" in refused.json()["detail"]
            await client.put("/v1/sim/chips/0/processes", json={"processes": []}, headers=auth("sim"))
            await client.post("/v1/sim/chips/3/faults", json={"code": "80E18005"}, headers=auth("sim"))

            async def idle_with_the_fault() -> bool:
                processes, codes = await dynamic(client, 0, "processes"), await dynamic(client, 3, "error_codes")
                return processes == [] and "80E18005" in codes

            await until(idle_with_the_fault, what="a poll that sees chip 0 idle and chip 3's fault")
            accepted = await client.post("/v1/chips/3/reset", headers=auth("reset"))
            assert accepted.status_code == 202, accepted.text
            job = accepted.json()
            assert sorted(job["logic_ids"]) == list(range(8)) and job["channel"] == "inband"
            again = await client.post("/v1/chips/5/reset", headers=auth("reset"))
            assert again.status_code == 409 and "already being reset" in again.json()["detail"]
            done = await wait_job(client, job["id"])
            assert done["state"] == "succeeded", done
            assert set(done["boot_status"].values()) == {16}

            async def cleared() -> bool:
                return not await dynamic(client, 3, "error_codes")

            # Nothing recovers the fault: only the reset can clear the chip's codes.
            await until(cleared, what="a poll that sees chip 3's codes cleared by the reset")


@pytest.mark.parametrize(("mode", "code"), [("error", -8015), ("stuck", -8006)])
async def test_failing_reset_ends_with_the_library_error(tmp_path: Path, mode: str, code: int) -> None:
    with running_exporter(tmp_path, *RESET_ARGS, profile="910a-8") as ep:
        async with ep.client() as client:
            r = await client.post("/v1/sim/chips/1/reset-failure", json={"mode": mode}, headers=auth("sim"))
            assert r.status_code == 204
            job = (await client.post("/v1/chips/1/reset", headers=auth("reset"))).json()
            chips = {c["logic_id"]: c for c in (await client.get("/v1/chips")).json()["chips"]}
            ring = sorted(i for i, c in chips.items() if c["phy_id"] // 4 == chips[1]["phy_id"] // 4)
            assert sorted(job["logic_ids"]) == ring  # a 910A ring of four
            done = await wait_job(client, job["id"])
            assert done["state"] == "failed"
            assert done["error"]["code"] == code, done


async def test_vnpu_create_destroy_and_template_checks(exporter: ExporterProc) -> None:
    async with exporter.client() as client:
        bad = await client.post("/v1/chips/0/vnpus", json={"template": "vir99"}, headers=auth("vnpu"))
        assert bad.status_code == 422 and "unknown vNPU template" in bad.json()["detail"]
        wrong_family = await client.post("/v1/chips/0/vnpus", json={"template": "vir16"}, headers=auth("vnpu"))
        assert wrong_family.status_code == 422 and "not allowed" in wrong_family.json()["detail"]
        created = await client.post("/v1/chips/0/vnpus", json={"template": "vir05_1c_16g"}, headers=auth("vnpu"))
        assert created.status_code == 201, created.text
        vnpu = created.json()
        assert (vnpu["suffix"], vnpu["aicore"]) == ("5c.1cpu.16g", 5)
        listed = await until(lambda: dynamic(client, 0, "vnpus"), what="a poll that lists the vNPU")
        assert [v["vdev_id"] for v in listed] == [vnpu["vdev_id"]]
        gone = await client.delete(f"/v1/chips/0/vnpus?vdev_id={vnpu['vdev_id']}", headers=auth("vnpu"))
        assert gone.status_code == 204
        missing = await client.delete(f"/v1/chips/0/vnpus?vdev_id={vnpu['vdev_id']}", headers=auth("vnpu"))
        assert missing.status_code == 404


@pytest.mark.parametrize(
    ("method", "path", "body", "token", "status"),
    [
        ("POST", "/v1/chips/0/reset", None, None, 401),
        ("POST", "/v1/chips/0/reset", None, "wrong-token-0000000000000", 401),
        ("POST", "/v1/chips/0/reset", None, "vnpu", 403),
        ("POST", "/v1/chips/0/vnpus", {"template": "vir05_1c_16g"}, "reset", 403),
        ("POST", "/v1/sim/chips/0/faults", {"code": "80E01801"}, "reset", 403),
        ("POST", "/v1/chips/99/reset", None, "reset", 404),
        ("POST", "/v1/chips/99/vnpus", {"template": "vir05_1c_16g"}, "vnpu", 404),
        ("POST", "/v1/sim/chips/99/faults", {"code": "80E01801"}, "sim", 404),
        ("GET", "/v1/jobs/nope", None, None, 404),
        ("POST", "/v1/chips/0/vnpus", {"template": ""}, "vnpu", 422),
        ("POST", "/v1/chips/0/vnpus", {"tmpl": "vir05_1c_16g"}, "vnpu", 422),
        ("POST", "/v1/chips/0/vnpus", "not json", "vnpu", 422),
        ("POST", "/v1/sim/chips/0/faults", {"code": "XYZ"}, "sim", 422),
        ("POST", "/v1/sim/chips/0/faults", {"code": "1234567890"}, "sim", 422),
        ("POST", "/v1/sim/chips/0/bursts", {"code": "80E01801", "count": 10001}, "sim", 422),
        ("POST", "/v1/sim/chips/0/faults", {"code": "80E01801", "severity": 9}, "sim", 422),
        ("POST", "/v1/chips/0/reset", {"channel": "sideways"}, "reset", 422),
        ("POST", "/v1/sim/switch-faults", {"alarm_id": 1}, "sim", 422),  # 910b-8 has no switch
        ("DELETE", "/v1/chips/0/vnpus", None, "vnpu", 422),  # vdev_id missing
    ],
)
async def test_bad_requests_are_refused_and_change_nothing(
    exporter: ExporterProc, method: str, path: str, body: object, token: str | None, status: int
) -> None:
    headers = {}
    if token in ("reset", "vnpu", "sim"):
        headers = auth(token)
    elif token is not None:
        headers = {"Authorization": f"Bearer {token}"}
    async with exporter.client() as client:
        before = (await client.get("/v1/chips")).json()
        kwargs: dict[str, Any] = {"headers": headers}
        if isinstance(body, str):
            kwargs["content"] = body
            headers["Content-Type"] = "application/json"
        elif body is not None:
            kwargs["json"] = body
        r = await client.request(method, path, **kwargs)
        assert r.status_code == status, r.text
        assert r.json()["detail"]
        after = (await client.get("/v1/chips")).json()

    def strip(chips: dict[str, Any]) -> list[tuple[Any, ...]]:
        return [(c["logic_id"], c["dynamic"]["error_codes"], c["dynamic"]["vnpus"]) for c in chips["chips"]]

    assert strip(before) == strip(after)
    assert before["last_event_id"] == after["last_event_id"], "a refused call publishes nothing"


def test_invalid_settings_exit_2_with_a_message(tmp_path: Path) -> None:
    import subprocess
    import sys

    r = subprocess.run(
        [sys.executable, "-m", "dcmi_exporter.cli", "--time-scale", "-1", "--socket", str(tmp_path / "s")],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert r.returncode == 2
    assert "time_scale" in r.stderr


def test_scenario_runs_and_a_bad_scenario_is_refused_at_start(tmp_path: Path) -> None:
    import subprocess
    import sys

    bad = tmp_path / "bad.yaml"
    bad.write_text("name: bad\nsteps:\n  - {at: 0, action: explode, chip: 0}\n")
    r = subprocess.run(
        [sys.executable, "-m", "dcmi_exporter.cli", "--scenario", str(bad), "--socket", str(tmp_path / "s")],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert r.returncode == 2
    assert "steps[0]" in r.stderr + r.stdout

    good = tmp_path / "good.yaml"
    good.write_text("name: good\nsteps:\n  - {at: 0.5, action: inject, chip: 2, code: '80E01801'}\n")
    with running_exporter(tmp_path / "run", "--scenario", str(good)) as ep, ep.sync_client() as client:

        def codes() -> list[str]:
            return list(client.get("/v1/chips/2").json()["dynamic"]["error_codes"]["value"])

        until_sync(lambda: codes() == ["80E01801"], what="the scenario's fault")
