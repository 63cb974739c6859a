"""The architecture registry: one module per family in this folder, each defining `FAMILY` (a
kvplan.model.architectures.base.Family), keyed as vLLM keys its model registry — by the `architectures`
names config.json declares (model_executor/models/registry.py:_ModelRegistry.resolve_model_cls takes the first
it can resolve), with the text config's `model_type` as the fallback (config/vllm.py fills `architectures` from
transformers' MODEL_FOR_CAUSAL_LM_MAPPING_NAMES[model_type] when a config names none).

A family this folder does not know is DEFAULT: the Llama shape. Adding a family is adding one module here and
running `python scripts/architecture_index.py`, which rewrites _index.py (each key to its module's name, and the
cross-family tables); a config parse then imports only the one family module it needs, as vLLM's registry imports
only the model class it resolves (registry.py:_LazyRegisteredModel). tests/test_architecture_registry.py fails
when _index.py is not what the modules' FAMILY definitions give, checks that no architecture or model type is
claimed twice and that every name is one vLLM registers.

How a config's keys are spelt per concern (layer patterns, MLA, recurrent state, MoE widths, text
sub-configs) stays in kvplan/model/families/; what a family *is* (its weight layout, rotary cache, dtype rules
and per-model vLLM behaviour) lives here, and the reader (kvplan.model.config) copies it onto ModelSpec.
"""
from __future__ import annotations

import importlib.util
import os
import sys
from collections.abc import Sequence
from functools import cache, lru_cache
from types import ModuleType
from typing import Literal, NamedTuple

from kvplan.model.architectures.base import DEFAULT, Family, ModelTypeRules, VisionTower

__all__ = ["DEFAULT", "Family", "build_index", "composite_text_config", "families", "family_for", "gemma_line",
           "index_source", "mm_item_tokens_stated", "model_types_for", "model_types_where", "sglang_state_rule",
           "sglang_vision_defaults", "vision_tower"]

_HERE = os.path.dirname(__file__)
_NOT_FAMILIES = frozenset({"__init__.py", "base.py"})  # and every `_` module (_index.py)


def family_modules() -> list[str]:
    """The family modules' names, sorted: every .py file here but __init__, base and the `_` modules."""
    return sorted(n[:-3] for n in os.listdir(_HERE)
                  if n.endswith(".py") and n not in _NOT_FAMILIES and not n.startswith("_"))


@lru_cache(maxsize=1)
def families() -> tuple[Family, ...]:
    """Every family module's FAMILY, in module-name order (the folder is listed, so a new file registers). Loads
    all of them: for the tests and the index generator; a config parse goes through the index (family_for)."""
    return tuple(_family(name) for name in family_modules())


def _module(name: str) -> ModuleType:
    """kvplan/model/architectures/{name}.py, loaded from its file (importlib.util.spec_from_file_location) and
    entered in sys.modules as an import would, skipping the import system's search of every finder on
    sys.meta_path (a third of the cost of an import)."""
    qualified = f"{__name__}.{name}"
    module = sys.modules.get(qualified)
    if module is None:
        spec = importlib.util.spec_from_file_location(qualified, os.path.join(_HERE, f"{name}.py"))
        if spec is None or spec.loader is None:
            raise ImportError(f"cannot load kvplan/model/architectures/{name}.py")
        module = importlib.util.module_from_spec(spec)
        sys.modules[qualified] = module
        spec.loader.exec_module(module)
    return module


@cache
def _family(name: str) -> Family:
    family = getattr(_module(name), "FAMILY", None)
    if not isinstance(family, Family):
        raise TypeError(f"kvplan/model/architectures/{name}.py defines no FAMILY")
    return family


class _Index(NamedTuple):
    by_architecture: dict[str, Family]
    by_model_type: dict[str, Family]


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


# The boolean Family fields model_types_where answers for (the index lists each one's model types).
_FLAGS = tuple(field for field, default in Family._field_defaults.items() if isinstance(default, bool))


