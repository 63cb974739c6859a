"""MiniMax-Text-01 / MiniMax-M1: lightning (linear) attention layers beside softmax attention, each keeping a
per-request state of num_attention_heads x head_dim (vLLM models/minimax_text_01.py; the state:
kvplan/model/families/recurrent.py). MiniMax-M2 (full attention) is not this family."""
from __future__ import annotations

from kvplan.model.architectures.base import Family, ModelTypeRules

FAMILY = Family(
    name="minimax",
    source="models/minimax_text_01.py",
    architectures=("MiniMaxForCausalLM", "MiniMaxText01ForCausalLM", "MiniMaxM1ForCausalLM"),
    model_types=("minimax", "minimax_m1", "minimax_text_01"),
    model_type_rules=ModelTypeRules(lightning_attention=("minimax", "minimax_m1", "minimax_text_01")),
)
