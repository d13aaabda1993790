"""How ascendctl prints: the API's JSON or YAML, or a table, as kubectl does.

Outside a terminal (piped, redirected) a table is plain columns, values in full, whatever the
width: `ascendctl chips | grep Ascend950` must find whole values. In a terminal it is a rich table
that never cuts an id, a code or a name (those columns keep their full width; the others fold).
`-o wide` adds the columns a narrow terminal has no room for.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Literal

import yaml
from rich.console import Console
from rich.table import Table
from rich.text import Text

PLAIN_GAP = "   "  # kubectl's column gap

Cell = str | Text


class OutputFormat(StrEnum):
    JSON = "json"
    YAML = "yaml"
    WIDE = "wide"


@dataclass(frozen=True)
class Column:
    header: str
    keep: bool = False  # an id, a code or a name: never cut
    wide: bool = False  # shown with -o wide only


def is_terminal() -> bool:
    return sys.stdout.isatty()


def console(terminal: bool | None = None) -> Console:
    """Where tables and messages go. Outside a terminal nothing is wrapped or cut (soft wrap, no width)."""
    terminal = is_terminal() if terminal is None else terminal
    return Console(highlight=False, soft_wrap=not terminal)


def print_data(data: Any, fmt: OutputFormat) -> None:
    """The API's answer as JSON or YAML, unchanged."""
    if fmt is OutputFormat.YAML:
        sys.stdout.write(yaml.safe_dump(data, sort_keys=False, allow_unicode=True))
    else:
        sys.stdout.write(json.dumps(data, indent=2, sort_keys=False) + "\n")


def plain(cell: Cell) -> str:
    return cell.plain if isinstance(cell, Text) else cell


def plain_table(columns: Sequence[Column], rows: Sequence[Sequence[Cell]]) -> str:
    """kubectl's plain columns: upper-case headers, each column as wide as its longest value, no cut."""
    texts = [[c.header.upper() for c in columns], *([plain(cell) for cell in row] for row in rows)]
    widths = [max(len(line[i]) for line in texts) for i in range(len(columns))]
    lines = [PLAIN_GAP.join(v.ljust(w) for v, w in zip(line, widths, strict=True)).rstrip() for line in texts]
    return "\n".join(lines) + "\n"


def rich_table(title: str | None, columns: Sequence[Column], rows: Sequence[Sequence[Cell]]) -> Table:
    """A terminal's table: a kept column is as wide as its longest value and never wraps; the rest wrap
    between words, never inside one."""
    table = Table(title=title)
    for i, col in enumerate(columns):
        values = [plain(row[i]) for row in rows]
        if col.keep:
            longest = max([len(col.header), *map(len, values)])
            table.add_column(col.header, no_wrap=True, min_width=longest, overflow="fold")
        else:
            word = max(len(w) for text in [col.header, *values] for w in [*text.split(), ""])
            table.add_column(col.header, min_width=word, overflow="fold")
    for row in rows:
        # A value is text, never markup: a reason may hold brackets.
        table.add_row(*(cell if isinstance(cell, Text) else Text(cell) for cell in row))
    return table


def least_width(table: Table) -> int:
    """The width below which rich would squeeze `table`'s columns under their minimums: those minimums,
    each column's padding (one space each side) and the box's n + 1 rules."""
    minimums = [c.min_width or 0 for c in table.columns]
    return sum(minimums) + 2 * len(minimums) + len(minimums) + 1


def print_table(
    title: str | None,
    columns: Sequence[Column],
    rows: Sequence[Sequence[Cell]],
    *,
    wide: bool,
    out: Console | None = None,
) -> None:
    """The table in the form its reader needs (see the module's docstring); the title only in a terminal."""
    keep = [i for i, c in enumerate(columns) if wide or not c.wide]
    cols = [columns[i] for i in keep]
    shown = [[row[i] for i in keep] for row in rows]
    out = out or console()
    if out.is_terminal:
        table = rich_table(title, cols, shown)
        # Narrower than the table's least width, rich would squeeze or cut columns: draw it at that width
        # instead, and let the terminal wrap the lines; nothing is lost.
        need = least_width(table)
        if need > out.width:  # Console.print cannot draw wider than its console: a wider one, same terminal
            system: Literal["auto"] | None = "auto" if out.color_system else None
            out = Console(file=out.file, width=need, force_terminal=True, color_system=system, highlight=False)
        out.print(table)
    else:
        out.file.write(plain_table(cols, shown))
