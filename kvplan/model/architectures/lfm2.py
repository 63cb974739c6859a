"""LFM2 and LFM2-MoE: its short-convolution layers carry the MLP too (vLLM models/lfm2.py, lfm2_moe.py)."""
from __future__ import annotations

from kvplan.model.architectures.base import Family, WeightRules

FAMILY = Family(
    name="lfm2",
    source="models/lfm2.py, lfm2_moe.py, lfm2_vl.py",
    architectures=("Lfm2ForCausalLM", "Lfm2MoeForCausalLM", "Lfm2VlForConditionalGeneration"),
    model_types=("lfm2", "lfm2_moe"),
    weights=WeightRules(recurrent_layers_have_mlp=True),
    sglang_state="short_conv",
    sglang_state_model_types=("lfm2", "lfm2_moe", "lfm2_vl"),
)
