"""BLOOM: ALiBi positions (no rotary cache), up/down MLP (vLLM models/bloom.py)."""
from __future__ import annotations

from kvplan.model.architectures.base import Family, RopeRules, WeightRules

FAMILY = Family(
    name="bloom",
    source="models/bloom.py",
    architectures=("BloomForCausalLM",),
    model_types=("bloom",),
    weights=WeightRules(gated_mlp=False),
    rope=RopeRules(rotary=False),
)
