"""Advice: the changes that fix a refusal or a preemption risk, each re-planned before it is shown."""
from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING

from kvplan.errors import InvalidParameter, NotServed
from kvplan.vllm.backends import FP8_KV_DTYPES
from kvplan.vllm.report import Advice, FitReport
from kvplan.vllm.settings import ServeSettings
from kvplan.vllm.verdicts import Startup

if TYPE_CHECKING:
    from kvplan.model.spec import ModelSpec

MAX_ADVISED_UTILIZATION = 0.98  # leave room for the CUDA context and other processes
MIN_ADVISED_UTILIZATION_PCT = 50  # below this, lowering utilization is not advice worth giving
ADVISED_TP_SIZES = (2, 4, 8)


def _problem_solved(before: FitReport, after: FitReport) -> bool:
    if not before.verdict.fits:
        return after.verdict.fits
    return after.verdict.fits and not after.verdict.preemption.possible


# One candidate change: the flag as shown, the settings it gives, and why it helps.
_Candidate = tuple[str, ServeSettings, str]


def _first_fix(report: FitReport, replan: Callable[[ServeSettings], FitReport],
               candidates: Iterable[_Candidate]) -> Advice | None:
    """Re-plan the candidates in order; the advice of the first that fixes the problem, else None."""
    fixes = "starts" if not report.verdict.fits else "no preemption"
    for change, new, detail in candidates:
        try:
            after = replan(new)
        except (InvalidParameter, NotServed):  # vLLM would refuse this change (e.g. fp8 on a pre-SM89 Triton backend)
            continue
        if _problem_solved(report, after):
            return Advice(change, fixes, after.cache.num_gpu_blocks, after.cache.kv_cache_tokens,
                          after.scheduler.max_concurrency, detail)
    return None


def _utilization_candidates(settings: ServeSettings, report: FitReport,
                            replan: Callable[[ServeSettings], FitReport]) -> Iterator[_Candidate]:
    """1. gpu_memory_utilization: the smallest value (in 0.01 steps, ≤ 0.98) that fixes it."""
    if settings.cache_config.kv_cache_memory_bytes is not None or report.verdict.startup is Startup.OOM_LOADING_WEIGHTS:
        return
    lo = math.floor(report.memory.gpu_memory_utilization * 100) + 1
    hi = round(MAX_ADVISED_UTILIZATION * 100)

    def ok(pct: int) -> bool:
        try:
            return _problem_solved(report, replan(settings.updated(gpu_memory_utilization=pct / 100)))
        except InvalidParameter:
            return False

    if lo <= hi and ok(hi):
        best = _first_true(lo, hi, ok)
        yield (f"--gpu-memory-utilization {best / 100:.2f}", settings.updated(gpu_memory_utilization=best / 100),
               "more of the GPU for vLLM")


def _free_memory_candidates(settings: ServeSettings, report: FitReport) -> Iterator[_Candidate]:
    """1b. Utilization above what is free at startup: the largest value that starts, tried downwards."""
    if report.verdict.startup is not Startup.REFUSES_FREE_MEMORY:
        return
    top = math.ceil(report.memory.gpu_memory_utilization * 100) - 1
    for pct in range(top, MIN_ADVISED_UTILIZATION_PCT - 1, -1):
        yield (f"--gpu-memory-utilization {pct / 100:.2f}", settings.updated(gpu_memory_utilization=pct / 100),
               "leave room for what vLLM finds in use at startup (the CUDA context; on a unified-memory GPU such "
               "as DGX Spark, the host's own use)")


# Smaller scheduler limits vLLM's profiling run is sized by (its sampler peak scales with
# min(max_num_batched_tokens, max_num_seqs), its forward peak with max_num_batched_tokens).
ADVISED_MAX_NUM_SEQS = (512, 256, 128, 64, 32, 16, 8)
ADVISED_MAX_NUM_BATCHED_TOKENS = (8192, 4096, 2048)


def _profile_candidates(settings: ServeSettings, report: FitReport) -> Iterator[_Candidate]:
    """2. A smaller profiling peak, when vLLM refuses for lack of KV memory: the largest max_num_seqs that
    starts (the fewest requests given up), then a smaller max_num_batched_tokens, then no CUDA graphs."""
    verdict = report.verdict
    if verdict.fits or verdict.startup.out_of_memory or settings.cache_config.kv_cache_memory_bytes is not None:
        return
    for seqs in ADVISED_MAX_NUM_SEQS:
        if seqs < report.scheduler.max_num_seqs:
            yield (f"--max-num-seqs {seqs}", settings.updated(max_num_seqs=seqs),
                   f"a smaller sampler peak in vLLM's profiling run; at most {seqs} requests at once")
    for mnbt in ADVISED_MAX_NUM_BATCHED_TOKENS:
        if mnbt < report.scheduler.max_num_batched_tokens:
            yield (f"--max-num-batched-tokens {mnbt}", settings.updated(max_num_batched_tokens=mnbt),
                   f"a smaller forward peak; prefill in chunks of {mnbt:,} tokens")
    if not settings.model_config.enforce_eager:
        yield "--enforce-eager", settings.updated(enforce_eager=True), "no CUDA-graph memory; slower decode"


