"""GLM-5 (GlmMoeDsaForCausalLM): DeepSeek-V3.2's MLA and sparse-attention indexer (its model type is in the
DeepSeek family's MLA and decoder tables, kvplan/model/architectures/deepseek.py); on SM10x vLLM turns
`--kv-cache-dtype auto` into fp8_e4m3 (models/config.py:GlmMoeDsaForCausalLM.verify_and_update_config). Weights
follow the Llama-shape defaults and the config's MLA / MoE keys, as kvplan counted GLM-5 before it had a family."""
from __future__ import annotations

from kvplan.model.architectures.base import Family

FAMILY = Family(
    name="glm_moe_dsa",
    source="models/deepseek_v2.py (GlmMoeDsaForCausalLM); models/config.py",
    architectures=("GlmMoeDsaForCausalLM",),
    model_types=("glm_moe_dsa",),
    blackwell_auto_kv_cache_dtype="fp8_e4m3",
)
