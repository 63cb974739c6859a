"""Gemma-3n: as vLLM's max-length rule tests `"gemma3" in model_type`, its max_position_embeddings is already the
scaled length (config/model.py:_get_and_verify_max_len). Weights and layers follow the Llama-shape defaults and
the config's keys (per-layer inputs: ConfigFacts.per_layer_input_size), as kvplan read Gemma-3n before it had a
family (vLLM models/gemma3n.py, gemma3n_mm.py)."""
from __future__ import annotations

from kvplan.model.architectures.base import Family, ModelTypeRules

FAMILY = Family(
    name="gemma3n",
    source="models/gemma3n.py, gemma3n_mm.py",
    architectures=("Gemma3nForCausalLM", "Gemma3nForConditionalGeneration"),
    model_types=("gemma3n", "gemma3n_text"),
    model_type_rules=ModelTypeRules(max_len_already_scaled=("gemma3n", "gemma3n_text")),
    # gemma3n_mm.py:Gemma3nForConditionalGeneration.__init__ (0.10.1-0.33.0): per_layer_embeddings
    per_layer_input_buffer=("Gemma3nForConditionalGeneration",),
)
