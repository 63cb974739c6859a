"""Advice: the changes that fix a refusal or a preemption risk, each re-planned before it is shown."""
from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING

from kvplan.errors import InvalidParameter
from kvplan.vllm.defaults import FP8_KV_DTYPES
from kvplan.vllm.report import Advice, FitReport
from kvplan.vllm.settings import ServeSettings

if TYPE_CHECKING:
    from kvplan.model.config import ModelSpec

MAX_ADVISED_UTILIZATION = 0.98  # leave room for the CUDA context and other processes
MIN_ADVISED_UTILIZATION_PCT = 50  # below this, lowering utilization is not advice worth giving
ADVISED_TP_SIZES = (2, 4, 8)


def _problem_solved(before: FitReport, after: FitReport) -> bool:
    if not before.fits:
        return after.fits
    return after.fits and not after.preemption.possible


def advise_fixes(
    model: ModelSpec, settings: ServeSettings, report: FitReport, replan: Callable[[ServeSettings], FitReport]
) -> list[Advice]:
    """Changes that fix a refusal or a preemption risk, each re-planned through `replan` (fit's pipeline) and kept
    only when it actually fixes the problem: raise gpu_memory_utilization (≤ 0.98), fp8 KV cache,
    more tensor parallelism, a shorter max_model_len, fewer max_num_seqs."""
    out: list[Advice] = []
    fixes = "starts" if not report.fits else "no preemption"

    def attempt(change: str, new: ServeSettings, detail: str) -> bool:
        try:
            after = replan(new)
        except InvalidParameter:
            return False
        if _problem_solved(report, after):
            out.append(
                Advice(change, fixes, after.num_gpu_blocks, after.kv_cache_tokens, after.max_concurrency, detail)
            )
            return True
        return False

    # 1. gpu_memory_utilization: the smallest value (in 0.01 steps) that fixes it.
    if settings.kv_cache_memory_bytes is None and report.startup != "OOM loading weights":
        lo = math.floor(report.gpu_memory_utilization * 100) + 1
        hi = round(MAX_ADVISED_UTILIZATION * 100)

        def ok(pct: int) -> bool:
            try:
                return _problem_solved(
                    report, replan(replace(settings, gpu_memory_utilization=pct / 100))
                )
            except InvalidParameter:
                return False

        if lo <= hi and ok(hi):
            best = _first_true(lo, hi, ok)
            attempt(
                f"--gpu-memory-utilization {best / 100:.2f}",
                replace(settings, gpu_memory_utilization=best / 100),
                "more of the GPU for vLLM",
            )
    # 1b. Utilization above what is free at startup: the largest value that starts.
    if report.startup == "refuses: free memory":
        top = math.ceil(report.gpu_memory_utilization * 100) - 1
        for pct in range(top, MIN_ADVISED_UTILIZATION_PCT - 1, -1):
            if attempt(
                f"--gpu-memory-utilization {pct / 100:.2f}",
                replace(settings, gpu_memory_utilization=pct / 100),
                "leave room for the CUDA context vLLM finds in use at startup",
            ):
                break
    # 2. fp8 KV cache.
    if report.kv_cache_dtype not in FP8_KV_DTYPES:
        attempt("--kv-cache-dtype fp8", replace(settings, kv_cache_dtype="fp8"), "half the bytes per token")
    # 3. More tensor parallelism (the smallest that works).
    for tp in ADVISED_TP_SIZES:
        if tp > settings.tp and model.num_attention_heads % tp == 0:
            if attempt(
                f"--tensor-parallel-size {tp}",
                replace(settings, tp=tp),
                f"{tp * settings.pp} GPUs: weights and KV heads split {tp} ways",
            ):
                break
    # 4. A shorter max_model_len: to start, or (when the user gave --concurrency) to keep that many resident.
    if settings.max_model_len != -1 and (not report.fits or settings.concurrency is not None):
        length = _advised_max_len(settings, report)
        if length:
            detail = (
                "the longest context that fits"
                if not report.fits
                else (f"the longest context at which {report.preemption.concurrency} requests stay resident")
            )
            attempt(f"--max-model-len {length}", replace(settings, max_model_len=length), detail)
    # 5. Fewer concurrent sequences.
    if report.fits and report.preemption.possible and report.preemption.max_requests_at_context >= 1:
        z = report.preemption.max_requests_at_context
        new = replace(
            settings, max_num_seqs=z, concurrency=None if settings.concurrency is None else min(settings.concurrency, z)
        )
        attempt(f"--max-num-seqs {z}", new, f"at most {z} requests of {report.preemption.context:,} tokens at once")
    return out


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
    if not report.fits:
        if report.startup == "refuses: max_model_len" and report.estimated_max_model_len:
            return report.estimated_max_model_len
        return None
    if settings.context is not None:  # preemption at a user-given context: max_model_len does not bound it
        return None
    p = report.preemption
    if p.from_context is None or p.from_context <= 1:
        return None
    return p.from_context - 1
