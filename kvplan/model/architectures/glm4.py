"""GLM-4 (Glm4ForCausalLM, model_type glm4): vLLM refuses float16 for it (config/model.py:
_FLOAT16_NOT_SUPPORTED_MODELS, "Numerical instability")."""
from __future__ import annotations

from kvplan.model.architectures.base import Family

FAMILY = Family(
    name="glm4",
    source="models/glm4.py",
    architectures=("Glm4ForCausalLM",),
    model_types=("glm4",),
    float16_unsafe=True,
    vision_towers=(("glm4v", "glm4v"), ("glm4v_moe", "glm4v")),
)
