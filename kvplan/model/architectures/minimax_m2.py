"""MiniMax-M2 (M2, M2.1, M2.5, M2.7): a Llama-shaped MoE decoder whose router vLLM builds in float32
(vLLM 0.11.2–0.19.1 models/minimax_m2.py:MiniMaxM2MoE.__init__: `self.gate = ReplicatedLinear(hidden_size,
num_local_experts, bias=False, params_dtype=torch.float32, quant_config=None)`)."""
from __future__ import annotations

from kvplan.model.architectures.base import Family, WeightRules

FAMILY = Family(
    name="minimax_m2",
    source="models/minimax_m2.py",
    architectures=("MiniMaxM2ForCausalLM",),
    model_types=("minimax_m2",),
    weights=WeightRules(router_dtype_bytes=4),
)
