"""Llama: its MLP.forward rebinds `x` to the SiluAndMul output (vLLM models/llama.py:LlamaMLP.forward:
`x, _ = self.gate_up_proj(x); x = self.act_fn(x)`), so gate_up is freed before down_proj. Otherwise the Llama
shape every default of kvplan.model.architectures.base describes."""
from __future__ import annotations

from kvplan.model.architectures.base import Family

FAMILY = Family(
    name="llama",
    source="models/llama.py",
    architectures=("LlamaForCausalLM",),
    model_types=("llama",),
    mlp_rebinds_gate_up=True,
)
