"""ChatGLM / GLM-4 (chatglm configs): q, k, v biases (add_qkv_bias) and rotary over half of each head
(vLLM models/chatglm.py: rotary_dim = head_dim // 2). MHA unless multi_query_attention."""
from __future__ import annotations

from kvplan.model.architectures.base import Family, RopeRules, WeightRules

FAMILY = Family(
    name="chatglm",
    source="models/chatglm.py",
    architectures=("ChatGLMModel", "ChatGLMForConditionalGeneration"),
    model_types=("chatglm",),
    weights=WeightRules(attention_bias="qkv"),
    rope=RopeRules(half_rotary=True),
    kv_heads="chatglm",
)
