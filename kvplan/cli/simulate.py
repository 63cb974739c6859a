"""`kvplan simulate prefix|serve` (stub: being written)."""
from __future__ import annotations

from collections.abc import Callable
from typing import Any


def prefix() -> None:
    """Not implemented yet."""
    raise NotImplementedError


def serve() -> None:
    """Not implemented yet."""
    raise NotImplementedError


# (name, function, help, epilog) for each `kvplan simulate` subcommand.
COMMANDS: list[tuple[str, Callable[..., Any], str, str]] = [
    ("prefix", prefix, "Not implemented yet.", ""),
    ("serve", serve, "Not implemented yet.", ""),
]
