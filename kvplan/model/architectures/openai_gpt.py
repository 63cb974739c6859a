"""OpenAI GPT (GPT-1): transformers OpenAIGPTConfig's attribute_map reads max_position_embeddings from n_positions.
No vLLM class of its own."""
from __future__ import annotations

from kvplan.model.architectures.base import Family

FAMILY = Family(
    name="openai_gpt",
    source="modeling_openai.py",
    architectures=(),
    model_types=("openai-gpt",),
    n_positions_alias=True,
)
