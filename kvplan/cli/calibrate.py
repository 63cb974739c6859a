"""`kvplan calibrate` (stub: being written)."""
from __future__ import annotations

NAME = "calibrate"
HELP = "Not implemented yet."
EPILOG = ""


def command() -> None:
    """Not implemented yet."""
    raise NotImplementedError
