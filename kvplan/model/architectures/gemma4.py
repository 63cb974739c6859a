"""Gemma-4: q_norm / k_norm; a second rotary cache for the full-attention layers; its MoE router has a scale
(hidden) and a per-expert scale and the MoE block three extra RMSNorms (vLLM models/gemma4.py: Gemma4Router); a
`gemma4` wrapper states each image's soft tokens (vision_config.default_output_length), so its multimodal item sizes
are known (kvplan.vllm.multimodal)."""
from __future__ import annotations

from kvplan.model.architectures.base import Family, ModelTypeRules, RopeRules, WeightRules

FAMILY = Family(
    name="gemma4",
    source="models/gemma4.py, gemma4_mm.py",
    architectures=("Gemma4ForCausalLM", "Gemma4ForConditionalGeneration"),
    model_types=("gemma4_text",),
    weights=WeightRules(qk_norm=True, router_scales=True),
    # Two rotary caches (get_rope keys them by their parameters): the sliding layers' over head_dim, and the full
    # layers' proportional rope over global_head_dim, whole: layers/rotary_embedding/gemma4_rope.py:
    # Gemma4RotaryEmbedding passes rotary_dim = head_size to the base class (vLLM 0.20.0, 0.33.0; seen on the
    # built model: [262,144 × 256] and [262,144 × 512] bf16 for gemma-4-31B, tests/fixtures/oracle-weights).
    rope=RopeRules(full_layer_cache=True),
    mm_item_tokens_model_types=("gemma4",),
    model_type_rules=ModelTypeRules(shared_expert_dense_width=("gemma4", "gemma4_text", "gemma4_assistant"),
                                    sglang_gemma4_attention=("gemma4_text",)),
    vision_towers=(("gemma4", "gemma4"),),
    # vLLM 0.33.0 gemma4.py (Gemma4Model; tied LM head): the embedding and LM head unguarded, on every PP stage.
    pp_vocab_every_stage=("Gemma4ForCausalLM", "Gemma4ForConditionalGeneration"),
    # gemma4_mm.py:Gemma4ForConditionalGeneration.__init__ (0.20.0-0.33.0): per_layer_embeddings, when the text
    # config has hidden_size_per_layer_input (the "E" models)
    per_layer_input_buffer=("Gemma4ForConditionalGeneration",),
)
