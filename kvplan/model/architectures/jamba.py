"""Jamba: its Mamba layers carry the MLP (or MoE) too; attention without rotary embedding (vLLM models/jamba.py)."""
from __future__ import annotations

from kvplan.model.architectures.base import Family, RopeRules, WeightRules

FAMILY = Family(
    name="jamba",
    source="models/jamba.py; modeling_jamba.py",
    architectures=("JambaForCausalLM",),
    model_types=("jamba",),
    weights=WeightRules(recurrent_layers_have_mlp=True),
    rope=RopeRules(rotary=False),
)
