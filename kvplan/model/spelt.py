"""The reader's last stage: what kvplan's consumers need from the text config beyond the KV geometry and the
weight shapes (the rotary cache's inputs, the quantization scales' layout, MTP and draft keys, per-model vLLM
switches, SGLang's view of the keys and what only its port reads: SglangFacts), as typed ModelSpec fields, so
that nothing past the reader reads config.json (ModelSpec keeps no copy of it). Each value is read as the
consumer that cites vLLM (or SGLang) read it before; pure, no I/O."""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kvplan.model.architectures import (
    Family,
    mm_item_tokens_stated,
    model_types_for,
    model_types_where,
    sglang_state_rule,
    sglang_vision_defaults,
)
from kvplan.model.spec import ConfigFacts, QuantLayout, RopeConfig, SglangFacts, SpeltText

# config/speculative.py: keys of the config that count MTP layers, per family.
MTP_LAYER_KEYS = ("num_nextn_predict_layers", "mtp_num_hidden_layers", "num_mtp_layers")
MAX_MTP_LAYERS = 16  # kvplan's bound on a stated MTP layer count (an assumption: none has more than a few)
# SGLang's get_context_length order (utils/hf_transformers/common.py), and n_positions (see SpeltText).
_SGLANG_LENGTH_KEYS = ("max_sequence_length", "seq_length", "max_seq_len", "model_max_length",
                       "max_position_embeddings", "n_positions")


