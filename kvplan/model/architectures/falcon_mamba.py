"""Falcon-Mamba: Mamba-1 blocks only, no attention (vLLM models/mamba.py serves FalconMambaForCausalLM)."""
from __future__ import annotations

from kvplan.model.architectures.base import Family, ModelTypeRules

FAMILY = Family(
    name="falcon_mamba",
    source="models/mamba.py",
    architectures=("FalconMambaForCausalLM",),
    model_types=("falcon_mamba",),
    pure_ssm=True,
    model_type_rules=ModelTypeRules(mamba1=("falcon_mamba",)),
    sglang_state="mamba1",
    sglang_state_model_types=("falcon_mamba",),
)
