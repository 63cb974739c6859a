"""The two consoles: data on stdout, everything else (spinners, warnings) on stderr."""
from __future__ import annotations

import functools
from collections.abc import Iterator
from typing import IO, TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rich.console import Console


class _Scrubbed:
    """A text stream whose writes have their secrets removed (kvplan.text.scrub); all else is the stream's."""

    def __init__(self, stream: IO[str]) -> None:
        self._stream = stream

    def write(self, text: str) -> int:
        from kvplan.text import scrub

        return self._stream.write(scrub(text))

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


@functools.cache
def _console_class() -> type[Console]:
    """Rich's Console, with every rendered piece of text passed through kvplan.text.escape: whatever a
    renderer was given (a plan's deployment name, a GPU name from a gpus-file, a served model name, a
    log line), no control character from it reaches the terminal. Rich's own styling is added after
    this (from each segment's style), and cursor controls (spinners) are kept."""
    from rich.console import Console
    from rich.segment import Segment

    from kvplan.text import escape

    class SafeConsole(Console):
        def render(self, renderable: Any, options: Any = None) -> Iterator[Segment]:
            for segment in super().render(renderable, options):
                text = segment.text
                if segment.control or text.isprintable() or text == "\n":
                    yield segment
                else:
                    yield Segment(escape(text, keep_newlines=True), segment.style)

    return SafeConsole


def console(**kwargs: Any) -> Console:
    """A Console whose output has no control character from the data it shows (see _console_class).

    NO_COLOR (no-color.org: "prevents the addition of ANSI color") turns off every ANSI style, bold and
    italic included: Rich's own NO_COLOR handling drops only the colours."""
    import os

    if os.environ.get("NO_COLOR"):
        kwargs.setdefault("color_system", None)
    columns = os.environ.get("COLUMNS", "").strip()
    if columns.isdigit():  # Rich takes COLUMNS=0 as a width of 0 and prints nothing at all
        kwargs.setdefault("width", min(max(int(columns), MIN_WIDTH), MAX_WIDTH))
    return _console_class()(**kwargs)


# kvplan's bounds on $COLUMNS: below 40 every table is cut to ellipses, above 10,000 is no terminal
MIN_WIDTH, MAX_WIDTH = 40, 10_000


def out() -> Console:
    """Console for results (stdout). A new one each call: it reads the terminal's width and colour
    settings (COLUMNS, NO_COLOR) now, not when a previous command ran in the same process. What it
    prints is scrubbed of secrets."""
    import sys

    return console(file=_Scrubbed(sys.stdout), highlight=False)


def err() -> Console:
    """Console for progress and warnings (stderr), scrubbed of secrets too."""
    import sys

    return console(file=_Scrubbed(sys.stderr), highlight=False)


def print_json(text: str) -> None:
    """Write machine output verbatim (no Rich markup or wrapping), scrubbed of secrets."""
    import sys

    from kvplan.text import scrub

    sys.stdout.write(scrub(text if text.endswith("\n") else text + "\n"))
