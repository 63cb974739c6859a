"""StarCoder2: up/down MLP (vLLM models/starcoder2.py, Starcoder2MLP c_fc / c_proj)."""
from __future__ import annotations

from kvplan.model.architectures.base import Family, WeightRules

FAMILY = Family(
    name="starcoder2",
    source="models/starcoder2.py",
    architectures=("Starcoder2ForCausalLM",),
    model_types=("starcoder2",),
    weights=WeightRules(gated_mlp=False),
)
