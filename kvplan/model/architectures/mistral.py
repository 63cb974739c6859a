"""Mistral: its MLP.forward rebinds `x` to the SiluAndMul output (vLLM models/mistral.py:MistralMLP.forward,
as llama.py's), so gate_up is freed before down_proj."""
from __future__ import annotations

from kvplan.model.architectures.base import Family

FAMILY = Family(
    name="mistral",
    source="models/mistral.py",
    architectures=("MistralForCausalLM",),
    model_types=("mistral",),
    mlp_rebinds_gate_up=True,
    vision_towers=(("mistral3", "pixtral"),),
)
