"""Qwen3.5 (dense and MoE, text and multimodal): gated-delta-net layers beside attention, as Qwen3-Next
(vLLM models/qwen3_5.py; the state: kvplan/model/families/recurrent.py; SGLang configs/qwen3_5.py: its text configs
subclass Qwen3NextConfig, so SGLang sizes their state with Qwen3-Next's mamba2_cache_params). Weights follow the
Llama-shape defaults, as kvplan counted Qwen3.5 before it had a family."""
from __future__ import annotations

from kvplan.model.architectures.base import Family, ModelTypeRules, RopeRules

_TYPES = ("qwen3_5", "qwen3_5_text", "qwen3_5_moe", "qwen3_5_moe_text")

FAMILY = Family(
    name="qwen3_5",
    source="models/qwen3_5.py",
    architectures=("Qwen3_5ForCausalLM", "Qwen3_5ForConditionalGeneration", "Qwen3_5MoeForCausalLM",
                   "Qwen3_5MoeForConditionalGeneration"),
    model_types=_TYPES,
    rope=RopeRules(mrope_single_positions=True),
    model_type_rules=ModelTypeRules(gated_delta_net=_TYPES),
    sglang_state="gdn",
    sglang_state_model_types=_TYPES,
)
