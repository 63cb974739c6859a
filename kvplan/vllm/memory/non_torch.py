"""Non-torch memory that grows during vLLM's profiling run (NCCL buffers, attention and cuBLAS workspaces)."""
from __future__ import annotations

from kvplan.units import GiB
from kvplan.vllm.memory.budget import MemoryTerm

# --- Non-torch memory growth during profiling --------------------------------------------------------
# utils/mem_utils.py:memory_profiling charges what cudaMemGetInfo loses beyond torch's allocations
# (attention workspaces, cuBLAS/NCCL buffers created lazily). llm-d H100 logs: 0.13–0.14 GiB on one GPU,
# 0.54–0.55 GiB at TP=2 (NCCL connects lazily on the first collective). Larger TP/PP is assumed to cost
# what TP=2 costs: no log with TP ≥ 4 states the value.
NON_TORCH_BYTES_SINGLE_GPU = round(0.13 * GiB)
NON_TORCH_BYTES_MULTI_GPU = round(0.54 * GiB)


def estimate_non_torch(*, tp: int, pp: int) -> MemoryTerm:
    """Non-torch memory that appears during profiling (NCCL lazy buffers, workspaces)."""
    if tp * pp > 1:
        return MemoryTerm(
            "non_torch",
            NON_TORCH_BYTES_MULTI_GPU,
            "estimate",
            "H100 logs at TP=2 (0.54 GiB: NCCL buffers created on first use); assumed for any TP×PP > 1",
        )
    return MemoryTerm(
        "non_torch",
        NON_TORCH_BYTES_SINGLE_GPU,
        "estimate",
        "H100 logs on one GPU (0.13 GiB: attention and cuBLAS workspaces)",
    )
