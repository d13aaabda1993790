"""Write the fixture `previous-release.db`: a fault-manager database written by the previous release.

Not a test. Run it with the previous release's code, from a worktree of that commit (its own venv):

    git worktree add /tmp/old 54e04e6 && (cd /tmp/old && ./dev setup)
    cd /tmp/old && .venv/bin/python /work/main/tests/upgrade/make_previous_release_db.py \
        /work/main/tests/upgrade/previous-release.db

It runs that release's sim exporter and fault-manager (offline, policy time x20) and drives them into
the states the upgrade has to handle. `test_upgrade.py` says what each chip holds.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, os.getcwd())  # the worktree's tests.support, i.e. that release's helpers

from tests.faultmanager.test_service import sim, verdicts
from tests.support.exporter import start_exporter
from tests.support.faultmanager import start_fault_manager, wait_ready

LINK_DOWN = "81078603"
HBM = "80E01801"  # 2 a day -> ManuallySeparateNPU (FaultFrequency)


async def main(out: Path) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        exporter = start_exporter(Path(tmp) / "exporter")
        fm = start_fault_manager(Path(tmp) / "fm", exporter, "--time-scale", "20")
        try:
            await wait_ready(fm)
            async with exporter.client() as client:
                chips = {c["logic_id"]: c for c in (await client.get("/v1/chips")).json()["chips"]}
            name = {logic: c["name"] for logic, c in chips.items()}
            # Chip 0: a link down that lasts (old rules: chip level PreSeparateNPU by FaultDuration).
            await sim(exporter, "/v1/sim/chips/0/faults", {"code": LINK_DOWN, "severity": 1})
            # Chip 1: five short link flaps (old rules: each occur counts; ManuallySeparateNPU).
            for _ in range(5):
                await sim(exporter, "/v1/sim/chips/1/faults", {"code": LINK_DOWN, "severity": 1})
                await asyncio.sleep(0.05)
                await sim(
                    exporter, "/v1/sim/chips/1/faults", {"code": LINK_DOWN, "severity": 1, "assertion": "recover"}
                )
                await asyncio.sleep(0.05)
            # Chip 2: two HBM faults in a day (isolated under either release's rules).
            for assertion in ("occur", "recover", "occur", "recover"):
                await sim(exporter, "/v1/sim/chips/2/faults", {"code": HBM, "assertion": assertion})
            # Chip 3's card drops and comes back (old release: a FaultAutofill reason 40F84E00).
            card = chips[3]["card_id"]
            async with exporter.client() as client:
                from tests.support.exporter import auth

                for dropped in (True, False):
                    r = await client.put(
                        f"/v1/sim/cards/{card}/dropped", json={"dropped": dropped}, headers=auth("sim")
                    )
                    assert r.status_code == 204, r.text
                    await asyncio.sleep(1.5)
            # Chip 5: isolated by an operator.
            async with fm.client() as client:
                r = await client.post(f"/v1/chips/{name[5]}/separation")
                assert r.status_code == 200, r.text
            await asyncio.sleep(2.0)  # past chip 0's 20 s of policy time, and every write
            state = await verdicts(fm)
            for logic in (0, 1, 2, 3, 5):
                v = state[name[logic]]
                print(name[logic], v["fault_level"], v["manually_separated"], v["codes"])
        finally:
            fm.stop()
            exporter.stop()
        shutil.copyfile(fm.db, out)
        print("wrote", out)


if __name__ == "__main__":
    asyncio.run(main(Path(sys.argv[1])))
