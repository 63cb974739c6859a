"""`FitReport`: everything `kvplan fit` reports, flat numbers first (rendered by render/fit.py and `--json`)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from kvplan.vllm.verdicts import PreemptionVerdict, Startup, StartupRange

if TYPE_CHECKING:
    from kvplan.vllm.memory.budget import MemoryTerm
    from kvplan.vllm.offload import CpuTier

@dataclass(frozen=True)
class GroupSummary:
    """One KV-cache group, for reports."""

    kind: str
    num_layers: int
    block_size: int
    page_size_bytes: int
    blocks_per_request: int
    sliding_window: int | None = None
    attention_chunk_size: int | None = None


@dataclass(frozen=True)
class TowerSummary:
    """A multimodal encoder tower (vision / audio, with its projector), for reports: in the weights when loaded."""

    name: str
    modalities: tuple[str, ...]
    loaded: bool  # False: --limit-mm-per-prompt is 0 for all its modalities, vLLM does not build it
    parameters: int
    bytes_per_gpu: int  # on the first pipeline stage's GPU (0 when not loaded)


@dataclass(frozen=True)
class StageSummary:
    """One pipeline stage's budget (fit.py:memory_stage), for reports: each worker profiles itself and vLLM
    keeps the smallest block count (v1/core/kv_cache_planning.py:get_kv_cache_configs)."""

    stage: int
    num_layers: int  # decoder layers with a KV cache on this stage (the draft's included)
    weights_bytes: int
    activation_bytes: int
    non_torch_bytes: int
    cuda_graph_bytes: int
    available_kv_bytes: int
    available_kv_range: tuple[int, int]
    bytes_per_block: int
    num_gpu_blocks: int  # this stage's own count, before vLLM takes the smallest


@dataclass(frozen=True)
class Advice:
    """One change that fixes the problem, checked by re-planning with it."""

    change: str  # the flag(s) to pass, e.g. "--gpu-memory-utilization 0.95"
    fixes: str  # "starts" | "no preemption"
    num_gpu_blocks: int
    kv_cache_tokens: int
    max_concurrency: float
    detail: str


@dataclass(frozen=True)
class FitReport:
    """Everything `kvplan fit` reports (flat numbers first; rendered by render/fit.py and `--json`)."""

    model: str
    gpu: str
    gpu_name: str
    tp: int
    pp: int
    num_gpus: int
    vllm_version: str
    gpu_memory_utilization: float
    cuda_total_bytes: int
    requested_bytes: int
    weights_bytes: int
    activation_bytes: int
    non_torch_bytes: int
    cuda_graph_bytes: int
    available_kv_bytes: int
    kv_cache_dtype: str
    block_size: int
    bytes_per_block: int
    num_gpu_blocks: int
    usable_blocks: int
    blocks_per_request: int
    kv_cache_tokens: int
    max_model_len: int
    max_num_seqs: int
    max_num_batched_tokens: int
    in_flight_tokens: int
    model_runner: str  # "V1" or "V2" (vllm/model_runner.py; why: settings_sources["model_runner"])
    max_concurrency: float
    fits: bool
    startup: Startup  # ok | refuses: no KV memory | refuses: max_model_len | refuses: free memory | OOM …
    error: str | None  # the message vLLM (or CUDA) would stop with
    estimated_max_model_len: int | None
    log_line: str | None
    preemption: PreemptionVerdict
    memory_terms: tuple[MemoryTerm, ...]
    kv_cache_memory_bytes_given: bool
    block_size_source: str
    attention_backend: str
    groups: tuple[GroupSummary, ...]
    settings_sources: dict[str, str]
    vllm_log: tuple[str, ...]
    advice: tuple[Advice, ...] = ()
    notes: tuple[str, ...] = ()
    # Ranges from the estimated terms' calibration residuals (vllm/memory/budget.py), (pessimistic,
    # optimistic); a single point when every term is measured or --kv-cache-memory-bytes is given.
    available_kv_range: tuple[int, int] = (0, 0)
    kv_cache_tokens_range: tuple[int, int] = (0, 0)
    max_concurrency_range: tuple[float, float] = (0.0, 0.0)
    # starts | starts only if the estimate is optimistic | does not start
    startup_range: StartupRange = StartupRange.STARTS
    # --kv-offloading-size: the CPU tier one engine gets (vllm/offload.py); None without it.
    kv_offload: CpuTier | None = None
    # Multimodal models: the towers kvplan counts, loaded or skipped by the limits (part of weights_bytes).
    towers: tuple[TowerSummary, ...] = ()
    # PP > 1: every stage's budget, first to last, and the stage whose block count vLLM keeps (the tightest).
    pp_stages: tuple[StageSummary, ...] = ()
    tightest_stage: int | None = None
    # The vLLM platform whose rules planned the GPU (cuda | rocm), and on ROCm which of them (vllm/rocm.py).
    platform: str = "cuda"
    platform_rules: str | None = None
