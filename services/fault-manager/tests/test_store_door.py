"""The store on SQLModel, reached from the event loop through one door (fault_manager.store.door)."""

from __future__ import annotations

import ast
import contextvars
import dataclasses
import re
import threading
from pathlib import Path

import pytest
from fault_manager.store import FaultEventRow, Store, StoreError, fault_events, in_store_thread
from fault_manager.store import models as store_models
from fault_manager.store.models import FAULT_EVENT_COLUMNS
from sqlalchemy import inspect, select
from sqlmodel import SQLModel

SRC = Path(__file__).resolve().parents[1] / "src" / "fault_manager"
STORE = SRC / "store"
DOOR = STORE / "door.py"
HOPS = re.compile(r"\b(to_thread|run_in_executor)\(")
# Thread hops that are not the store's, each with what it does there.
NOT_THE_STORE = {
    ("hotreset/jobs.py", "self._mirror"): "writes the reset ConfigMap's mirror files for the job agents",
}


def _hops() -> list[tuple[Path, int, str]]:
    found = []
    for path in sorted(SRC.rglob("*.py")):
        for number, line in enumerate(path.read_text().splitlines(), 1):
            if HOPS.search(line):
                found.append((path, number, line.strip()))
    return found


def test_only_the_door_hops_into_a_thread() -> None:
    hops = _hops()
    assert [p for p, _, _ in hops].count(DOOR) == 1, hops
    located = [(path, path.relative_to(SRC).as_posix(), number, line) for path, number, line in hops]
    others = [
        (where, number, line)
        for path, where, number, line in located
        if path != DOOR and not any(where == name and call in line for name, call in NOT_THE_STORE)
    ]
    assert others == [], "call the store through fault_manager.store.in_store_thread"
    # The exceptions hand no store work to their thread.
    excepted = [line for path, _, line in hops if path != DOOR]
    assert len(excepted) == len(NOT_THE_STORE)
    assert all("store" not in line for line in excepted), excepted


def test_the_door_is_used_by_the_modules_that_call_the_store() -> None:
    users = {p.relative_to(SRC).as_posix() for p in SRC.rglob("*.py") if "in_store_thread(" in p.read_text()}
    assert {"reactor/reactor.py", "reactor/ingest.py", "api.py", "reactor/restore.py", "policy/keeper.py"} <= users
    assert {"hotreset/loop.py", "hotreset/stored_tokens.py", "reactor/isolation.py", "retention.py", "app.py"} <= users


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module.split(".")[0])
    return names


def test_the_store_declares_its_tables_with_sqlmodel_only() -> None:
    assert "sqlmodel" in _imports(STORE / "models.py")
    assert "sqlmodel" in _imports(STORE / "database.py")  # the session that loads table instances
    for path in STORE.glob("*.py"):
        text = path.read_text()
        # No second declaration: no Core Table, and rows are read by column name, never by position.
        assert not re.search(r"\bTable\(", text), path.name
        assert not re.search(r"\(\*row\)|\brow\[\d", text), path.name
    tables = [
        cls
        for cls in vars(store_models).values()
        if isinstance(cls, type) and issubclass(cls, SQLModel) and cls is not SQLModel
    ]
    declared = {str(cls.__tablename__) for cls in tables}
    assert declared == {t.name for t in SQLModel.metadata.sorted_tables}
    assert len(declared) == len(tables) == 10


def test_records_leave_the_store_detached(tmp_path: Path) -> None:
    with Store(tmp_path / "faults.db") as store:
        store.isolations.add("Ascend910-0", "81078603", "PreSeparateNPU", "FaultDuration", 1000)
        store.manual.set_separated("Ascend910-0", True, "rule", 1000)
        store.states.save("Ascend910-0", "PreSeparateNPU", False, "r", 1000, ["81078603"], 1001)
        (escalation,) = store.isolations.escalations()
        (audit,) = store.manual.audit()
        state = store.states.all()["Ascend910-0"]
    # Read after the store closed: every column was loaded, nothing is bound to a session.
    assert (escalation.chip, escalation.code, escalation.active) == ("Ascend910-0", "81078603", True)
    assert (audit.chip, audit.separated, audit.set_by) == ("Ascend910-0", True, "rule")
    assert (state.level, state.schedulable, state.codes) == ("PreSeparateNPU", False, ["81078603"])
    for row in (escalation, audit, state):
        assert isinstance(row, SQLModel)
        state_of_row = inspect(row)
        assert state_of_row.detached and state_of_row.session is None


async def test_the_door_runs_the_call_on_a_worker_thread_with_the_callers_context(tmp_path: Path) -> None:
    where = contextvars.ContextVar("where", default="unset")
    where.set("caller")
    seen: list[tuple[str, str]] = []

    def call(value: int) -> int:
        seen.append((threading.current_thread().name, where.get()))
        return value + 1

    assert await in_store_thread(call, 41) == 42
    ((thread, context),) = seen
    assert thread != threading.current_thread().name
    assert context == "caller"
    with Store(tmp_path / "faults.db") as store:
        assert await in_store_thread(store.events.count) == 0
    # A closed store's error reaches the caller as it is.
    with pytest.raises(StoreError, match="closed"):
        await in_store_thread(store.events.count)


def test_fault_events_are_read_by_column_name_whatever_the_select_order(tmp_path: Path) -> None:
    event = FaultEventRow("run-7", "Ascend910-3", 3, 5, "80E01801", "occur", 2, "subscription", 5000, 5001)
    with Store(tmp_path / "faults.db") as store:
        assert store.events.append([event]) == 1
        (stored,) = store.events.page("Ascend910-3")
        with store.db.read("reading in reverse") as conn:
            (reordered,) = fault_events._records(conn.execute(select(*reversed(FAULT_EVENT_COLUMNS))))
    assert stored == reordered == dataclasses.replace(event, id=stored.id)
    assert stored.id is not None
    assert (stored.logic_id, stored.phy_id) == (3, 5)  # two int columns side by side: a swap would pass types
