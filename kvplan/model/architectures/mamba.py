"""Mamba-1: every layer a state-space block, no attention (vLLM models/mamba.py; its state: families/recurrent.py)."""
from __future__ import annotations

from kvplan.model.architectures.base import Family, ModelTypeRules

FAMILY = Family(
    name="mamba",
    source="models/mamba.py",
    architectures=("MambaForCausalLM",),
    model_types=("mamba",),
    pure_ssm=True,
    model_type_rules=ModelTypeRules(mamba1=("mamba",)),
    sglang_state="mamba1",
    sglang_state_model_types=("mamba",),
)
