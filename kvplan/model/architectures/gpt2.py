"""GPT-2: learned absolute positions, LayerNorm with biases, biased attention and up/down MLP of 4 × hidden,
tied LM head (vLLM models/gpt2.py; transformers modeling_gpt2.py, GPT2Config n_inner=None,
tie_word_embeddings=True, attribute_map max_position_embeddings → n_positions)."""
from __future__ import annotations

from kvplan.model.architectures.base import Family, RopeRules, WeightRules

FAMILY = Family(
    name="gpt2",
    source="models/gpt2.py; modeling_gpt2.py",
    architectures=("GPT2LMHeadModel",),
    model_types=("gpt2",),
    weights=WeightRules(attention_bias="all", mlp_bias=True, layernorm_bias=True, learned_positions=0, gated_mlp=False,
                        four_x_mlp=True),
    rope=RopeRules(rotary=False),
    tied_by_default=True,
    n_positions_alias=True,
)
