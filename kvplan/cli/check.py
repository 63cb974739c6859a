"""`kvplan check` (stub: being written)."""
from __future__ import annotations

NAME = "check"
HELP = "Not implemented yet."
EPILOG = ""


def command() -> None:
    """Not implemented yet."""
    raise NotImplementedError
