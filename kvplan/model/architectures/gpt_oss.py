"""gpt-oss: biases on q, k, v, o, on every expert and on the router; one attention sink per head; its YaRN rotary cache
in float32; its even layers slide (vLLM models/gpt_oss.py: OAIAttention get_rope(dtype=torch.float32); transformers
modeling_gpt_oss.py)."""
from __future__ import annotations

from kvplan.model.architectures.base import Family, RopeRules, WeightRules

FAMILY = Family(
    name="gpt_oss",
    source="models/gpt_oss.py; modeling_gpt_oss.py",
    architectures=("GptOssForCausalLM",),
    model_types=("gpt_oss",),
    weights=WeightRules(attention_bias="all", attention_sinks=True, expert_bias=True, router_bias=True),
    rope=RopeRules(cache_dtype_bytes=4),
    sliding_layout="alternate",
    # models/config.py:GptOssForCausalLMConfig.verify_and_update_config (vLLM 0.33; not in 0.11.0).
    max_cudagraph_capture_size=1024,
)
