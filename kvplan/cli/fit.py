"""`kvplan fit` (stub: being written)."""
from __future__ import annotations

NAME = "fit"
HELP = "Not implemented yet."
EPILOG = ""


def command() -> None:
    """Not implemented yet."""
    raise NotImplementedError
