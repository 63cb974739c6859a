"""XGLM: up/down MLP, tied LM head by default (transformers modeling_xglm.py, XGLMConfig
tie_word_embeddings=True). No vLLM class of its own."""
from __future__ import annotations

from kvplan.model.architectures.base import Family, WeightRules

FAMILY = Family(
    name="xglm",
    source="modeling_xglm.py",
    architectures=(),
    model_types=("xglm",),
    weights=WeightRules(gated_mlp=False),
    tied_by_default=True,
)
