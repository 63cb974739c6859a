"""Qwen3, Qwen3-MoE and the Qwen3-VL language models: per-head q_norm / k_norm, no biases; the layers from
max_window_layers on slide (vLLM models/qwen3.py, qwen3_moe.py, qwen3_vl.py, qwen3_vl_moe.py)."""
from __future__ import annotations

from kvplan.model.architectures.base import Family, ModelTypeRules, RopeRules, WeightRules

FAMILY = Family(
    name="qwen3",
    source="models/qwen3.py, qwen3_moe.py, qwen3_vl.py, qwen3_vl_moe.py",
    architectures=("Qwen3ForCausalLM", "Qwen3MoeForCausalLM", "Qwen3VLForConditionalGeneration",
                   "Qwen3VLMoeForConditionalGeneration"),
    model_types=("qwen3", "qwen3_moe", "qwen3_vl_text", "qwen3_vl_moe_text"),
    weights=WeightRules(qk_norm=True),
    rope=RopeRules(mrope_single_positions=True),
    sliding_layout="max_window_layers",
    vision_towers=(("qwen3_vl", "qwen3_vl"), ("qwen3_vl_moe", "qwen3_vl")),
    model_type_rules=ModelTypeRules(sglang_hopper_qwen3_vl=("qwen3_vl", "qwen3_vl_moe")),
    # vLLM 0.10.2 and 0.33.0 qwen3_moe.py (Qwen3MoeModel, Qwen3MoeForCausalLM), 0.11.0 and 0.33.0 qwen3_vl_moe.py
    # (Qwen3MoeLLMModel, Qwen3MoeLLMForCausalLM): the embedding and LM head unguarded, on every PP stage.
    pp_vocab_every_stage=("Qwen3MoeForCausalLM", "Qwen3VLMoeForConditionalGeneration"),
)
