"""`FitReport`: everything `kvplan fit` reports, nested as vLLM's startup reads (rendered by render/fit.py and
`--json`): the deployment, the memory budget, the KV cache plan, the scheduler's limits and the verdict, each an
immutable NamedTuple (as kvplan/vllm/configs.py's configs: `kvplan fit` imports them on every run, and a NamedTuple
class is built in a quarter of a frozen dataclass's time); FitReport is a frozen dataclass.

`--json` (schema_version 2) nests the same way (`FitReport.json_data`); `SCHEMA_1_KEYS` are schema_version 1's flat
keys, `schema_1_path` where each now lives (docs/json-schema.md's table, checked by tests/test_docs.py).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NamedTuple

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


class DeploymentSummary(NamedTuple):
    """What was planned: the model on which GPUs, with which vLLM (its platform and model runner)."""

    model: str
    gpu: str
    gpu_name: str
    tp: int
    pp: int
    num_gpus: int
    vllm_version: str
    model_runner: str  # "V1" or "V2" (vllm/model_runner.py; why: settings_sources["model_runner"])
    attention_backend: str
    # The vLLM platform whose rules planned the GPU (cuda | rocm), and on ROCm which of them (vllm/rocm.py).
    platform: str = "cuda"
    platform_rules: str | None = None


class MemorySummary(NamedTuple):
    """The memory budget of one GPU (vllm/memory/budget.py; the tightest stage's under PP): what vLLM may use,
    each term taken from it, and the KV memory left."""

    gpu_memory_utilization: float
    cuda_total_bytes: int
    requested_bytes: int
    weights_bytes: int
    activation_bytes: int
    non_torch_bytes: int
    cuda_graph_bytes: int
    available_kv_bytes: int
    # From the estimated terms' calibration residuals (vllm/memory/budget.py), (pessimistic, optimistic); a
    # single point when every term is measured or --kv-cache-memory-bytes is given.
    available_kv_range: tuple[int, int]
    kv_cache_memory_bytes_given: bool
    terms: tuple[MemoryTerm, ...]
    # Multimodal models: the towers kvplan counts, loaded or skipped by the limits (part of weights_bytes).
    towers: tuple[TowerSummary, ...] = ()
    # PP > 1: every stage's budget, first to last, and the stage whose block count vLLM keeps (the tightest).
    stages: tuple[StageSummary, ...] = ()
    tightest_stage: int | None = None


class CacheSummary(NamedTuple):
    """The KV cache vLLM allocates (CacheConfig's dtype and block size, v1/core/kv_cache_utils.py's blocks)."""

    kv_cache_dtype: str
    block_size: int
    block_size_source: str
    bytes_per_block: int
    num_gpu_blocks: int
    usable_blocks: int
    blocks_per_request: int
    kv_cache_tokens: int
    kv_cache_tokens_range: tuple[int, int]  # (pessimistic, optimistic), as memory.available_kv_range
    groups: tuple[GroupSummary, ...]
    # --kv-offloading-size: the CPU tier one engine gets (vllm/offload.py); None without it.
    kv_offload: CpuTier | None = None


class SchedulerSummary(NamedTuple):
    """The scheduler's limits (SchedulerConfig, max_model_len) and the requests the cache holds at once."""

    max_model_len: int
    max_num_seqs: int
    max_num_batched_tokens: int
    in_flight_tokens: int
    max_concurrency: float
    max_concurrency_range: tuple[float, float]  # (pessimistic, optimistic), as memory.available_kv_range


class VerdictSummary(NamedTuple):
    """Whether vLLM starts (and how it stops), whether the load preempts, and the changes that fix it."""

    fits: bool
    startup: Startup  # ok | refuses: no KV memory | refuses: max_model_len | refuses: free memory | OOM …
    startup_range: StartupRange  # starts | starts only if the estimate is optimistic | does not start
    error: str | None  # the message vLLM (or CUDA) would stop with
    estimated_max_model_len: int | None
    log_line: str | None
    preemption: PreemptionVerdict
    advice: tuple[Advice, ...] = ()


@dataclass(frozen=True)
class FitReport:
    """Everything `kvplan fit` reports: the deployment, its memory budget, KV cache and scheduler limits, the
    verdict; then where each setting came from, the lines vLLM would log and the notes."""

    deployment: DeploymentSummary
    memory: MemorySummary
    cache: CacheSummary
    scheduler: SchedulerSummary
    verdict: VerdictSummary
    settings_sources: dict[str, str]
    vllm_log: tuple[str, ...]
    notes: tuple[str, ...] = ()

    def json_data(self) -> dict[str, Any]:
        """The report as `--json` carries it (render/json.py:to_data): each part an object, as nested here."""
        return {name: (part._asdict() if name in PARTS else part)
                for name in REPORT_KEYS for part in (getattr(self, name),)}


# The parts of a report (its NamedTuple fields) and every top-level key, in order.
PARTS: tuple[str, ...] = ("deployment", "memory", "cache", "scheduler", "verdict")
REPORT_KEYS: tuple[str, ...] = (*PARTS, "settings_sources", "vllm_log", "notes")
_PART_TYPES: tuple[type, ...] = (DeploymentSummary, MemorySummary, CacheSummary, SchedulerSummary, VerdictSummary)

# schema_version 1's flat `fit` keys, in its order (docs/json-schema.md); each is now a part's field of the same
# name, or a top-level key, but for the two renamed here (the part's field name: memory.terms, memory.stages).
SCHEMA_1_KEYS: tuple[str, ...] = (
    "model", "gpu", "gpu_name", "tp", "pp", "num_gpus", "vllm_version", "gpu_memory_utilization", "cuda_total_bytes",
    "requested_bytes", "weights_bytes", "activation_bytes", "non_torch_bytes", "cuda_graph_bytes",
    "available_kv_bytes", "kv_cache_dtype", "block_size", "bytes_per_block", "num_gpu_blocks", "usable_blocks",
    "blocks_per_request", "kv_cache_tokens", "max_model_len", "max_num_seqs", "max_num_batched_tokens",
    "in_flight_tokens", "model_runner", "max_concurrency", "fits", "startup", "error", "estimated_max_model_len",
    "log_line", "preemption", "memory_terms", "kv_cache_memory_bytes_given", "block_size_source",
    "attention_backend", "groups", "settings_sources", "vllm_log", "advice", "notes", "available_kv_range",
    "kv_cache_tokens_range", "max_concurrency_range", "startup_range", "kv_offload", "towers", "pp_stages",
    "tightest_stage", "platform", "platform_rules")
SCHEMA_1_RENAMES: dict[str, str] = {"memory_terms": "terms", "pp_stages": "stages"}


def schema_1_path(key: str) -> str:
    """Where schema_version 1's flat `fit` key lives in schema_version 2: `part.field`, or the key itself."""
    name = SCHEMA_1_RENAMES.get(key, key)
    for part, cls in zip(PARTS, _PART_TYPES, strict=True):
        if name in cls._fields:  # type: ignore[attr-defined]
            return f"{part}.{name}"
    if name in REPORT_KEYS:
        return name
    raise KeyError(key)

