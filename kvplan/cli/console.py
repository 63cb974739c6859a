"""The two consoles: data on stdout, everything else (spinners, warnings) on stderr."""
from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rich.console import Console


def out() -> Console:
    """Console for results (stdout). A new one each call: it reads the terminal's width and colour
    settings (COLUMNS, NO_COLOR) now, not when a previous command ran in the same process."""
    from rich.console import Console

    return Console(highlight=False)


def err() -> Console:
    """Console for progress and warnings (stderr)."""
    from rich.console import Console

    return Console(stderr=True, highlight=False)


def print_json(text: str) -> None:
    """Write machine output verbatim (no Rich markup or wrapping)."""
    import sys

    sys.stdout.write(text if text.endswith("\n") else text + "\n")
