"""MPT: ALiBi positions, no rotary cache (vLLM models/mpt.py)."""
from __future__ import annotations

from kvplan.model.architectures.base import Family, RopeRules

FAMILY = Family(
    name="mpt",
    source="models/mpt.py",
    architectures=("MPTForCausalLM", "MptForCausalLM"),
    model_types=("mpt",),
    rope=RopeRules(rotary=False),
)
