"""CodeGen: up/down MLP of 4 × hidden (n_inner=None; transformers modeling_codegen.py, CodeGenConfig attribute_map
n_positions). No vLLM class of its own: vLLM would need its Transformers backend."""
from __future__ import annotations

from kvplan.model.architectures.base import Family, WeightRules

FAMILY = Family(
    name="codegen",
    source="modeling_codegen.py",
    architectures=(),
    model_types=("codegen",),
    weights=WeightRules(gated_mlp=False, four_x_mlp=True),
    n_positions_alias=True,
)
