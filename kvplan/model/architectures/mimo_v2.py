"""MiMo-V2 (Flash): layers whose V head is narrower than K pick a DiffKV attention backend themselves
(vLLM models/mimo_v2.py:MiMoV2Attention: FLASH_ATTN_DIFFKV on CUDA, TRITON_ATTN_DIFFKV on ROCm; kvplan.vllm.rocm).
Weights follow the Llama-shape defaults, as kvplan counted MiMo-V2 before it had a family."""
from __future__ import annotations

from kvplan.model.architectures.base import Family

FAMILY = Family(
    name="mimo_v2",
    source="models/mimo_v2.py",
    architectures=("MiMoV2FlashForCausalLM", "MiMoV2ForCausalLM"),
    diffkv_attention=True,
)
