"""DeepSeek-V4: compressed sparse attention (compress_ratios / layer_types), read by kvplan/model/families/dsv4.py
(vLLM models/deepseek_v4/; registry: DeepseekV4ForCausalLM, model_type deepseek_v4)."""
from __future__ import annotations

from kvplan.model.architectures.base import Family, ModelTypeRules

FAMILY = Family(
    name="deepseek_v4",
    source="models/deepseek_v4/",
    architectures=("DeepseekV4ForCausalLM",),
    model_types=("deepseek_v4",),
    model_type_rules=ModelTypeRules(compressed_attention=("deepseek_v4",)),
)
