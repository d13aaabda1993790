"""Upgrading from the previous release: its database opens, the escalations are re-derived under the
reference's rules, and the verdicts are sane (docs/operations.md, "Upgrading from the previous release").

`previous-release.db` was written by the previous release itself (commit 54e04e6, with
`make_previous_release_db.py`: its sim exporter and fault-manager, offline, policy time x20). It holds:

| chip | what happened | previous release stored |
|---|---|---|
| Ascend910-4 | a link down, still down | chip level PreSeparateNPU, FaultDuration 81078603 |
| Ascend910-5 | five short link flaps | ManuallySeparateNPU by FaultFrequency 81078603 |
| Ascend910-6 | two HBM faults (80E01801) | ManuallySeparateNPU by FaultFrequency 80E01801 |
| Ascend910-7 | its card dropped and came back | FaultAutofill 40F84E00 (RestartNPU) |
| Ascend910-1 | an operator isolated it | ManuallySeparateNPU by the API |

Its timestamps are moved to just before the test runs, so that the history is inside every window as
it was when the file was written.
"""

from __future__ import annotations

import contextlib
import io
import json
import shutil
import sqlite3
import time
from pathlib import Path
from typing import Any

from fault_manager.cli import replay_main
from fault_manager.store import Store
from fault_manager.store.migrations import CURRENT_VERSION

from tests.faultmanager.test_service import deviceinfo, sim, verdicts
from tests.support.exporter import start_exporter
from tests.support.faultmanager import start_fault_manager, wait_ready
from tests.support.waiting import until

FIXTURE = Path(__file__).with_name("previous-release.db")
LINK_DOWN = "81078603"


