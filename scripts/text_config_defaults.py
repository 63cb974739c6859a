#!/usr/bin/env python3
"""Write kvplan/model/text_config_defaults.json: the defaults transformers' config classes give the fields kvplan
reads, for every model_type transformers (and vLLM's own config registry) can load.

vLLM reads config.json through transformers (`transformers_utils/config.py:get_config` → AutoConfig, or vLLM's own
class for a model_type in `_CONFIG_REGISTRY`), so a key a config leaves out takes its class default: a
`text_config` without `num_hidden_layers` gets the text model class's value. A composite config's `text_config`
without `model_type` is built as the composite class's default text model (e.g. LlavaConfig: llama).

Dev tool, stdlib only in kvplan's sense: run it with the python of an environment holding the transformers
release vLLM 0.33 pins (`Requires-Dist: transformers<5.21.0,>=5.16.1`; the vllm-cuda-oracle venv has 5.19.0 and
vLLM 0.33.0), never kvplan's own venv:

    /work/oracle/vllm033/venv/bin/python scripts/text_config_defaults.py

It records, per model_type, the class default of each key in KEYS that has a JSON value other than null
(a null default is one transformers derives in __post_init__, e.g. num_key_value_heads = num_attention_heads,
head_dim = hidden_size // num_attention_heads: kvplan derives those itself), and, per composite model_type, the
model_type its default sub-config has under each sub-config key, and the class's `attribute_map` aliases of those
keys (a config that spells a field by its alias, e.g. nemotron_h's `attention_head_dim` for `head_dim`, sets it).
"""
from __future__ import annotations

import dataclasses
import inspect
import json
import sys
from pathlib import Path
from typing import Any

OUT = Path(__file__).resolve().parents[1] / "kvplan" / "model" / "text_config_defaults.json"

# The config keys kvplan reads for the KV cache, the context length and the weight estimate
# (kvplan/model/config.py and kvplan/model/families/*: classic key aliases, layer patterns, MoE, MLA, Mamba).
KEYS = (
    "vocab_size", "padded_vocab_size", "n_vocab",
    "hidden_size", "n_embd", "d_model", "model_dim",
    "num_hidden_layers", "n_layer", "num_layers", "n_layers",
    "num_attention_heads", "n_head", "n_heads", "num_heads", "attention_heads",
    "num_key_value_heads", "n_head_kv", "num_kv_heads", "multi_query_group_num", "num_attention_groups",
    "multi_query", "multi_query_attention", "new_decoder_architecture",
    "head_dim", "hidden_size_per_head", "attention_head_dim", "kv_channels", "global_head_dim",
    "num_global_key_value_heads", "v_head_dim",
    "intermediate_size", "moe_intermediate_size", "shared_expert_intermediate_size", "shared_intermediate_size",
    "num_experts", "num_local_experts", "n_routed_experts", "n_shared_experts", "moe_num_experts",
    "num_experts_per_tok", "first_k_dense_replace", "moe_layer_freq", "decoder_sparse_step",
    "interleave_moe_layer_step", "mlp_only_layers", "num_dense_layers",
    "kv_lora_rank", "q_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim", "index_topk", "index_head_dim",
    "max_position_embeddings", "n_positions", "max_seq_len", "seq_length", "max_sequence_length",
    "max_target_positions", "seq_len",
    "sliding_window", "use_sliding_window", "max_window_layers", "sliding_window_pattern", "attention_chunk_size",
    "layer_types", "num_kv_shared_layers", "full_attention_interval",
    "tie_word_embeddings",
    "mamba_d_state", "mamba_d_conv", "mamba_expand", "mamba_n_heads", "mamba_head_dim", "mamba_n_groups",
    "mamba_d_head", "mamba_num_heads", "ssm_state_size", "state_size", "conv_kernel", "expand", "n_groups",
    "linear_conv_kernel_dim", "linear_key_head_dim", "linear_num_key_heads", "linear_num_value_heads",
    "linear_value_head_dim",
)
SUB_CONFIG_KEYS = ("text_config", "language_config", "llm_config", "thinker_config", "decoder_config")


