"""`kvplan size` (stub: being written)."""
from __future__ import annotations

NAME = "size"
HELP = "Not implemented yet."
EPILOG = ""


def command() -> None:
    """Not implemented yet."""
    raise NotImplementedError
