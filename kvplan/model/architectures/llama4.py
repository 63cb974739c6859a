"""Llama-4: q / k norms (use_qk_norm) and chunked local attention on its RoPE layers (the reader,
kvplan.model.config; vLLM models/llama4.py)."""
from __future__ import annotations

from kvplan.model.architectures.base import Family, ModelTypeRules, WeightRules

FAMILY = Family(
    name="llama4",
    source="models/llama4.py, mllama4.py",
    architectures=("Llama4ForCausalLM", "Llama4ForConditionalGeneration"),
    model_types=("llama4_text",),
    weights=WeightRules(qk_norm=True),
    model_type_rules=ModelTypeRules(chunked_local_attention=("llama4", "llama4_text"),
                                    shared_expert_dense_width=("llama4", "llama4_text")),
    vision_towers=(("llama4", "llama4"),),
)
