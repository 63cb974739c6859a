"""The base of kvplan's verdicts: a str-valued enum whose members are their own strings.

`--json` (render/json.py:to_data takes `.value`), f-strings and tables show the value, unchanged from the plain
strings these verdicts were; code compares members (`startup is Startup.OK`), never the text.
"""
from __future__ import annotations

from enum import Enum


class Verdict(str, Enum):
    """A verdict that is its own string: `--json` and the tables show the value, code compares members."""

    def __str__(self) -> str:
        return str(self.value)

    def __format__(self, spec: str) -> str:
        return format(str(self.value), spec)
