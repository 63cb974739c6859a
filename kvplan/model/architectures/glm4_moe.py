"""GLM-4.5 / GLM-4.6 (Glm4MoeForCausalLM, model_type glm4_moe): a Llama-shaped MoE decoder whose router vLLM builds
in float32, with a float32 per-expert score-correction bias (vLLM 0.10.2, 0.11.0 models/glm4_moe.py:
Glm4MoE.__init__: `self.gate = nn.Linear(hidden_size, n_routed_experts, bias=False, dtype=torch.float32)`,
`self.gate.e_score_correction_bias = nn.Parameter(torch.empty(n_routed_experts, dtype=torch.float32))`; 0.33.0:
`GateLinear(..., params_dtype=torch.float32)`). Seen on the model vLLM 0.33 builds: GLM-4.5-Air at TP 2 holds
90.0 MiB of float32 router (tests/fixtures/oracle-weights)."""
from __future__ import annotations

from kvplan.model.architectures.base import Family, WeightRules

FAMILY = Family(
    name="glm4_moe",
    source="models/glm4_moe.py",
    architectures=("Glm4MoeForCausalLM",),
    model_types=("glm4_moe",),
    weights=WeightRules(router_bias=True, router_dtype_bytes=4),
)
