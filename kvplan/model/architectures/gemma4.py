"""Gemma-4: q_norm / k_norm; its MoE router has a scale (hidden) and a per-expert scale and the MoE block three
extra RMSNorms (vLLM models/gemma4.py: Gemma4Router); a `gemma4` wrapper states each image's soft tokens
(vision_config.default_output_length), so its multimodal item sizes are known (kvplan.vllm.multimodal)."""
from __future__ import annotations

from kvplan.model.architectures.base import Family, ModelTypeRules, WeightRules

FAMILY = Family(
    name="gemma4",
    source="models/gemma4.py, gemma4_mm.py",
    architectures=("Gemma4ForCausalLM", "Gemma4ForConditionalGeneration"),
    model_types=("gemma4_text",),
    weights=WeightRules(qk_norm=True, router_scales=True),
    mm_item_tokens_model_types=("gemma4",),
    model_type_rules=ModelTypeRules(shared_expert_dense_width=("gemma4", "gemma4_text", "gemma4_assistant"),
                                    sglang_gemma4_attention=("gemma4_text",)),
    vision_towers=(("gemma4", "gemma4"),),
    # vLLM 0.33.0 gemma4.py (Gemma4Model; tied LM head): the embedding and LM head unguarded, on every PP stage.
    pp_vocab_every_stage=('Gemma4ForCausalLM', 'Gemma4ForConditionalGeneration'),
)
