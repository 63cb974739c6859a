"""Units at the edge: parse sizes and counts from flags, format bytes for people.

The core works in integers (bytes, tokens, blocks); only this module knows about suffixes.
"""
from __future__ import annotations

import math
import re

from kvplan.errors import InvalidParameter

GiB = 2**30  # vLLM's GiB (utils/mem_constants.py: GiB_bytes = 1 << 30)
MiB = 2**20
KiB = 2**10

_SIZE_RE = re.compile(r"^\s*([0-9]*\.?[0-9]+(?:[eE][+-]?[0-9]+)?)\s*([A-Za-z]*)\s*(?:/s)?\s*$")
# Binary (IEC) and decimal (SI) byte suffixes; bare k/m/g/t follow vLLM's arg_utils human-readable
# rule (lowercase = decimal, uppercase = binary).
_BYTE_SUFFIX = {
    "": 1, "b": 1, "B": 1,
    "k": 10**3, "K": 2**10, "kb": 10**3, "KB": 10**3, "kB": 10**3, "KiB": 2**10, "Ki": 2**10,
    "m": 10**6, "M": 2**20, "mb": 10**6, "MB": 10**6, "MiB": 2**20, "Mi": 2**20,
    "g": 10**9, "G": 2**30, "gb": 10**9, "GB": 10**9, "GiB": 2**30, "Gi": 2**30,
    "t": 10**12, "T": 2**40, "tb": 10**12, "TB": 10**12, "TiB": 2**40, "Ti": 2**40,
}
_COUNT_SUFFIX = {"": 1, "k": 10**3, "K": 2**10, "m": 10**6, "M": 2**20, "g": 10**9, "G": 2**30}

# Refuse absurd sizes (a typo such as 1e30) rather than computing with them: 1 EiB.
MAX_BYTES = 2**60


def parse_bytes(text: str | int | float, *, what: str = "size") -> int:
    """Parse `24GiB`, `80GB`, `3.35TB/s`, `512M` (vLLM rule) or a plain number of bytes."""
    if isinstance(text, bool):
        raise InvalidParameter(f"{what}: expected a size, got {text!r}")
    if isinstance(text, int):  # exact, and no float overflow for 10**400
        if not 0 <= text <= MAX_BYTES:
            raise InvalidParameter(f"{what}: {text!r} is out of range")
        return text
    if isinstance(text, float):
        value, mult = text, 1
    else:
        m = _SIZE_RE.match(str(text))
        if not m or m.group(2) not in _BYTE_SUFFIX:
            raise InvalidParameter(f"{what}: cannot read {text!r} as a size (examples: 24GiB, 80GB, 1.5TB/s)")
        value, mult = float(m.group(1)), _BYTE_SUFFIX[m.group(2)]
    result = value * mult
    if not math.isfinite(result) or result < 0 or result > MAX_BYTES:
        raise InvalidParameter(f"{what}: {text!r} is out of range")
    return int(result)


def parse_count(text: str | int, *, what: str = "value", minimum: int = 0, maximum: int | None = None,
                bound: str = "") -> int:
    """Parse a token count such as `32768`, `32k` (32,000) or `32K` (32,768), as vLLM's flags do
    (vllm/engine/arg_utils.py:human_readable_int: a lower-case suffix is decimal, an upper-case one binary).

    Above `maximum` is an error naming it and `bound` (why that is the most)."""
    if isinstance(text, bool):
        raise InvalidParameter(f"{what}: expected a whole number, got {text!r}")
    if isinstance(text, int):
        value = text
    else:
        m = _SIZE_RE.match(str(text))
        if not m or m.group(2) not in _COUNT_SUFFIX:
            raise InvalidParameter(f"{what}: cannot read {text!r} as a whole number (examples: 4096, 32k, 32K)")
        f = float(m.group(1)) * _COUNT_SUFFIX[m.group(2)]
        if not math.isfinite(f) or f != int(f) or f > MAX_BYTES:
            raise InvalidParameter(f"{what}: {text!r} is not a whole number in range")
        value = int(f)
    if value < minimum:
        raise InvalidParameter(f"{what} must be ≥ {minimum}, got {value}")
    if maximum is not None and value > maximum:
        why = f"; {bound}" if bound else ""
        raise InvalidParameter(f"{what} {value:,} is more than kvplan accepts (at most {maximum:,}{why})")
    return value


def format_gib_vllm(num_bytes: int | float) -> str:
    """GiB exactly as vLLM prints it (utils/mem_utils.py:format_gib: str(round(b / 2**30, 2)))."""
    return f"{round(num_bytes / GiB, 2)}"


def format_bytes(num_bytes: int | float, unit: str = "GiB", digits: int = 2) -> str:
    """Binary units for memory (what vLLM logs), e.g. `57.64 GiB`; pick `unit` from B, KiB, MiB, GiB."""
    div = {"B": 1, "KiB": KiB, "MiB": MiB, "GiB": GiB, "TiB": 2**40}[unit]
    if unit == "B":
        return f"{int(num_bytes):,} B"
    return f"{num_bytes / div:,.{digits}f} {unit}"


def human_bytes(num_bytes: int | float) -> str:
    """Pick the largest binary unit that keeps the number ≥ 1."""
    for unit, div in (("TiB", 2**40), ("GiB", GiB), ("MiB", MiB), ("KiB", KiB)):
        if abs(num_bytes) >= div:
            return format_bytes(num_bytes, unit)
    return f"{int(num_bytes):,} B"


def cdiv(a: int, b: int) -> int:
    """Ceiling division of non-negative ints (vllm/utils/math_utils.py:cdiv)."""
    return -(a // -b)
