"""Cohere Command-R: LayerNorm with weights and biases, tied LM head by default (vLLM models/commandr.py;
transformers CohereConfig tie_word_embeddings=True)."""
from __future__ import annotations

from kvplan.model.architectures.base import Family, WeightRules

FAMILY = Family(
    name="cohere",
    source="models/commandr.py; modeling_cohere.py",
    architectures=("CohereForCausalLM",),
    model_types=("cohere",),
    weights=WeightRules(layernorm_bias=True),
    tied_by_default=True,
)
