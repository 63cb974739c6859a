"""GPT-BigCode (StarCoder): learned positions, no rotary cache, up/down MLP; its multi_query KV head:
families/classic.py (vLLM models/gpt_bigcode.py; transformers GPTBigCodeConfig attribute_map n_positions)."""
from __future__ import annotations

from kvplan.model.architectures.base import Family, RopeRules, WeightRules

FAMILY = Family(
    name="gpt_bigcode",
    source="models/gpt_bigcode.py",
    architectures=("GPTBigCodeForCausalLM",),
    model_types=("gpt_bigcode",),
    weights=WeightRules(gated_mlp=False),
    rope=RopeRules(rotary=False),
    n_positions_alias=True,
)
