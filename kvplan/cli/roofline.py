"""`kvplan roofline` (stub: being written)."""
from __future__ import annotations

NAME = "roofline"
HELP = "Not implemented yet."
EPILOG = ""


def command() -> None:
    """Not implemented yet."""
    raise NotImplementedError
