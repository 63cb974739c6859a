"""DeepSeek V1/V2/V3/V3.2 (and Kimi-K2, a DeepseekV3ForCausalLM): vLLM builds their layers with
models/deepseek_v2.py:DeepseekV2DecoderLayer, MLA when kv_lora_rank is set, plain MHA for V1. The MLA and decoder
rules are vLLM's own model-type tables, so this family lists every model type they name, its own and others'
(GLM-5's glm_moe_dsa, Mistral-Large-3 …: transformers_utils/model_arch_config_convertor.py:is_deepseek_mla).
Weights follow the Llama-shape defaults (kvplan.model.weights counts MLA and MoE from the config's keys)."""
from __future__ import annotations

from kvplan.model.architectures.base import Family, ModelTypeRules

FAMILY = Family(
    name="deepseek",
    source="models/deepseek_v2.py; transformers_utils/model_arch_config_convertor.py",
    architectures=("DeepseekForCausalLM", "DeepseekV2ForCausalLM", "DeepseekV3ForCausalLM", "DeepseekV32ForCausalLM"),
    model_types=("deepseek", "deepseek_v2", "deepseek_v3", "deepseek_v32", "deepseek_mtp", "kimi_k2"),
    model_type_rules=ModelTypeRules(
        # is_deepseek_mla's list. mistral4: vLLM serves Mistral-Small-4 from params.json (--config-format
        # mistral), which transformers_utils/configs/mistral.py:_remap_mistral_mla_args turns into DeepSeek-V3's
        # MLA; kaito#2132's log needs 22.5 GiB for 1,048,576 tokens = 36 layers x (256 + 64) x 2 B.
        deepseek_mla=("deepseek_v2", "deepseek_v3", "deepseek_v32", "deepseek_mtp", "kimi_k2", "kimi_linear",
                      "glm_moe_dsa", "longcat_flash", "pangu_ultra_moe", "mistral_large_3", "mistral4"),
        # DeepseekForCausalLM / V2 / V3 (Kimi-K2 is a DeepseekV3ForCausalLM), GlmMoeDsaForCausalLM and
        # MistralLarge3ForCausalLM (subclasses), and the DeepSeek-VL2 / -OCR language models
        # (transformers_utils/configs/deepseek_vl2.py:DeepseekVLV2TextConfig).
        deepseek_decoder=("deepseek", "deepseek_v2", "deepseek_v3", "kimi_k2", "glm_moe_dsa", "mistral_large_3"),
        deepseek_v1_mha=("deepseek",),
    ),
    # transformers_utils/configs/deepseek_vl2.py:DeepseekVLV2Config: `self.text_config =
    # DeepseekVLV2TextConfig(**kwargs.pop("language_config", {}))`, a DeepseekV2Config (DeepSeek-VL2 and -OCR).
    composite_text_configs=(("deepseek_vl_v2", "language_config", "deepseek_v2"),),
    # Kimi-K2.5 (a DeepSeek-V3 language model): SGLang configs/kimi_k25.py:KimiK25VisionConfig defaults
    # num_hidden_layers 27, hidden_size 1152 (the JSON's vt_* keys are not read as these).
    sglang_vision_defaults=(("kimi_k25", 27, 1152),),
)
