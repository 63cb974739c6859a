"""OPT: learned positions with an offset of 2 rows, LayerNorm with biases, biased attention and fc1/fc2 MLP,
tied LM head (vLLM models/opt.py; transformers modeling_opt.py OPTLearnedPositionalEmbedding offset = 2)."""
from __future__ import annotations

from kvplan.model.architectures.base import Family, RopeRules, WeightRules

FAMILY = Family(
    name="opt",
    source="models/opt.py; modeling_opt.py",
    architectures=("OPTForCausalLM",),
    model_types=("opt",),
    weights=WeightRules(attention_bias="all", mlp_bias=True, layernorm_bias=True, learned_positions=2, gated_mlp=False),
    rope=RopeRules(rotary=False),
    tied_by_default=True,
)