def aged_copy(tmp: Path, last_event_ago_s: float) -> Path:
    """The fixture, its every `*_ms` column moved so that its last event is `last_event_ago_s` old."""
    db = tmp / "fm.db"
    shutil.copyfile(FIXTURE, db)
    with sqlite3.connect(db) as conn:
        (last,) = conn.execute("SELECT max(raised_at_ms) FROM fault_events").fetchone()
        shift = int((time.time() - last_event_ago_s) * 1000) - last
        tables = [row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
        for table in tables:
            for column in [row[1] for row in conn.execute(f"PRAGMA table_info({table})")]:
                if column.endswith("_ms"):
                    conn.execute(f"UPDATE {table} SET {column} = {column} + ? WHERE {column} IS NOT NULL", (shift,))
    return db


def reasons(data: dict[str, str]) -> dict[str, list[tuple[str, str, str]]]:
    parsed = json.loads(data["UpgradeFaultReason"])
    return {
        chip: sorted((r["fault_code"], r["fault_level"], r["upgrade_type"]) for r in rs) for chip, rs in parsed.items()
    }


def release_events(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    return [e for e in lines if e["reason"] == "EventReleaseUpgradeFault"]


def test_replay_db_shows_what_the_new_rules_would_decide_differently(tmp_path: Path) -> None:
    db = aged_copy(tmp_path, 30.0)
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stderr(err):
        assert replay_main(["--db", str(db)], out) == 0, err.getvalue()
    differ = {line["chip"]: line for line in map(json.loads, out.getvalue().splitlines())}
    # The link down is no longer a chip-level fault; the flaps would not have isolated the chip; a card
    # drop makes no reason. The HBM isolation and the operator's are the same under both releases.
    assert set(differ) == {"Ascend910-4", "Ascend910-5", "Ascend910-7"}, differ
    assert differ["Ascend910-4"]["stored"]["level"] == "PreSeparateNPU"
    assert (differ["Ascend910-4"]["replayed"]["level"], differ["Ascend910-4"]["replayed"]["network_level"]) == (
        "NormalNPU",
        "PreSeparateNPU",
    )
    assert differ["Ascend910-5"]["stored"]["manually_separated"] is True
    assert differ["Ascend910-5"]["replayed"]["manually_separated"] is False


async def test_a_previous_release_database_opens_and_its_verdicts_are_sane(tmp_path: Path) -> None:
    db = aged_copy(tmp_path, 30.0)
    exporter = start_exporter(tmp_path / "exporter")
    # The link is still down on the node (a new exporter run: its state is what the hardware says now).
    await sim(exporter, "/v1/sim/chips/0/faults", {"code": LINK_DOWN, "severity": 1})
    fm = start_fault_manager(tmp_path / "fm", exporter, "--time-scale", "20", db=db)
    try:
        await wait_ready(fm)

        async def settled() -> dict[str, Any]:
            v = await verdicts(fm)
            data = await deviceinfo(fm)
            return {"verdicts": v, "data": data} if "Ascend910-1" in reasons(data) else {}

        await until(settled, 15, "the ConfigMap written by the new release")
        v = await verdicts(fm)
        # A link down: the network is PreSeparateNPU, the chip itself Healthy for the kubelet.
        four = v["Ascend910-4"]
        assert (four["fault_level"], four["network_level"], four["schedulable"]) == (
            "NormalNPU",
            "PreSeparateNPU",
            True,
        )
        # Isolations are kept: the operator's, the HBM rule's (still holding), and the flaps' (no rule holds
        # it now: a FaultAutofill reason does, released after the longest ReleaseTimeWindow).
        for chip in ("Ascend910-1", "Ascend910-5", "Ascend910-6"):
            assert (v[chip]["fault_level"], v[chip]["manually_separated"], v[chip]["schedulable"]) == (
                "ManuallySeparateNPU",
                True,
                False,
            ), chip
        assert (v["Ascend910-7"]["fault_level"], v["Ascend910-7"]["schedulable"]) == ("NormalNPU", True)
        data = await deviceinfo(fm)
        autofill = [("AutofillFaultCode", "ManuallySeparateNPU", "FaultAutofill")]
        assert reasons(data) == {
            "Ascend910-1": autofill,
            "Ascend910-4": [("81078603", "PreSeparateNPU", "FaultDuration")],
            "Ascend910-5": autofill,
            "Ascend910-6": [("80e01801", "ManuallySeparateNPU", "FaultFrequency")],
        }
        assert set(data["ManuallySeparateNPU"].split(",")) == {"Ascend910-1", "Ascend910-5", "Ascend910-6"}
        # What no rule holds any more is released, and announced as the reference announces it (one Event
        # per ConfigMap write that removed reasons: one or two here).
        events_file = tmp_path / "fm" / "state" / "kube" / "events.jsonl"

        def released() -> dict[str, list[tuple[str, str]]]:
            found: dict[str, list[tuple[str, str]]] = {}
            for event in release_events(events_file):
                for chip, rs in json.loads(event["message"]).items():
                    found.setdefault(chip, []).extend((r["fault_code"], r["upgrade_type"]) for r in rs)
            return found

        expected = {"Ascend910-5": [("81078603", "FaultFrequency")], "Ascend910-7": [("40f84e00", "FaultAutofill")]}
        await until(lambda: released() == expected, 10, "the EventReleaseUpgradeFault Events")
        with Store(db) as store:
            assert store.db.schema_version() == CURRENT_VERSION
            before = {
                r.chip: r.upgrade_time_ms
                for r in store.isolations.escalations(True)
                if r.upgrade_type == "FaultAutofill"
            }
        assert set(before) == {"Ascend910-1", "Ascend910-5"}

        # A restart keeps the autofill reasons with their times: restarts do not postpone their release.
        assert fm.stop() == 0
        fm = start_fault_manager(tmp_path / "fm", exporter, "--time-scale", "20", db=db)
        await wait_ready(fm)
        await until(settled, 15, "the ConfigMap after a restart")
        with Store(db) as store:
            after = {
                r.chip: r.upgrade_time_ms
                for r in store.isolations.escalations(True)
                if r.upgrade_type == "FaultAutofill"
            }
        assert after == before
        assert released() == expected, "nothing more released by the restart"
    finally:
        fm.stop()
        exporter.stop()


def test_replay_db_replays_an_operators_release_at_its_time(tmp_path: Path) -> None:
    """Ascend910-6 (isolated by its HBM rule) released by an administrator after its faults: replayed,
    the release restarts its frequency window, so the replay agrees with the node (not isolated)."""
    db = aged_copy(tmp_path, 30.0)
    with sqlite3.connect(db) as conn:
        (at,) = conn.execute("SELECT max(raised_at_ms) + 1000 FROM fault_events").fetchone()
        conn.execute("DELETE FROM manual_chips WHERE chip = 'Ascend910-6'")
        conn.execute(
            "INSERT INTO manual_audit (chip, separated, set_by, at_ms) VALUES ('Ascend910-6', 0, 'administrator', ?)",
            (at,),
        )
        conn.execute(
            "UPDATE escalations SET released_at_ms = ?, release_reason = 'administrator' WHERE chip = 'Ascend910-6'",
            (at,),
        )
        conn.execute("UPDATE chip_states SET level = 'NormalNPU' WHERE chip = 'Ascend910-6'")
    out = io.StringIO()
    assert replay_main(["--db", str(db)], out) == 0
    differ = {line["chip"] for line in map(json.loads, out.getvalue().splitlines())}
    assert "Ascend910-6" not in differ and "Ascend910-5" in differ
