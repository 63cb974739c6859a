"""GPT-BigCode (StarCoder): no rotary cache, up/down MLP; one KV head unless multi_query is false (vLLM
models/gpt_bigcode.py; transformers GPTBigCodeConfig attribute_map n_positions). Its learned position table (wpe)
is not counted by kvplan's estimate (learned_positions unset, as before the registry)."""
from __future__ import annotations

from kvplan.model.architectures.base import Family, RopeRules, WeightRules

FAMILY = Family(
    name="gpt_bigcode",
    source="models/gpt_bigcode.py",
    architectures=("GPTBigCodeForCausalLM",),
    model_types=("gpt_bigcode",),
    weights=WeightRules(gated_mlp=False),
    rope=RopeRules(rotary=False),
    kv_heads="multi_query",
    n_positions_alias=True,
)
