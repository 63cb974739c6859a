"""Mamba-2: every layer a state-space block, no attention (vLLM models/mamba2.py; its state: families/recurrent.py)."""
from __future__ import annotations

from kvplan.model.architectures.base import Family, ModelTypeRules

FAMILY = Family(
    name="mamba2",
    source="models/mamba2.py",
    architectures=("Mamba2ForCausalLM",),
    model_types=("mamba2",),
    pure_ssm=True,
    model_type_rules=ModelTypeRules(mamba2=("mamba2",)),
)
