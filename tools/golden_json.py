"""What both oracle regenerators (tools/oracle, tools/cuda_oracle) write goldens with. Stdlib only."""
from __future__ import annotations

import json
import re


def dumps(obj: object, level: int = 0) -> str:
    """json.dumps(indent=1), but short lists of scalars (or of scalar lists) stay on one line."""
    pad, pad1 = " " * level, " " * (level + 1)
    if isinstance(obj, dict):
        if not obj:
            return "{}"
        items = [f"{pad1}{json.dumps(k)}: {dumps(v, level + 1)}" for k, v in obj.items()]
        return "{\n" + ",\n".join(items) + "\n" + pad + "}"
    if isinstance(obj, list):
        flat = all(not isinstance(x, (dict, list)) for x in obj) or (
            all(isinstance(x, list) and all(not isinstance(y, (dict, list)) for y in x)
                for x in obj) and len(json.dumps(obj)) <= 100)
        if flat:
            return json.dumps(obj)
        return "[\n" + ",\n".join(pad1 + dumps(x, level + 1) for x in obj) + "\n" + pad + "]"
    return json.dumps(obj)


def layer_index(name: str) -> int | None:
    m = re.search(r"\.(\d+)\.", name)
    return int(m.group(1)) if m else None


def ranges(idx: list[int]) -> str:
    """[0,1,2,5,7,8] -> "0-2,5,7-8" (layer indices, sorted, inclusive runs)."""
    out: list[str] = []
    s = sorted(idx)
    i = 0
    while i < len(s):
        j = i
        while j + 1 < len(s) and s[j + 1] == s[j] + 1:
            j += 1
        out.append(str(s[i]) if i == j else f"{s[i]}-{s[j]}")
        i = j + 1
    return ",".join(out)
