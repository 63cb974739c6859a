"""Gemma-3 (text and multimodal): five sliding layers to one global (sliding_window_pattern 6), q_norm / k_norm, tied
LM head, a second unscaled rotary cache for the sliding layers (vLLM models/gemma3.py: rope_local_base_freq);
float16 refused (config/model.py: _FLOAT16_NOT_SUPPORTED_MODELS lists gemma3 and gemma3_text)."""
from __future__ import annotations

from kvplan.model.architectures.base import Family, ModelTypeRules, RopeRules, WeightRules

FAMILY = Family(
    name="gemma3",
    source="models/gemma3.py, gemma3_mm.py",
    architectures=("Gemma3ForCausalLM", "Gemma3ForConditionalGeneration"),
    model_types=("gemma3", "gemma3_text"),
    weights=WeightRules(qk_norm=True),
    rope=RopeRules(local_cache=True),
    sliding_layout="every_nth",
    tied_by_default=True,
    float16_unsafe=True,
    # is_mm_prefix_lm is one table in vLLM; its Gemma-3 entry's family lists it whole (bagel, molmo2, moondream3 and
    # paligemma have no family here).
    model_type_rules=ModelTypeRules(max_len_already_scaled=("gemma3", "gemma3_text"),
                                    mm_prefix_lm=("bagel", "gemma3", "molmo2", "moondream3", "paligemma")),
    vision_towers=(("gemma3", "gemma3"),),
    # vLLM 0.33.0 gemma3.py (Gemma3Model; tied LM head): the embedding and LM head unguarded, on every PP stage.
    pp_vocab_every_stage=("Gemma3ForCausalLM", "Gemma3ForConditionalGeneration"),
)
