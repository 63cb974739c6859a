"""Multimodal and composite wrappers: the language model's own config inside the checkpoint's config.json.

vLLM reads `transformers_utils/config.py:get_hf_text_config` → transformers' `PretrainedConfig.get_text_config`
(`text_config`); Qwen2.5-Omni's thinker keeps it under `thinker_config.text_config`
(vLLM qwen2_5_omni_thinker.py). The defaults transformers' config classes fill in for keys a config omits
are applied here too, from kvplan/model/text_config_defaults.json (scripts/text_config_defaults.py).
"""
from __future__ import annotations

import json
import os
from collections.abc import Mapping
from functools import lru_cache
from typing import Any

from kvplan.errors import BadConfig
from kvplan.model.architectures import composite_text_config, model_types_for

# Where composite configs keep the language model.
_TEXT_CONFIG_PATHS: tuple[tuple[str, ...], ...] = (
    ("thinker_config", "text_config"),  # Qwen2.5-Omni / Qwen3-Omni thinker
    ("text_config",),
)


def text_config(config: Mapping[str, Any]) -> tuple[dict[str, Any], str, str]:
    """The language model's config (a copy, with its transformers class defaults filled in where a key is
    absent), its model_type, and a note naming the keys so filled ("" if none).

    transformers builds a sub-config without `model_type` as the composite class's default text model
    (e.g. LlavaConfig's text_config is a LlamaConfig), and every class fills an absent key with its default;
    vLLM reads the config through transformers, so it sees those values (text_config_defaults.json)."""
    node: Any = None
    path: tuple[str, ...] = ()
    # vLLM's own composite configs that build their text config from another key (Family.composite_text_configs).
    own = composite_text_config(str(config.get("model_type")))
    paths = ((own[0],), *_TEXT_CONFIG_PATHS) if own else _TEXT_CONFIG_PATHS
    for path in paths:
        node = config
        for key in path:
            node = node.get(key) if isinstance(node, Mapping) else None
        if node is None:
            continue
        if not isinstance(node, Mapping):
            raise BadConfig(f"config.json: {'.'.join(path)} must be an object")
        break
    else:
        path, node = (), config
    data = dict(node)
    top_type = config.get("model_type")
    default_type = own[1] if own and path == (own[0],) else _nested_default_type(top_type, path)
    model_type = str(data.get("model_type") or default_type or top_type or "")
    # A top-level config is left as it is: its classes' __post_init__ also rename keys (nemotron_h's mamba_expand
    # → expand …), which a table of defaults cannot follow; kvplan derives what those configs leave out.
    filled = fill_class_defaults(data, model_type) if path else ()
    note = (f"{'.'.join(path)} leaves {', '.join(filled)} to the defaults of transformers' `{model_type}` config "
            f"class (transformers {_defaults_table()['transformers']}, as vLLM reads it)") if filled else ""
    return data, model_type, note


def _nested_default_type(top_type: Any, path: tuple[str, ...]) -> str | None:
    """The model_type transformers gives a sub-config at `path` that names none: the composite class's
    default sub-config (text_config_defaults.json `sub_config_model_types`), hop by hop."""
    mt = top_type if isinstance(top_type, str) else None
    for key in path:
        if mt is None:
            return None
        mt = _defaults_table()["sub_config_model_types"].get(mt, {}).get(key)
    return mt


def fill_class_defaults(data: dict[str, Any], model_type: str) -> tuple[str, ...]:
    """Set each key the config leaves out (under neither its name nor an `attribute_map` alias) to its
    transformers class default, in place; the keys set."""
    filled = []
    aliases = _defaults_table()["attribute_map"].get(model_type, {})
    for key, value in _defaults_table()["defaults"].get(model_type, {}).items():
        if key not in data and not any(a in data for a, field in aliases.items() if field == key):
            data[key] = value
            filled.append(f"{key}={value}")
    return tuple(filled)


@lru_cache(maxsize=1)
def _defaults_table() -> dict[str, Any]:
    """kvplan/model/text_config_defaults.json (scripts/text_config_defaults.py, from the transformers release
    vLLM 0.33 pins). Read directly: importlib.resources would cost `kvplan size` start-up time."""
    with open(os.path.join(os.path.dirname(os.path.dirname(__file__)), "text_config_defaults.json"),
              encoding="utf-8") as f:
        table: dict[str, Any] = json.load(f)
    return table




def mm_prefix_lm(config: Mapping[str, Any], text: Mapping[str, Any]) -> bool:
    """Whether vLLM treats the model as a multimodal prefix LM (its attention backends then differ):
    transformers_utils/model_arch_config_convertor.py:is_mm_prefix_lm (vLLM 0.33), the model types of
    ModelTypeRules.mm_prefix_lm, or a config whose text model attends bidirectionally over images (gemma-4:
    use_bidirectional_attention "vision")."""
    if isinstance(config.get("is_mm_prefix_lm"), bool):
        return bool(config["is_mm_prefix_lm"])
    return str(config.get("model_type") or "") in model_types_for("mm_prefix_lm") or \
        text.get("use_bidirectional_attention") == "vision"