def _jsonable(value: Any) -> bool:
    if isinstance(value, (bool, int, float, str)):
        return value == value and value not in (float("inf"), float("-inf"))
    if isinstance(value, (list, tuple)):
        return all(isinstance(v, (bool, int, float, str)) for v in value)
    return False


def class_defaults(cls: type) -> dict[str, Any]:
    """The declared default of each KEYS field (dataclass fields in transformers 5, else __init__ keywords)."""
    declared: dict[str, Any] = {}
    if dataclasses.is_dataclass(cls):
        for f in dataclasses.fields(cls):
            if f.default is not dataclasses.MISSING:
                declared[f.name] = f.default
            elif f.default_factory is not dataclasses.MISSING:
                try:
                    declared[f.name] = f.default_factory()
                except Exception:  # noqa: BLE001 - a factory that needs context has no static default
                    continue
    else:
        for name, p in inspect.signature(cls.__init__).parameters.items():
            if p.default is not inspect.Parameter.empty:
                declared[name] = p.default
    out = {}
    for key in KEYS:
        value = declared.get(key)
        if value is not None and _jsonable(value):
            out[key] = list(value) if isinstance(value, tuple) else value
    return out


def sub_config_types(cls: type) -> dict[str, str]:
    """The model_type of each sub-config a default instance of this composite class holds."""
    if not getattr(cls, "sub_configs", None):
        return {}
    try:
        inst = cls()
    except Exception:  # noqa: BLE001 - a class without a no-argument default has none to record
        return {}
    out = {}
    for key in SUB_CONFIG_KEYS:
        sub = getattr(inst, key, None)
        mt = getattr(sub, "model_type", None)
        if isinstance(mt, str) and mt:
            out[key] = mt
    return out


def main() -> None:
    import transformers
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING

    classes: dict[str, type] = {}
    for mt in sorted(CONFIG_MAPPING.keys()):
        try:
            classes[mt] = CONFIG_MAPPING[mt]
        except Exception:  # noqa: BLE001 - a class transformers cannot import is one vLLM cannot load either
            continue
    vllm_version = None
    try:  # vLLM's own config classes win for their model_types (transformers_utils/config.py:_CONFIG_REGISTRY)
        import vllm
        from vllm.transformers_utils.config import _CONFIG_REGISTRY

        vllm_version = vllm.__version__
        for mt in sorted(_CONFIG_REGISTRY):
            try:
                classes[mt] = _CONFIG_REGISTRY[mt]
            except Exception:  # noqa: BLE001
                continue
    except ImportError:
        pass
    defaults, sub_types, aliases = {}, {}, {}
    for mt, cls in sorted(classes.items()):
        d = class_defaults(cls)
        if d:
            defaults[mt] = d
        amap = {a: f for a, f in (getattr(cls, "attribute_map", None) or {}).items()
                if isinstance(a, str) and isinstance(f, str) and f in d}
        if amap:
            aliases[mt] = amap
        s = sub_config_types(cls)
        if s:
            sub_types[mt] = s
    table = {
        "format": 1,
        "transformers": transformers.__version__,
        "vllm": vllm_version,
        "generated_by": "scripts/text_config_defaults.py",
        "keys": list(KEYS),
        "defaults": defaults,
        "sub_config_model_types": sub_types,
        "attribute_map": aliases,
    }
    OUT.write_text(json.dumps(table, indent=0, sort_keys=True, separators=(",", ":")) + "\n")
    print(f"{OUT}: {len(defaults)} model types, {len(sub_types)} composites "
          f"(transformers {transformers.__version__}, vLLM {vllm_version})", file=sys.stderr)


if __name__ == "__main__":
    main()
