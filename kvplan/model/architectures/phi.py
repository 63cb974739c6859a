"""Phi-1 / Phi-2: up/down MLP (vLLM models/phi.py)."""
from __future__ import annotations

from kvplan.model.architectures.base import Family, WeightRules

FAMILY = Family(
    name="phi",
    source="models/phi.py",
    architectures=("PhiForCausalLM",),
    model_types=("phi",),
    weights=WeightRules(gated_mlp=False),
)
