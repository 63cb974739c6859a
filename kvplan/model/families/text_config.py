"""Multimodal and composite wrappers: the language model's own config inside the checkpoint's config.json.

vLLM reads `transformers_utils/config.py:get_hf_text_config` → transformers' `PretrainedConfig.get_text_config`
(`text_config`); Qwen2.5-Omni's thinker keeps it under `thinker_config.text_config`
(vLLM qwen2_5_omni_thinker.py). Defaults that transformers fills in for keys a
multimodal config omits are applied here too.
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kvplan.errors import BadConfig

# transformers' Gemma3TextConfig defaults: the multimodal gemma-3 configs omit these keys and vLLM reads
# them through transformers (transformers/models/gemma3/configuration_gemma3.py).
_GEMMA3_TEXT_DEFAULTS: dict[str, Any] = {
    "vocab_size": 262_208,
    "hidden_size": 2304,
    "intermediate_size": 9216,
    "num_hidden_layers": 26,
    "num_attention_heads": 8,
    "num_key_value_heads": 4,
    "head_dim": 256,
    "max_position_embeddings": 131_072,
    "sliding_window": 4096,
    "sliding_window_pattern": 6,
    "tie_word_embeddings": True,
}
# transformers' Gemma2Config defaults (configuration_gemma2.py).
_GEMMA2_DEFAULTS: dict[str, Any] = {
    "vocab_size": 256_000,
    "head_dim": 256,
    "max_position_embeddings": 8192,
    "sliding_window": 4096,
    "tie_word_embeddings": True,
}
# transformers' Qwen2Config defaults (configuration_qwen2.py): LLaVA-OneVision's qwen2 text_config omits them.
_QWEN2_DEFAULTS: dict[str, Any] = {"max_position_embeddings": 32768}
_DEFAULTS_BY_TYPE: dict[str, dict[str, Any]] = {
    "qwen2": _QWEN2_DEFAULTS,
    "gemma3_text": _GEMMA3_TEXT_DEFAULTS,
    "gemma3": _GEMMA3_TEXT_DEFAULTS,
    "gemma2": _GEMMA2_DEFAULTS,
}
# Where composite configs keep the language model.
_TEXT_CONFIG_PATHS: tuple[tuple[str, ...], ...] = (
    ("thinker_config", "text_config"),  # Qwen2.5-Omni / Qwen3-Omni thinker
    ("text_config",),
)


def text_config(config: Mapping[str, Any]) -> tuple[dict[str, Any], str]:
    """The language model's config (a copy, with transformers' defaults applied) and its model_type."""
    for path in _TEXT_CONFIG_PATHS:
        node: Any = config
        for key in path:
            node = node.get(key) if isinstance(node, Mapping) else None
        if node is None:
            continue
        if not isinstance(node, Mapping):
            raise BadConfig(f"config.json: {'.'.join(path)} must be an object")
        data = dict(node)
        break
    else:
        data = dict(config)
    model_type = str(data.get("model_type") or config.get("model_type") or "")
    for k, v in _DEFAULTS_BY_TYPE.get(model_type, {}).items():
        if data.get(k) is None:
            data[k] = v
    return data, model_type


# transformers_utils/model_arch_config_convertor.py:is_mm_prefix_lm (vLLM 0.33): these model types, or a config
# whose text model attends bidirectionally over images (gemma-4: use_bidirectional_attention "vision").
_MM_PREFIX_LM_MODELS = frozenset({"bagel", "gemma3", "molmo2", "moondream3", "paligemma"})


def mm_prefix_lm(config: Mapping[str, Any], text: Mapping[str, Any]) -> bool:
    """Whether vLLM treats the model as a multimodal prefix LM (its attention backends then differ)."""
    if isinstance(config.get("is_mm_prefix_lm"), bool):
        return bool(config["is_mm_prefix_lm"])
    return str(config.get("model_type") or "") in _MM_PREFIX_LM_MODELS or \
        text.get("use_bidirectional_attention") == "vision"
