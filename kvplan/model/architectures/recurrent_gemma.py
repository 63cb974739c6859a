"""RecurrentGemma (Griffin): RG-LRU recurrent blocks and local attention, cycling transformers' RecurrentGemmaConfig
default `block_types` (configuration_recurrent_gemma.py, 5.19: recurrent, recurrent, attention). The HF checkpoints
spell it `_block_types`, a key the 5.x class does not read, so the default is what applies. vLLM 0.33 registers no
class for it (kvplan refuses its RG-LRU layers: kvplan.vllm.architectures)."""
from __future__ import annotations

from kvplan.model.architectures.base import Family

FAMILY = Family(
    name="recurrent_gemma",
    source="transformers configuration_recurrent_gemma.py",
    model_types=("recurrent_gemma",),
    default_block_types=("recurrent", "recurrent", "attention"),
)
