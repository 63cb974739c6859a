"""Typed, bounded reads from a config.json dict: aliases, defaults and one-line errors naming the key."""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kvplan.errors import BadConfig


def positive_int(value: Any, key: str) -> int:
    """A whole number in [1, 2**40] (no real model dimension is larger)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value != value:
        raise BadConfig(f"config.json: {key} must be a positive integer, got {value!r}")
    if isinstance(value, float) and (not value.is_integer()):
        raise BadConfig(f"config.json: {key} must be a whole number, got {value!r}")
    if value <= 0 or value > 2**40:
        raise BadConfig(f"config.json: {key} must be a positive integer, got {value!r}")
    return int(value)


def quant_number(value: Any, key: str, *, maximum: float) -> float:
    """A positive, finite number from a quantization config (bits per weight), at most `maximum`."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value <= maximum:
        raise BadConfig(f"quantization config: {key} must be a positive number, got {value!r}")
    return float(value)


def quant_group(value: Any, key: str) -> int | None:
    """A group size: a positive whole number; None, 0 or negative (GPTQ's -1: per channel) mean none."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value != value or (
            isinstance(value, float) and not value.is_integer()) or value > 2**40:
        raise BadConfig(f"quantization config: {key} must be a whole number, got {value!r}")
    return int(value) if value > 0 else None


def names(value: Any, what: str) -> tuple[str, ...]:
    """A list of names (architectures, module patterns), or one name."""
    if not value:
        return ()
    if isinstance(value, str):
        return (value,)
    if not isinstance(value, list):
        raise BadConfig(f"{what} must list names, got {type(value).__name__}")
    return tuple(str(x) for x in value)


class ConfigReader:
    """Typed reads from the text config (`d`) and the top-level config (`top`), with aliases and defaults."""

    def __init__(self, data: Mapping[str, Any], top: Mapping[str, Any]) -> None:
        self.d = data
        self.top = top

    def has(self, key: str) -> bool:
        return self.d.get(key) is not None

    def get(self, key: str, default: Any = None) -> Any:
        v = self.d.get(key)
        return default if v is None else v

    def num(self, *keys: str, default: int | None = None, what: str | None = None) -> int:
        for k in keys:
            v = self.d.get(k)
            if v is not None:
                return positive_int(v, k)
        if default is not None:
            return default
        raise BadConfig(f"config.json has no {what or ' / '.join(keys)}")

    def opt_int(self, *keys: str) -> int | None:
        for k in keys:
            v = self.d.get(k)
            if v is not None:
                return positive_int(v, k)
        return None



    def count(self, *keys: str) -> int | None:
        """A count where 0 (or null) means "none": `shared_intermediate_size: 0`, `num_local_experts: 0`."""
        for k in keys:
            v = self.d.get(k)
            if v is None:
                continue
            if isinstance(v, list):  # per-layer lists (ERNIE-4.5-VL's [text, vision] experts): the text entry
                v = v[0] if v else 0
            if v == 0:
                return 0
            return positive_int(v, k)
        return None

    def int_list(self, key: str, n: int) -> list[int] | None:
        """A per-layer list of whole numbers, exactly `n` long."""
        v = self.d.get(key)
        if v is None:
            return None
        if not isinstance(v, list) or len(v) != n or not all(
                isinstance(x, int) and not isinstance(x, bool) for x in v):
            raise BadConfig(f"config.json: {key} must list {n} whole numbers")
        return [int(x) for x in v]
