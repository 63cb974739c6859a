"""GPT-J: up/down MLP of 4 × hidden (n_inner=None) (vLLM models/gpt_j.py; transformers GPTJConfig attribute_map
n_positions)."""
from __future__ import annotations

from kvplan.model.architectures.base import Family, WeightRules

FAMILY = Family(
    name="gptj",
    source="models/gpt_j.py",
    architectures=("GPTJForCausalLM",),
    model_types=("gptj",),
    weights=WeightRules(gated_mlp=False, four_x_mlp=True),
    n_positions_alias=True,
)
