"""Falcon (and its RefinedWeb configs): LayerNorm with biases, up/down MLP of 4 × hidden (vLLM models/falcon.py;
transformers modeling_falcon.py). Its KV heads: n_head_kv with new_decoder_architecture, else one
under multi_query; its parallel attention / MLP block (parallel_attn) in the reader."""
from __future__ import annotations

from kvplan.model.architectures.base import Family, WeightRules

FAMILY = Family(
    name="falcon",
    source="models/falcon.py; modeling_falcon.py",
    architectures=("FalconForCausalLM", "RWForCausalLM"),
    model_types=("falcon", "RefinedWeb", "RefinedWebModel"),
    weights=WeightRules(layernorm_bias=True, gated_mlp=False, four_x_mlp=True),
    kv_heads="falcon",
)
