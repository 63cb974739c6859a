"""Granite-4 (GraniteMoeHybrid): its Mamba layers carry the MLP too (vLLM models/granitemoehybrid.py;
transformers modeling_granitemoehybrid.py)."""
from __future__ import annotations

from kvplan.model.architectures.base import Family, WeightRules

FAMILY = Family(
    name="granitemoehybrid",
    source="models/granitemoehybrid.py",
    architectures=("GraniteMoeHybridForCausalLM",),
    model_types=("granitemoehybrid",),
    weights=WeightRules(recurrent_layers_have_mlp=True),
    sglang_state="granite",
    sglang_state_model_types=("granitemoehybrid",),
)
