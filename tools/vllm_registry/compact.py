#!/usr/bin/env python3
"""Write kvplan's packaged architecture table (kvplan/vllm/architectures.json) from vllm_architectures.json.

Dev tool, stdlib only. Keeps, per architecture, the vLLM minor versions that serve it as inclusive
[first, last] runs, and vLLM's own "supported until" table (registry.py:_PREVIOUSLY_SUPPORTED_MODELS) of
the newest release:

    python tools/vllm_registry/compact.py
"""
from __future__ import annotations

import json
from pathlib import Path

HERE = Path(__file__).resolve().parent
SRC = HERE / "vllm_architectures.json"
OUT = HERE.parents[1] / "kvplan" / "vllm" / "architectures.json"


def minor(version: str) -> str:
    return ".".join(version.split(".")[:2])


def main() -> None:
    data = json.loads(SRC.read_text())
    releases = list(data["versions"])
    minors = [minor(v) for v in releases]
    runs: dict[str, list[list[str]]] = {}
    for arch in sorted({a for v in data["versions"].values() for a in v["architectures"]}):
        served = [minor(v) for v in releases if arch in data["versions"][v]["architectures"]]
        spans: list[list[str]] = []
        for m in served:
            if spans and minors.index(m) == minors.index(spans[-1][1]) + 1:
                spans[-1][1] = m
            else:
                spans.append([m, m])
        runs[arch] = spans
    newest = data["versions"][releases[-1]]
    table = {
        "format": 1,
        "source": data["source"],
        "generated_by": "tools/vllm_registry/compact.py from tools/vllm_registry/vllm_architectures.json",
        "releases": {minor(v): {"release": v, "commit": data["versions"][v].get("commit")} for v in releases},
        "served": runs,
        "previously_supported": newest.get("previously_supported", {}),
    }
    OUT.write_text(json.dumps(table, separators=(",", ":"), sort_keys=True) + "\n")
    print(f"{OUT}: {len(runs)} architectures, {len(minors)} minor versions, {OUT.stat().st_size:,} bytes")


if __name__ == "__main__":
    main()
