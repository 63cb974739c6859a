"""Gemma: tied LM head by default (vLLM models/gemma.py; transformers GemmaConfig tie_word_embeddings=True)."""
from __future__ import annotations

from kvplan.model.architectures.base import Family

FAMILY = Family(
    name="gemma",
    source="models/gemma.py",
    architectures=("GemmaForCausalLM",),
    model_types=("gemma",),
    tied_by_default=True,
)
