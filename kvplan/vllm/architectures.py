"""Which architectures each vLLM version serves: its model registry (`model_executor/models/registry.py`,
every `_*_MODELS` table merged into `_VLLM_MODELS`), per minor release, shipped as data
(kvplan/vllm/architectures.json, made by tools/vllm_registry/ from each release's own registry.py).

vLLM resolves `architectures` from config.json against that registry and refuses an architecture it has no
entry for (`registry.py:_ModelRegistry._raise_for_unsupported`), with its own words for one it removed.
"""
from __future__ import annotations

import json
from collections.abc import Sequence
from functools import lru_cache
from typing import Any

from kvplan.vllm.defaults import VllmVersion, parse_vllm_version_unchecked


@lru_cache(maxsize=1)
def _table() -> dict[str, Any]:
    from importlib.resources import files

    table: dict[str, Any] = json.loads(files("kvplan.vllm").joinpath("architectures.json").read_text("utf-8"))
    return table


def _key(v: VllmVersion) -> tuple[int, int]:
    return (v.major, v.minor)


def served_runs(architecture: str) -> list[tuple[str, str]]:
    """The vLLM minor versions serving `architecture`, as inclusive (first, last) runs; [] if none did."""
    return [(a, b) for a, b in _table()["served"].get(architecture, [])]


def known_version(version: VllmVersion) -> bool:
    """Whether the table covers this vLLM minor version."""
    return f"{version.major}.{version.minor}" in _table()["releases"]


def is_served(architecture: str, version: VllmVersion) -> bool:
    """Whether `version`'s registry has an entry for `architecture`."""
    v = _key(version)
    return any(_key(parse_vllm_version_unchecked(a)) <= v <= _key(parse_vllm_version_unchecked(b))
               for a, b in served_runs(architecture))


def _runs_text(runs: list[tuple[str, str]]) -> str:
    return ", ".join(a if a == b else f"{a}–{b}" for a, b in runs)


def not_served_reason(architectures: Sequence[str], version: VllmVersion) -> str | None:
    """None when vLLM `version` serves one of `architectures` (or kvplan cannot tell: no architectures, or a
    version outside the table); else vLLM's reason in one line, with the versions that did serve it."""
    if not architectures or not known_version(version) or any(is_served(a, version) for a in architectures):
        return None
    previous = _table()["previously_supported"]
    for arch in architectures:
        runs = served_runs(arch)
        if arch in previous and runs and _key(parse_vllm_version_unchecked(runs[-1][1])) < _key(version):
            return (f"Model architecture {arch} was supported in vLLM until v{previous[arch]}, and is not supported "
                    f"anymore (vLLM {version}; served by vLLM {_runs_text(runs)})")
    elsewhere = [f"{a}: vLLM {_runs_text(served_runs(a))}" for a in architectures if served_runs(a)]
    where = f"; served by {'; '.join(elsewhere)}" if elsewhere else "; no vLLM release from 0.8 on serves it"
    return f"Model architectures {list(architectures)} are not supported by vLLM {version}{where}"
