"""Layout that never cuts a number or a flag: a table where it fits whole, else the same rows stacked.

Rich fits a table to the terminal by wrapping, then by cropping its cells ("1,9…", "--max-num…"), so a
table whose numbers and flags cannot shrink is shown only when its narrowest layout fits; otherwise each
row is printed as lines of text, which wrap between words and fold a word longer than the line.
"""
from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rich.console import Console, ConsoleOptions, RenderableType
    from rich.table import Table


FOLDED = 10  # the width a folding column of names may shrink to before the rows are stacked instead


class TableOrStack:
    """`table` when its minimum width fits the console, else `stacked()` (built only then)."""

    def __init__(self, table: Table, stacked: Callable[[], RenderableType]) -> None:
        self.table = table
        self.stacked = stacked

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> Iterator[RenderableType]:
        if narrowest_width(self.table, console, options) <= options.max_width:
            yield self.table
        else:
            yield self.stacked()


def narrowest_width(table: Table, console: Console, options: ConsoleOptions) -> int:
    """The fewest columns `table` takes without cutting a cell: its no_wrap columns at their longest cell
    (header included), the others at their longest word (a folding column, of names, at most FOLDED),
    plus padding and borders."""
    from rich.measure import Measurement

    total = 0
    for column in table.columns:
        cells = [column.header, *column.cells]
        sizes = [Measurement.get(console, options, cell) for cell in cells]
        need = max(m.maximum if column.no_wrap else m.minimum for m in sizes)
        total += min(need, FOLDED) if column.overflow == "fold" and not column.no_wrap else need
    left, right = table.padding[3], table.padding[1]
    n = len(table.columns)
    total += n * (left + right)
    if table.box is not None:
        total += (n - 1) + (2 if table.show_edge else 0)
    return total
