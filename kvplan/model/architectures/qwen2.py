"""Qwen2, Qwen2-MoE, Qwen2-VL, Qwen2.5-VL: q, k, v biases; with use_sliding_window the layers from max_window_layers on
slide; Qwen2-MoE's shared expert has a hidden → 1 gate (vLLM models/qwen2.py, qwen2_moe.py
Qwen2MoeSparseMoeBlock.shared_expert_gate, qwen2_vl.py, qwen2_5_vl.py)."""
from __future__ import annotations

from kvplan.model.architectures.base import Family, ModelTypeRules, WeightRules

FAMILY = Family(
    name="qwen2",
    source="models/qwen2.py, qwen2_moe.py, qwen2_vl.py, qwen2_5_vl.py",
    architectures=("Qwen2ForCausalLM", "Qwen2MoeForCausalLM", "Qwen2VLForConditionalGeneration",
                   "Qwen2_5_VLForConditionalGeneration"),
    model_types=("qwen2", "qwen2_moe", "qwen2_vl", "qwen2_5_vl"),
    weights=WeightRules(attention_bias="qkv", shared_expert_gate=True),
    sliding_layout="max_window_layers",
    vision_towers=(("qwen2_5_vl", "qwen2_5_vl"), ("qwen2_vl", "qwen2_vl")),
    model_type_rules=ModelTypeRules(sglang_flat_text_config=("qwen2_vl", "qwen2_5_vl")),
    # vLLM 0.10.2 and 0.33.0 models/qwen2_moe.py (Qwen2MoeModel, Qwen2MoeForCausalLM): the embedding and LM head
    # unguarded, on every PP stage.
    pp_vocab_every_stage=("Qwen2MoeForCausalLM",),
)
