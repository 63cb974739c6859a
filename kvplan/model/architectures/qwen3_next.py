"""Qwen3-Next: gated-delta-net and attention layers (families/recurrent.py), q_norm / k_norm, a gated shared
expert; its MTP module defaults to one layer (vLLM models/qwen3_next.py; qwen3_next_mtp.py:
`getattr(config, "num_nextn_predict_layers", 1)`)."""
from __future__ import annotations

from kvplan.model.architectures.base import Family, WeightRules

FAMILY = Family(
    name="qwen3_next",
    source="models/qwen3_next.py, qwen3_next_mtp.py",
    architectures=("Qwen3NextForCausalLM",),
    model_types=("qwen3_next",),
    weights=WeightRules(qk_norm=True, shared_expert_gate=True),
    mtp_default_layers=1,
    # SGLang configs/qwen3_5.py: Qwen3_5TextConfig and Qwen3_5MoeTextConfig subclass Qwen3NextConfig, so Qwen3.5's
    # text configs size their state with Qwen3-Next's mamba2_cache_params.
    sglang_state="gdn",
    sglang_state_model_types=("qwen3_next", "qwen3_5", "qwen3_5_text", "qwen3_5_moe", "qwen3_5_moe_text"),
)
