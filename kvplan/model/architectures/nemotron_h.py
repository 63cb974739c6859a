"""Nemotron-H: attention ("*") and Mamba ("M") layers carry no MLP, "-" layers carry a relu² up/down MLP; no
rotary embedding (vLLM models/nemotron_h.py; transformers modeling_nemotron_h.py)."""
from __future__ import annotations

from kvplan.model.architectures.base import Family, ModelTypeRules, RopeRules, WeightRules

FAMILY = Family(
    name="nemotron_h",
    source="models/nemotron_h.py; modeling_nemotron_h.py",
    architectures=("NemotronHForCausalLM",),
    model_types=("nemotron_h",),
    weights=WeightRules(mixer_layers_have_mlp=False, gated_mlp=False),
    rope=RopeRules(rotary=False),
    model_type_rules=ModelTypeRules(nemotron_h_mamba2=("nemotron_h",)),
    sglang_state="nemotron_h",
    sglang_state_model_types=("nemotron_h",),
)