def index_source(all_families: Sequence[Family]) -> str:
    """The text of _index.py for these families (module name = family name): each key to the module that claims
    it, each boolean flag's model types, SGLang's state rule per model type, the multimodal model types."""
    index = build_index(all_families)
    state = {t: f.sglang_state for f in all_families for t in f.sglang_state_model_types}
    mm = sorted({t for f in all_families for t in f.mm_item_tokens_model_types})
    lines = ['"""Generated by scripts/architecture_index.py from the FAMILY of each module in this folder: do not',
             'edit. tests/test_architecture_registry.py fails when this is not what the modules define."""', "",
             "from kvplan.model.architectures.base import VisionTower", "",
             "BY_ARCHITECTURE: dict[str, str] = {"]
    lines += [f"    {k!r}: {f.name!r}," for k, f in sorted(index.by_architecture.items())]
    lines += ["}", "BY_MODEL_TYPE: dict[str, str] = {"]
    lines += [f"    {k!r}: {f.name!r}," for k, f in sorted(index.by_model_type.items())]
    lines += ["}", "# Family's boolean fields: the model types of every family that sets each.",
              "MODEL_TYPES_WHERE: dict[str, frozenset[str]] = {"]
    for flag in _FLAGS:
        types = sorted(t for f in all_families if getattr(f, flag) for t in f.model_types)
        lines += _set_entry(flag, types)
    lines += ["}", "# ModelTypeRules' fields: the model types each applies to, over every family.",
              "MODEL_TYPE_RULES: dict[str, frozenset[str]] = {"]
    for rule in ModelTypeRules._fields:
        types = sorted({t for f in all_families for t in getattr(f.model_type_rules, rule)})
        lines += _set_entry(rule, types)
    towers = {t: kind for f in all_families for t, kind in f.vision_towers}
    lines += ["}", "VISION_TOWERS: dict[str, VisionTower] = {"]
    lines += [f"    {k!r}: {v!r}," for k, v in sorted(towers.items())]
    composite = {t: (key, text) for f in all_families for t, key, text in f.composite_text_configs}
    lines += ["}", "COMPOSITE_TEXT_CONFIGS: dict[str, tuple[str, str]] = {"]
    lines += [f"    {k!r}: {v!r}," for k, v in sorted(composite.items())]
    vision_defaults = {t: (layers, hidden) for f in all_families for t, layers, hidden in f.sglang_vision_defaults}
    lines += ["}", "SGLANG_VISION_DEFAULTS: dict[str, tuple[int, int]] = {"]
    lines += [f"    {k!r}: {v!r}," for k, v in sorted(vision_defaults.items())]
    lines += ["}", "SGLANG_STATE: dict[str, str] = {"]
    lines += [f"    {k!r}: {v!r}," for k, v in sorted(state.items())]
    lines += ["}", f"MM_ITEM_TOKENS_MODEL_TYPES: frozenset[str] = frozenset({{{', '.join(repr(t) for t in mm)}}})",
              ""]
    return "\n".join(lines)


def _set_entry(key: str, types: Sequence[str]) -> list[str]:
    """`key: frozenset({...}),` as lines of _index.py, wrapped within 120 columns."""
    one = f"    {key!r}: frozenset({{{', '.join(repr(t) for t in types)}}})," if types else f"    {key!r}: frozenset(),"
    if len(one) <= 120:
        return [one]
    import textwrap  # the generator only
    body = textwrap.wrap(", ".join(repr(t) for t in types) + ",", 112, initial_indent=" " * 8,
                         subsequent_indent=" " * 8, break_on_hyphens=False)
    return [f"    {key!r}: frozenset({{", *body, "    }),"]


@lru_cache(maxsize=1)
def _lazy() -> ModuleType:
    return _module("_index")


def family_for(architectures: Sequence[str], model_type: str) -> Family:
    """The family of a config: its first registered architecture's, else its text model_type's, else DEFAULT.
    Imports that family's module only."""
    index = _lazy()
    for architecture in architectures:
        name = index.BY_ARCHITECTURE.get(architecture)
        if name is not None:
            return _family(name)
    name = index.BY_MODEL_TYPE.get(model_type)
    return DEFAULT if name is None else _family(name)


def model_types_where(flag: str) -> frozenset[str]:
    """The model types of every family whose boolean `flag` is set: for rules vLLM itself keys by model_type
    (config/model.py:_FLOAT16_NOT_SUPPORTED_MODELS), which must not follow the architecture."""
    where: dict[str, frozenset[str]] = _lazy().MODEL_TYPES_WHERE
    if flag not in where:
        raise KeyError(f"{flag!r} is not a boolean Family field")
    return where[flag]


def model_types_for(rule: str) -> frozenset[str]:
    """The model types a ModelTypeRules field lists, over every family (a rule vLLM keys by model_type)."""
    rules: dict[str, frozenset[str]] = _lazy().MODEL_TYPE_RULES
    if rule not in rules:
        raise KeyError(f"{rule!r} is not a ModelTypeRules field")
    return rules[rule]


def vision_tower(model_type: str) -> VisionTower | Literal[""]:
    """The tower counter (base.VisionTower) a family names for this top-level model type, "" for none."""
    towers: dict[str, VisionTower] = _lazy().VISION_TOWERS
    return towers.get(model_type, "")


def composite_text_config(model_type: str) -> tuple[str, str] | None:
    """(key, text model_type) of a vLLM composite config whose text config sits under another key
    (Family.composite_text_configs), None for the others."""
    composite: dict[str, tuple[str, str]] = _lazy().COMPOSITE_TEXT_CONFIGS
    return composite.get(model_type)


def sglang_vision_defaults(model_type: str) -> tuple[int, int] | None:
    """(num_hidden_layers, hidden_size) SGLang's own vision config class defaults to for this top-level model type
    (Family.sglang_vision_defaults), None for none."""
    defaults: dict[str, tuple[int, int]] = _lazy().SGLANG_VISION_DEFAULTS
    return defaults.get(model_type)


def sglang_state_rule(model_type: str) -> str:
    """SGLang's recurrent-state rule (Family.sglang_state) of the family whose sglang_state_model_types lists this
    text model type, "" for none."""
    state: dict[str, str] = _lazy().SGLANG_STATE
    return state.get(model_type, "")


def mm_item_tokens_stated(model_type: str) -> bool:
    """Whether some family states this top-level model type's multimodal item sizes
    (Family.mm_item_tokens_model_types)."""
    return model_type in _lazy().MM_ITEM_TOKENS_MODEL_TYPES


def gemma_line(model_type: str) -> bool:
    """Whether a model type is one of the Gemma line's (gemma, gemma2, gemma3_text, gemma3n, gemma4 …): SGLang
    keys a rule on the prefix (configs/model_config.py:_get_and_verify_dtype, `model_type.startswith("gemma")`)."""
    return model_type.startswith("gemma")