def _positive(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0 else None


def _positive_int(value: Any, default: int) -> int:
    """value when a positive integer (not a bool), else default."""
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else default


def _first_int(data: Mapping[str, Any], keys: tuple[str, ...]) -> int | None:
    """The first of keys whose value is an integer (not a bool)."""
    return next((v for k in keys if isinstance(v := data.get(k), int) and not isinstance(v, bool)), None)


def _int_or_zero(value: Any) -> int:
    """int(value or 0), 0 for a value int() cannot read."""
    try:
        return int(value or 0)
    except (TypeError, ValueError, OverflowError):
        return 0


def rope_config(data: Mapping[str, Any]) -> RopeConfig:
    """rotary_embedding/__init__.py:get_rope's inputs as config.json gives them: rope_scaling (or transformers v5
    rope_parameters, whose full_attention entry when it is per layer type)."""
    found = data.get("rope_scaling") or data.get("rope_parameters")
    rope: Mapping[str, Any] = found if isinstance(found, Mapping) else {}
    per_layer_type = isinstance(rope.get("full_attention"), Mapping)
    if per_layer_type:
        rope = rope["full_attention"]
    # get_rope reads rope_parameters["partial_rotary_factor"] (transformers v5 configs such as Qwen3.5's keep it only
    # there); a per-layer-type entry (Gemma-4) is that family's own rope, not read here
    partial = _positive(data.get("partial_rotary_factor")) or (
        None if per_layer_type else _positive(rope.get("partial_rotary_factor")))
    return RopeConfig(
        disabled=bool(data.get("alibi")) or data.get("position_embedding_type") == "nope",
        partial_rotary_factor=partial,
        max_positions=_positive(data.get("max_position_embeddings")) or _positive(data.get("seq_length")),
        rope_type=str(rope.get("rope_type") or rope.get("type") or "default")[:64],
        factor=_positive(rope.get("factor")),
        original_max_positions=_positive(rope.get("original_max_position_embeddings")),
        mrope="mrope_section" in rope,
    )


def quant_layout(data: Mapping[str, Any]) -> QuantLayout:
    """The text config's quantization_config scale layout: GPTQ `sym` / `desc_act`; FP8 weight_block_size, or the
    first compressed-tensors config group's block_structure and strategy."""
    qc = data.get("quantization_config")
    if not isinstance(qc, Mapping):
        return QuantLayout()
    block, strategy = qc.get("weight_block_size"), None
    groups = qc.get("config_groups")
    if isinstance(groups, Mapping):
        for g in groups.values():
            w = g.get("weights") if isinstance(g, Mapping) else None
            if isinstance(w, Mapping):
                strategy = w.get("strategy")
                block = w.get("block_structure") or block
                break
    fp8_block = (int(block[0]), int(block[1])) if isinstance(block, list) and len(block) == 2 and all(
        isinstance(b, int) and b > 0 for b in block) else None
    return QuantLayout(symmetric=qc.get("sym", True) is True, desc_act=bool(qc.get("desc_act")), fp8_block=fp8_block,
                       channel_scales=strategy == "channel")


def spelt_text(data: Mapping[str, Any]) -> SpeltText:
    """The keys SGLang reads, as spelt (kvplan.sglang.pool, kvplan.sglang.fit follow SGLang's rules on them)."""
    nested = data.get("text_config")
    inner: Mapping[str, Any] = nested if isinstance(nested, dict) else {}
    text: Mapping[str, Any] = nested if isinstance(nested, dict) else data
    mt = data.get("model_type")
    rope = text.get("rope_scaling")
    given = isinstance(rope, dict) and bool(rope)
    factor = rope.get("factor", 1) if isinstance(rope, dict) else 1
    return SpeltText(
        model_type=None if mt is None else str(mt)[:128],
        dtype=data.get("dtype") or data.get("torch_dtype") or inner.get("dtype") or inner.get("torch_dtype"),
        has_auto_map="auto_map" in data,
        auto_model=isinstance(data.get("auto_map"), dict) and "AutoModel" in data["auto_map"],
        nested=any(isinstance(data.get(k), dict) for k in ("text_config", "thinker_config", "llm_config")),
        lengths=tuple((k, float(v)) for k in _SGLANG_LENGTH_KEYS
                      if isinstance(v := text.get(k), (int, float)) and not isinstance(v, bool)),
        has_max_position_embeddings="max_position_embeddings" in text,
        rope_scaling=given,
        rope_factor=float(factor) if given and isinstance(factor, (int, float)) else 1.0,
        rope_has_original=given and "original_max_position_embeddings" in rope,  # type: ignore[operator]
        rope_type=str(rope.get("rope_type"))[:64] if given and rope.get("rope_type") is not None else None,  # type: ignore[union-attr]
    )


# SGLang configs/model_config.py:get_total_num_kv_heads's attribute list; _get_sliding_window_size's.
_SGLANG_KV_HEAD_KEYS = ("n_head_kv", "num_kv_heads", "num_key_value_heads", "multi_query_group_num",
                        "num_attention_groups")
_SGLANG_WINDOW_KEYS = ("sliding_window_size", "sliding_window", "window_size")


def _entries_equal(value: Any, name: str, *, string: bool = False) -> tuple[bool, ...] | None:
    """Whether each entry of a list (or, with `string`, each character of a string) is `name`; None otherwise."""
    if isinstance(value, list) or (string and isinstance(value, str)):
        return tuple(v == name for v in value)
    return None


def _gemma4_full_attention(data: Mapping[str, Any]) -> tuple[int, int] | None:
    """SglangFacts.gemma4_full_attention: transformers 5.19's Gemma4TextConfig split, as SGLang flattens it (the
    model types: ModelTypeRules.sglang_gemma4_attention, the Gemma-4 family's)."""
    model_type = data.get("model_type")
    if not isinstance(model_type, str) or model_type not in model_types_for("sglang_gemma4_attention") or \
            "full_attention" not in (data.get("layer_types") or []):
        return None
    head = _positive_int(data.get("global_head_dim", 512), 0)
    heads = data.get("num_global_key_value_heads")
    if heads is None or data.get("attention_k_eq_v", True) is False:
        heads = data.get("num_key_value_heads")
    kv = _positive_int(heads, 0)
    return (head, kv) if head and kv else None


def sglang_facts(data: Mapping[str, Any], top: Mapping[str, Any], config_model_type: str) -> SglangFacts:
    """The keys only kvplan.sglang reads, as SGLang 0.5.23 reads them (the rules cited on SglangFacts);
    `config_model_type` the top-level config's model_type as ModelSpec holds it."""
    mt = data.get("model_type")
    text_type = str(mt if mt is not None else "")
    vision = top.get("vision_config")
    vision = vision if isinstance(vision, Mapping) else {}
    ssm = data.get("mamba_ssm_dtype")
    offset = data.get("index_skip_topk_offset")
    return SglangFacts(
        state_rule=sglang_state_rule(text_type),
        mamba_ssm_dtype=None if ssm is None else str(ssm)[:64],
        stated_kv_heads=_first_int(data, _SGLANG_KV_HEAD_KEYS),
        language_model_only=data.get("language_model_only") is True,
        has_sliding_window=data.get("sliding_window") is not None,
        window_size=_first_int(data, _SGLANG_WINDOW_KEYS),
        learnable_sink=bool(data.get("learnable_sink")),
        index_head_dim=_positive_int(data.get("index_head_dim"), 0),
        index_kpool=_positive_int(data.get("index_kpool"), 1),
        indexer_shared=_entries_equal(data.get("indexer_types"), "shared"),
        cli_factor=_positive_int(data.get("cli_factor"), 1),
        topk_pattern_shared=_entries_equal(data.get("index_topk_pattern"), "S", string=True),
        index_topk_freq=_positive_int(data.get("index_topk_freq"), 1),
        skip_topk_offset=offset if isinstance(offset, int) and not isinstance(offset, bool) and offset > 0 else 0,
        has_vision_config=bool(vision),
        vision_layers=_positive_int(vision.get("num_hidden_layers"), 0),
        vision_hidden=_positive_int(vision.get("hidden_size"), 0),
        vision_defaults=sglang_vision_defaults(config_model_type),  # Family.sglang_vision_defaults
        hopper_qwen3_vl_type=config_model_type in model_types_for("sglang_hopper_qwen3_vl"),
        nextn_predict_layers=_nextn_layers(data.get("num_nextn_predict_layers")),
        gemma4_full_attention=_gemma4_full_attention(data),
    )


def _nextn_layers(value: object) -> int | None:
    """A positive integer `num_nextn_predict_layers`, bounded by MAX_MTP_LAYERS (None otherwise)."""
    if isinstance(value, int) and not isinstance(value, bool) and value > 0:
        return min(value, MAX_MTP_LAYERS)
    return None


def consumer_fields(data: Mapping[str, Any], top: Mapping[str, Any], family: Family, model_type: str,
                    config_model_type: str) -> dict[str, Any]:
    """The ModelSpec fields kvplan.model.config leaves to this stage (see ModelSpec): `data` the text config,
    `top` the top-level config.json."""
    mtp = next((min(v, MAX_MTP_LAYERS) for k in MTP_LAYER_KEYS
                if isinstance(v := data.get(k), int) and not isinstance(v, bool) and v > 0), family.mtp_default_layers)
    unsafe = sorted({model_type, config_model_type} & model_types_where("float16_unsafe"))
    layer_types = data.get("layer_types")
    return {"family": family, "facts": ConfigFacts(
        rope=rope_config(data),
        # a multimodal checkpoint keeps quantization_config beside text_config (Qwen3-VL-FP8); vLLM reads the
        # top-level one, then the text config's (model_loader/weight_utils.py:get_quant_config)
        quant_layout=quant_layout(top if "quantization_config" in top else data),
        parallel_attn=bool(data.get("parallel_attn")),
        per_layer_input_size=_int_or_zero(data.get("hidden_size_per_layer_input")),
        per_layer_input_vocab=_int_or_zero(data.get("vocab_size_per_layer_input")),
        double_wide_mlp=data.get("use_double_wide_mlp") is True,
        mtp_layers=mtp,
        n_predict=data.get("n_predict"),
        draft_vocab_size=_int_or_zero(data.get("draft_vocab_size")),
        index_topk=data.get("index_topk"),
        swa_attention_sinks=bool(data.get("add_swa_attention_sink_bias")) or bool(
            data.get("swa_attention_sink_enabled")),
        layer_type_names=tuple(str(t) for t in layer_types) if isinstance(layer_types, list) else None,
        float16_unsafe_model_type=unsafe[0] if unsafe else "",
        mm_item_tokens_stated=mm_item_tokens_stated(config_model_type),
        spelt=spelt_text(data),
        sglang=sglang_facts(data, top, config_model_type),
    )}

