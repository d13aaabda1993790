"""Write the fixture `release-2.db`: a database written by the last release of schema version 2.

Not a test. It drives that release's own `Store` (reset tokens as a sliding window, table
`reset_tokens`), so it only runs with that release's code, e.g. its sources ahead of this venv's:

    mkdir /tmp/rel2 && git archive 39dfcd5 services/fault-manager/src libs/common/src | tar x -C /tmp/rel2
    PYTHONPATH=/tmp/rel2/services/fault-manager/src:/tmp/rel2/libs/common/src \
        .venv/bin/python tests/upgrade/make_release_2_db.py tests/upgrade/release-2.db

Every timestamp is fixed (policy time, ms), so the file is the same each time it is written.
`test_release_2_db.py` says what each chip holds and what the upgrade must make of it.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Protocol, cast

from fault_manager.store import FaultEventRow, Store

H = 3_600_000
NEWEST = 1_790_000_000_000  # the last token taken: the upgrade measures its window from it
RESET_CODE = "8C1FA006"  # a RestartNPU code: what made these chips reset candidates

# (taken at, chips of the reset group), oldest first, as the hot reset took them.
TAKES: tuple[tuple[int, tuple[str, ...]], ...] = (
    (NEWEST - 10 * H, ("Ascend910-3",)),
    (NEWEST - 9 * H, ("Ascend910-3",)),
    (NEWEST - 8 * H, ("Ascend910-4",)),
    (NEWEST - 7 * H, ("Ascend910-4",)),
    (NEWEST - 6 * H, ("Ascend910-2",)),  # exactly a window before the newest: no longer counted
    (NEWEST - 6 * H + 1, ("Ascend910-4",)),  # one ms inside the window: counted
    (NEWEST - 5 * H, ("Ascend910-0", "Ascend910-1")),
    (NEWEST - 2 * H, ("Ascend910-2",)),
    (NEWEST - 1 * H, ("Ascend910-0", "Ascend910-1")),
    (NEWEST, ("Ascend910-0",)),
)


class Release2Store(Protocol):
    """The part of that release's Store used here (the token calls are gone from later releases)."""

    def append_events(self, events: Sequence[FaultEventRow]) -> int: ...
    def take_reset_tokens(self, chips: Sequence[str], now_ms: int) -> bool: ...
    def tokens_left(self, chip: str, now_ms: int) -> int: ...
    def record_reset_attempt(self, group: str, chips: Sequence[str], channel: str, started_ms: int) -> int: ...
    def finish_reset_attempt(self, attempt_id: int, outcome: str, error_code: int | None, finished_ms: int) -> bool: ...


def event(seq: int, chip: str, at_ms: int) -> FaultEventRow:
    logic = int(chip.rsplit("-", 1)[1])
    return FaultEventRow(f"rel2run-{seq}", chip, logic, logic, RESET_CODE, "occur", 2, "subscription", at_ms, at_ms + 5)


def main(out: Path) -> None:
    if out.exists():
        out.unlink()
    with Store(out, wall_ms=lambda: NEWEST - 11 * H) as opened:
        store = cast(Release2Store, opened)
        attempts: list[int] = []
        for seq, (at, chips) in enumerate(TAKES, start=1):
            store.append_events([event(seq, chips[0], at - 70_000)])
            assert store.take_reset_tokens(list(chips), at), (at, chips)
            attempts.append(store.record_reset_attempt(",".join(chips), list(chips), "auto", at))
        # Ascend910-0 has no token left: the release refuses the group and stores nothing for it.
        assert store.take_reset_tokens(["Ascend910-0", "Ascend910-1"], NEWEST + 1) is False
        # All finished but the last one (still running when the file was copied), two of them failed.
        for attempt, (at, _chips) in zip(attempts[:-1], TAKES[:-1], strict=True):
            failed = at in (NEWEST - 1 * H, NEWEST - 7 * H)
            store.finish_reset_attempt(
                attempt, "failed" if failed else "succeeded", -8012 if failed else None, at + 30_000
            )
        left = {c: store.tokens_left(c, NEWEST) for c in sorted({c for _, cs in TAKES for c in cs})}
        print("tokens left at the newest take:", left)
    for suffix in ("-wal", "-shm"):
        assert not Path(f"{out}{suffix}").exists(), "the last close checkpoints the WAL into the file"
    print("wrote", out)


if __name__ == "__main__":
    main(Path(sys.argv[1]))
