"""Gemma-2: tied LM head by default; vLLM refuses float16 for it ("Numerical instability",
config/model.py:_FLOAT16_NOT_SUPPORTED_MODELS); its even layers slide (transformers Gemma2)."""
from __future__ import annotations

from kvplan.model.architectures.base import Family

FAMILY = Family(
    name="gemma2",
    source="models/gemma2.py",
    architectures=("Gemma2ForCausalLM",),
    model_types=("gemma2",),
    sliding_layout="alternate",
    tied_by_default=True,
    float16_unsafe=True,
    # vLLM 0.33.0 gemma2.py (Gemma2Model; tied LM head): the embedding and LM head unguarded, on every PP stage.
    pp_vocab_every_stage=("Gemma2ForCausalLM",),
)
