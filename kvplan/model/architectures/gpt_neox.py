"""GPT-NeoX / Pythia: up/down MLP (vLLM models/gpt_neox.py)."""
from __future__ import annotations

from kvplan.model.architectures.base import Family, WeightRules

FAMILY = Family(
    name="gpt_neox",
    source="models/gpt_neox.py",
    architectures=("GPTNeoXForCausalLM",),
    model_types=("gpt_neox",),
    weights=WeightRules(gated_mlp=False),
)
