"""Qwen3-Next: gated-delta-net and attention layers (families/recurrent.py), q_norm / k_norm, a gated shared
expert; its MTP module defaults to one layer (vLLM models/qwen3_next.py; qwen3_next_mtp.py:
`getattr(config, "num_nextn_predict_layers", 1)`)."""
from __future__ import annotations

from kvplan.model.architectures.base import Family, ModelTypeRules, WeightRules

FAMILY = Family(
    name="qwen3_next",
    source="models/qwen3_next.py, qwen3_next_mtp.py",
    architectures=("Qwen3NextForCausalLM",),
    model_types=("qwen3_next",),
    weights=WeightRules(qk_norm=True, shared_expert_gate=True),
    mtp_default_layers=1,
    model_type_rules=ModelTypeRules(gated_delta_net=("qwen3_next",)),
    sglang_state="gdn",
    sglang_state_model_types=("qwen3_next",),
    # vLLM 0.33.0 qwen3_next.py (Qwen3NextModel, Qwen3NextForCausalLM): the embedding and LM head unguarded, on
    # every PP stage.
    pp_vocab_every_stage=("Qwen3NextForCausalLM",),
)
