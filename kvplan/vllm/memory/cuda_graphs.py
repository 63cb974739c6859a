"""The CUDA-graph memory vLLM subtracts before sizing the KV cache."""
from __future__ import annotations

from kvplan.units import MiB
from kvplan.vllm.defaults import LATEST, VllmVersion, cudagraph_count, cudagraph_estimate_subtracted
from kvplan.vllm.memory.budget import MemoryTerm, with_range

# --- CUDA-graph estimate ----------------------------------------------------------------------------
# v1/worker/gpu/cudagraph_utils.py:profile_cudagraph_memory captures the graphs into a throwaway pool and
# measures it. Modelled as a fixed cost per captured graph per decoder layer on the worker, fitted on the
# one log that gives it with a known model and capture list (64-layer hybrid, 51 piecewise + 35 full
# graphs, "CUDA-graph pool 0.52 GiB", vllm issue #52872): ≈ 0.1 MiB. Rough: ±50% is to be expected.
CUDA_GRAPH_BYTES_PER_GRAPH_LAYER = round(0.1 * MiB)
# No record of the calibration half that kvplan can plan prints "Estimated CUDA graph memory" with a
# known model: the range is the formula's own stated uncertainty.
CUDA_GRAPH_RANGE = (-0.5, 0.5)


def estimate_cuda_graphs(
    *,
    num_layers_on_worker: int,
    max_num_seqs: int,
    max_num_batched_tokens: int,
    arch: str | None,
    enforce_eager: bool,
    version: VllmVersion = LATEST,
) -> MemoryTerm:
    """CUDA-graph memory vLLM subtracts before sizing the cache (since v0.21; 0 with --enforce-eager)."""
    if enforce_eager:
        return MemoryTerm("cuda_graphs", 0, "none", "--enforce-eager: no CUDA graphs are captured")
    if not cudagraph_estimate_subtracted(version):
        return MemoryTerm(
            "cuda_graphs",
            0,
            "not subtracted",
            f"vLLM {version} captures graphs after sizing the cache (estimate subtracted since 0.21)",
        )
    piecewise, full = cudagraph_count(max_num_seqs, max_num_batched_tokens, arch)
    graphs = piecewise + full
    total = graphs * num_layers_on_worker * CUDA_GRAPH_BYTES_PER_GRAPH_LAYER
    term = MemoryTerm(
        "cuda_graphs",
        total,
        "estimate",
        f"{piecewise} piecewise + {full} full graphs × {num_layers_on_worker} layers × 0.1 MiB (rough, ±50%)",
    )
    lo, hi = CUDA_GRAPH_RANGE
    return with_range(term, int(total * (1 + lo)), int(total * (1 + hi)))
