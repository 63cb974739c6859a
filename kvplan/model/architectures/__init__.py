"""The architecture registry: one module per family in this folder, each defining `FAMILY` (a
kvplan.model.architectures.base.Family), keyed as vLLM keys its model registry — by the `architectures`
names config.json declares (model_executor/models/registry.py:_ModelRegistry.resolve_model_cls takes the first
it can resolve), with the text config's `model_type` as the fallback (config/vllm.py fills `architectures` from
transformers' MODEL_FOR_CAUSAL_LM_MAPPING_NAMES[model_type] when a config names none).

A family this folder does not know is DEFAULT: the Llama shape. Adding a family is adding one module here;
tests/test_architecture_registry.py checks that no architecture or model type is claimed twice and that every
name is one vLLM registers.

How a config's keys are spelt per concern (layer patterns, MLA, recurrent state, MoE widths, text
sub-configs) stays in kvplan/model/families/; what a family *is* (its weight layout, rotary cache, dtype rules
and per-model vLLM behaviour) lives here, and the reader (kvplan.model.config) copies it onto ModelSpec.
"""
from __future__ import annotations

import importlib.util
import os
import sys
from collections.abc import Sequence
from functools import lru_cache
from typing import NamedTuple

from kvplan.model.architectures.base import DEFAULT, Family

__all__ = ["DEFAULT", "Family", "build_index", "families", "family_for", "gemma_line", "model_types_where"]

_NOT_FAMILIES = frozenset({"__init__.py", "base.py"})


@lru_cache(maxsize=1)
def families() -> tuple[Family, ...]:
    """Every family module's FAMILY, in module-name order (the folder is listed, so a new file registers).

    Each module is loaded from its file (importlib.util.spec_from_file_location) and entered in sys.modules as an
    import would: `kvplan size` loads all of them, and this skips the import system's search of every finder on
    sys.meta_path, a third of the cost."""
    here = os.path.dirname(__file__)
    names = sorted(n[:-3] for n in os.listdir(here) if n.endswith(".py") and n not in _NOT_FAMILIES)
    return tuple(_load(here, name) for name in names)


def _load(here: str, name: str) -> Family:
    qualified = f"{__name__}.{name}"
    module = sys.modules.get(qualified)
    if module is None:
        spec = importlib.util.spec_from_file_location(qualified, os.path.join(here, f"{name}.py"))
        if spec is None or spec.loader is None:
            raise ImportError(f"cannot load kvplan/model/architectures/{name}.py")
        module = importlib.util.module_from_spec(spec)
        sys.modules[qualified] = module
        spec.loader.exec_module(module)
    family = getattr(module, "FAMILY", None)
    if not isinstance(family, Family):
        raise TypeError(f"kvplan/model/architectures/{name}.py defines no FAMILY")
    return family


class _Index(NamedTuple):
    by_architecture: dict[str, Family]
    by_model_type: dict[str, Family]


@lru_cache(maxsize=1)
def _index() -> _Index:
    return build_index(families())


def build_index(all_families: Sequence[Family]) -> _Index:
    """Each architecture name and model type to its family; a name two families claim is an error."""
    by_arch: dict[str, Family] = {}
    by_type: dict[str, Family] = {}
    for family in all_families:
        for table, keys in ((by_arch, family.architectures), (by_type, family.model_types)):
            for key in keys:
                if key in table:
                    raise ValueError(f"{key!r} is claimed by both {table[key].name} and {family.name}")
                table[key] = family
    return _Index(by_arch, by_type)


def family_for(architectures: Sequence[str], model_type: str) -> Family:
    """The family of a config: its first registered architecture's, else its text model_type's, else DEFAULT."""
    index = _index()
    for architecture in architectures:
        if architecture in index.by_architecture:
            return index.by_architecture[architecture]
    return index.by_model_type.get(model_type, DEFAULT)


@lru_cache(maxsize=8)
def model_types_where(flag: str) -> frozenset[str]:
    """The model types of every family whose boolean `flag` is set: for rules vLLM itself keys by model_type
    (config/model.py:_FLOAT16_NOT_SUPPORTED_MODELS), which must not follow the architecture."""
    return frozenset(t for f in families() if getattr(f, flag) for t in f.model_types)


def gemma_line(model_type: str) -> bool:
    """Whether a model type is one of the Gemma line's (gemma, gemma2, gemma3_text, gemma3n, gemma4 …): SGLang
    keys a rule on the prefix (configs/model_config.py:_get_and_verify_dtype, `model_type.startswith("gemma")`)."""
    return model_type.startswith("gemma")
