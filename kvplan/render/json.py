"""Machine output: every `--json` document is a result object turned into plain data.

Each document carries `schema_version` (bumped on any incompatible change) and `kind`
(the command that made it). Bytes, tokens and blocks are raw integers, never "1.2 GiB".
"""
from __future__ import annotations

import dataclasses
import enum
import json
import math
from typing import Any

SCHEMA_VERSION = 2


def to_data(obj: Any) -> Any:
    """Dataclasses, enums, tuples and mappings to JSON-ready data (NaN/inf become null)."""
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        if callable(flat := getattr(obj, "json_data", None)):  # an object that says its own shape (ServeSettings)
            return to_data(flat())
        return {f.name: to_data(getattr(obj, f.name)) for f in dataclasses.fields(obj) if f.repr}
    if isinstance(obj, enum.Enum):
        return obj.value
    if isinstance(obj, dict):
        return {str(k): to_data(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [to_data(v) for v in obj]
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    return obj


def dumps(kind: str, payload: Any) -> str:
    """The `--json` document for one command: `{schema_version, kind, ...payload}`."""
    data = to_data(payload)
    if not isinstance(data, dict):
        data = {"items": data}
    return json.dumps({"schema_version": SCHEMA_VERSION, "kind": kind, **data}, indent=2, sort_keys=False)
