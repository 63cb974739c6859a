"""The KV-cache memory budget of one vLLM GPU worker (v1/worker/gpu_worker.py:determine_available_memory).

    requested    = ceil(cudaMemGetInfo total × gpu_memory_utilization)        (exact)
    available KV = requested − weights − activation peak − non-torch growth − CUDA-graph estimate
                 = --kv-cache-memory-bytes, exactly, when that flag is given

The subtracted terms are what vLLM *measures* at startup; kvplan *estimates* them from what
determines them and says so. Each estimate is a named, calibrated formula with its assumption in
words, and each can be replaced by a measured value (`--weights-memory`, `--activation-memory`,
`--non-torch-memory`, `--cuda-graph-memory`). Calibration data: tests/fixtures/data/vllm-startup-logs.yaml
(`benchmarks/accuracy.py` prints the errors). Pure: numbers in, numbers out.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from kvplan.config import ModelSpec
from kvplan.units import GiB, MiB, format_gib_vllm
from kvplan.vllm_defaults import LATEST, VllmVersion, cudagraph_count, cudagraph_estimate_subtracted, requested_memory

if TYPE_CHECKING:
    from kvplan.weights import MoeBackend

TermSource = Literal["estimate", "user", "not subtracted", "none"]

# --- Activation peak of the profiling run ---------------------------------------------------------
# v1/worker/gpu/model_runner.py:profile_run: a dummy forward over max_num_batched_tokens tokens, then on
# the last PP rank `_dummy_sampler_run` over one logits row per dummy request
# (num_reqs = min(max_num_batched_tokens, max_num_seqs)), with full-vocabulary fp32 logits on every TP
# rank. The sampler's top-k/top-p path (sort values + int64 indices, softmax, cumulative sum, masks)
# holds about 9.6 fp32 copies of the logits at its peak: 38.4 bytes per logit, fitted on the llm-d H100
# logs (Llama-3.1-8B 38.4, Qwen3-0.6B 38.3, Qwen3-32B 38.4, gpt-oss-20b/120b 38.3, Llama-3.3-70B 38.6).
SAMPLER_BYTES_PER_LOGIT = 38.4
# The dummy run's hidden states (max_num_batched_tokens × hidden) stay allocated while the sampler runs.
RETAINED_HIDDEN_COPIES = 1

# --- Non-torch memory growth during profiling --------------------------------------------------------
# utils/mem_utils.py:memory_profiling charges what cudaMemGetInfo loses beyond torch's allocations
# (attention workspaces, cuBLAS/NCCL buffers created lazily). llm-d H100 logs: 0.13–0.14 GiB on one GPU,
# 0.54–0.55 GiB at TP=2 (NCCL connects lazily on the first collective). Larger TP/PP is assumed to cost
# what TP=2 costs: no log with TP ≥ 4 states the value.
NON_TORCH_BYTES_SINGLE_GPU = round(0.13 * GiB)
NON_TORCH_BYTES_MULTI_GPU = round(0.54 * GiB)

# --- CUDA-graph estimate ----------------------------------------------------------------------------
# v1/worker/gpu/cudagraph_utils.py:profile_cudagraph_memory captures the graphs into a throwaway pool and
# measures it. Modelled as a fixed cost per captured graph per decoder layer on the worker, fitted on the
# one log that gives it with a known model and capture list (64-layer hybrid, 51 piecewise + 35 full
# graphs, "CUDA-graph pool 0.52 GiB", vllm issue #52872): ≈ 0.1 MiB. Rough: ±50% is to be expected.
CUDA_GRAPH_BYTES_PER_GRAPH_LAYER = round(0.1 * MiB)

# --- Memory in use before vLLM's first snapshot -----------------------------------------------------
# CUDA context, cuBLAS handles and NCCL buffers are taken before `init_snapshot` and are not charged to
# the budget, but `requested` must fit in what is free then. llm-d H100 logs: "Free memory on device
# 78.57/79.18 GiB" on one GPU, "77.64/79.18 GiB" at TP=2.
STARTUP_BASELINE_BYTES_SINGLE_GPU = round(0.61 * GiB)
STARTUP_BASELINE_BYTES_MULTI_GPU = round(1.54 * GiB)

_ACT_BYTES = {"float32": 4, "bfloat16": 2, "float16": 2}


@dataclass(frozen=True)
class MemoryTerm:
    """One line of the budget: its bytes, whether kvplan estimated it or the user gave it, and why."""

    name: str  # weights | activation | non_torch | cuda_graphs
    bytes: int
    source: TermSource
    assumption: str


@dataclass(frozen=True)
class MemoryBudget:
    """Per-GPU memory budget (the bounding worker's)."""

    cuda_total_bytes: int
    gpu_memory_utilization: float
    requested_bytes: int
    weights: MemoryTerm
    activation: MemoryTerm
    non_torch: MemoryTerm
    cuda_graphs: MemoryTerm
    available_kv_bytes: int  # negative when the other terms exceed the request
    kv_cache_memory_bytes: int | None  # --kv-cache-memory-bytes, when it replaced the profile
    startup_free_bytes: int  # estimated free memory at vLLM's first snapshot

    @property
    def terms(self) -> tuple[MemoryTerm, MemoryTerm, MemoryTerm, MemoryTerm]:
        """The subtracted terms in vLLM's order."""
        return (self.weights, self.activation, self.cuda_graphs, self.non_torch)

    @property
    def startup_ok(self) -> bool:
        """`free at init ≥ requested` (v1/worker/utils.py:request_memory); always true with the override."""
        return self.kv_cache_memory_bytes is not None or self.startup_free_bytes >= self.requested_bytes

    def startup_error(self, device: str = "cuda:0") -> str | None:
        """vLLM's ValueError when the requested memory exceeds what is free at startup."""
        if self.startup_ok:
            return None
        return (
            f"Free memory on device {device} ({format_gib_vllm(self.startup_free_bytes)}/"
            f"{format_gib_vllm(self.cuda_total_bytes)} GiB) on startup is less than desired GPU memory "
            f"utilization ({self.gpu_memory_utilization}, {format_gib_vllm(self.requested_bytes)} GiB). "
            "Decrease GPU memory utilization or reduce GPU memory used by other processes."
        )


def _per_rank(width: int, tp: int) -> int:
    return -(-width // tp)


def forward_activation_bytes(model: ModelSpec, *, tp: int, num_tokens: int) -> int:
    """Peak live intermediates of one forward over `num_tokens` tokens on one TP rank.

    The largest of: the dense MLP (gate/up output 2·I plus the activated I), the fused-MoE workspaces
    (top_k × (2·I_e + I_e + hidden), vllm/model_executor/layers/fused_moe/fused_moe.py intermediate
    caches) plus any shared expert, and the attention projections (q + 2·kv heads).
    """
    e = _ACT_BYTES.get(model.dtype, 2)
    peaks = [num_tokens * 3 * _per_rank(model.intermediate_size, tp) * e]
    if model.moe is not None:
        m = model.moe
        moe = num_tokens * m.experts_per_token * (3 * _per_rank(m.expert_intermediate_size, tp) + model.hidden_size)
        moe += num_tokens * 3 * _per_rank(m.shared_intermediate_size, tp)
        peaks.append(moe * e)
    heads = _per_rank(model.num_attention_heads, tp) + 2 * max(1, model.num_kv_heads // tp)
    peaks.append(num_tokens * heads * model.head_size * e)
    return max(peaks)


def sampler_activation_bytes(model: ModelSpec, *, num_reqs: int) -> int:
    """Peak of the dummy sampler run: `num_reqs × vocab × SAMPLER_BYTES_PER_LOGIT` (see the constant)."""
    return int(num_reqs * model.vocab_size * SAMPLER_BYTES_PER_LOGIT)


def estimate_activation(model: ModelSpec, *, tp: int, max_num_batched_tokens: int, max_num_seqs: int) -> MemoryTerm:
    """Torch peak above what stays allocated after vLLM's profiling run (`transient_peak_headroom`).

    peak = max(forward intermediates over max_num_batched_tokens tokens, sampler over
    min(max_num_batched_tokens, max_num_seqs) logits rows) + the retained hidden states.
    """
    num_reqs = min(max_num_batched_tokens, max_num_seqs)
    e = _ACT_BYTES.get(model.dtype, 2)
    forward = forward_activation_bytes(model, tp=tp, num_tokens=max_num_batched_tokens)
    sampler = sampler_activation_bytes(model, num_reqs=num_reqs)
    hidden = RETAINED_HIDDEN_COPIES * max_num_batched_tokens * model.hidden_size * e
    total = max(forward, sampler) + hidden
    which = (
        f"sampler over {num_reqs:,} rows × {model.vocab_size:,} vocab × {SAMPLER_BYTES_PER_LOGIT} B"
        if sampler >= forward
        else f"forward intermediates over {max_num_batched_tokens:,} tokens"
    )
    return MemoryTerm(
        "activation",
        total,
        "estimate",
        f"profiling-run peak: {which}, plus {max_num_batched_tokens:,} retained hidden states",
    )


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
    return MemoryTerm(
        "cuda_graphs",
        total,
        "estimate",
        f"{piecewise} piecewise + {full} full graphs × {num_layers_on_worker} layers × 0.1 MiB (rough, ±50%)",
    )


def estimate_weights(
    model: ModelSpec,
    *,
    tp: int,
    pp: int,
    arch: str | None,
    version: VllmVersion = LATEST,
    moe_backend: MoeBackend | None = None,
    total_bytes: int | None = None,
) -> MemoryTerm:
    """What vLLM's "Model loading took X GiB" will report on the busiest GPU.

    The checkpoint's stored share (from `total_bytes`, the safetensors metadata, when given) plus what
    loading adds on this GPU architecture: kernel layouts (MXFP4 MoE, GPTQ on Marlin), the rotary
    cos/sin cache, vocabulary padding, FP8 scales (kvplan.weights.load_adjustments).
    """
    from kvplan.weights import default_mxfp4_backend, load_adjustments, loaded_weights_bytes_per_gpu

    value = loaded_weights_bytes_per_gpu(model, tp=tp, pp=pp, arch=arch, version=version, moe_backend=moe_backend,
                                         total_bytes=total_bytes)
    base = ("checkpoint size from safetensors metadata" if total_bytes is not None
            else "parameters × stored bytes (quantized layers at their bits)")
    parts = [f"{a.name} {a.total_bytes / GiB:+.2f} GiB"
             for a in load_adjustments(model, tp=tp, arch=arch, version=version, moe_backend=moe_backend)
             if abs(a.total_bytes) >= MiB]
    if model.quant is not None and model.quant.method == "mxfp4" and model.moe is not None:
        backend = moe_backend or default_mxfp4_backend(arch, version)
        if backend is None:
            parts.append(f"MXFP4 kernel layout unknown on {arch or 'this GPU'}: checkpoint layout assumed")
    detail = f"; {', '.join(parts)}" if parts else ""
    return MemoryTerm("weights", value, "estimate", f"{base}, busiest GPU{detail}")


def user_term(name: str, value: int, flag: str) -> MemoryTerm:
    """A term the user measured and passed with `flag`."""
    return MemoryTerm(name, value, "user", f"given with {flag}")


def startup_baseline_bytes(*, tp: int, pp: int) -> int:
    """Memory in use before vLLM's first snapshot (CUDA context, cuBLAS, NCCL)."""
    return STARTUP_BASELINE_BYTES_MULTI_GPU if tp * pp > 1 else STARTUP_BASELINE_BYTES_SINGLE_GPU


def memory_budget(
    *,
    cuda_total_bytes: int,
    gpu_memory_utilization: float,
    weights: MemoryTerm,
    activation: MemoryTerm,
    non_torch: MemoryTerm,
    cuda_graphs: MemoryTerm,
    kv_cache_memory_bytes: int | None = None,
    startup_baseline: int = STARTUP_BASELINE_BYTES_SINGLE_GPU,
) -> MemoryBudget:
    """Combine the terms as vLLM does (v1/worker/gpu_worker.py:determine_available_memory).

    With `kv_cache_memory_bytes` the result is exactly that value: vLLM skips the profiling maths
    and ignores gpu_memory_utilization.
    """
    requested = requested_memory(cuda_total_bytes, gpu_memory_utilization)
    if kv_cache_memory_bytes is not None:
        available = kv_cache_memory_bytes
    else:
        available = requested - weights.bytes - activation.bytes - non_torch.bytes - cuda_graphs.bytes
    return MemoryBudget(
        cuda_total_bytes=cuda_total_bytes,
        gpu_memory_utilization=gpu_memory_utilization,
        requested_bytes=requested,
        weights=weights,
        activation=activation,
        non_torch=non_torch,
        cuda_graphs=cuda_graphs,
        available_kv_bytes=available,
        kv_cache_memory_bytes=kv_cache_memory_bytes,
        startup_free_bytes=cuda_total_bytes - startup_baseline,
    )