def _fp8_candidates(settings: ServeSettings, report: FitReport) -> Iterator[_Candidate]:
    """2. An fp8 KV cache, unless it is one already."""
    if report.cache.kv_cache_dtype not in FP8_KV_DTYPES:
        yield "--kv-cache-dtype fp8", settings.updated(kv_cache_dtype="fp8"), "half the bytes per token"


def _tp_candidates(model: ModelSpec, settings: ServeSettings) -> Iterator[_Candidate]:
    """3. More tensor parallelism, smallest first, among sizes that divide the attention heads."""
    for tp in ADVISED_TP_SIZES:
        if tp > settings.parallel_config.tensor_parallel_size and model.num_attention_heads % tp == 0:
            yield (f"--tensor-parallel-size {tp}", settings.updated(tensor_parallel_size=tp),
                   f"{tp * settings.parallel_config.pipeline_parallel_size} GPUs: weights and KV heads split {tp} ways")


def _max_len_candidates(settings: ServeSettings, report: FitReport) -> Iterator[_Candidate]:
    """4. A shorter max_model_len: to start, or (when the user gave --concurrency) to keep that many resident."""
    if settings.model_config.max_model_len == -1 or (report.verdict.fits and settings.load.concurrency is None):
        return
    length = _advised_max_len(settings, report)
    if length:
        detail = (
            "the longest context that fits"
            if not report.verdict.fits
            else (f"the longest context at which {report.verdict.preemption.concurrency} requests stay resident")
        )
        yield f"--max-model-len {length}", settings.updated(max_model_len=length), detail


def _max_num_seqs_candidates(settings: ServeSettings, report: FitReport) -> Iterator[_Candidate]:
    """5. Fewer concurrent sequences: as many requests as stay resident at the context."""
    verdict, p = report.verdict, report.verdict.preemption
    if verdict.fits and p.possible and p.max_requests_at_context >= 1:
        z = p.max_requests_at_context
        new = settings.updated(
            max_num_seqs=z, concurrency=None if settings.load.concurrency is None else min(settings.load.concurrency, z)
        )
        yield f"--max-num-seqs {z}", new, f"at most {z} requests of {p.context:,} tokens at once"


def advise_fixes(
    model: ModelSpec, settings: ServeSettings, report: FitReport, replan: Callable[[ServeSettings], FitReport]
) -> list[Advice]:
    """Changes that fix a refusal or a preemption risk, each re-planned through `replan` (fit's pipeline) and kept
    only when it actually fixes the problem, ranked by what the user gives up, least first: more of the GPU
    (gpu_memory_utilization ≤ 0.98), a smaller profiling peak (max_num_seqs, max_num_batched_tokens,
    enforce-eager: throughput), an fp8 KV cache (precision), more tensor parallelism (GPUs), a shorter
    max_model_len (context), fewer max_num_seqs against preemption."""
    kinds = (
        _utilization_candidates(settings, report, replan),
        _free_memory_candidates(settings, report),
        _profile_candidates(settings, report),
        _fp8_candidates(settings, report),
        _tp_candidates(model, settings),
        _max_len_candidates(settings, report),
        _max_num_seqs_candidates(settings, report),
    )
    found = (_first_fix(report, replan, candidates) for candidates in kinds)
    return [advice for advice in found if advice is not None]


def _first_true(lo: int, hi: int, pred: Callable[[int], bool]) -> int:
    """Smallest x in [lo, hi] with pred(x), given pred(hi) and pred monotone."""
    while lo < hi:
        mid = (lo + hi) // 2
        if pred(mid):
            hi = mid
        else:
            lo = mid + 1
    return lo


def _advised_max_len(settings: ServeSettings, report: FitReport) -> int | None:
    if not report.verdict.fits:
        if report.verdict.startup is Startup.REFUSES_MAX_MODEL_LEN and report.verdict.estimated_max_model_len:
            return report.verdict.estimated_max_model_len
        return None
    if settings.load.context is not None:  # preemption at a user-given context: max_model_len does not bound it
        return None
    p = report.verdict.preemption
    if p.from_context is None or p.from_context <= 1:
        return None
    return p.from_context - 1
