"""The KV byte budget SGLang 0.5.23 sizes from, and its startup refusal (paths relative to `sglang/srt/`).

`mem_cache/kv_cache_configurator.py:KVCacheConfigurator._profile_available_bytes`:

    pre    = free GiB at distributed/bootstrap.py:measure_pre_model_load_memory (min over ranks)
    avail  = free GiB after the weights load (utils/common.py:get_available_gpu_memory, min over ranks)
    rest   = avail − pre × (1 − mem_fraction_static) − multimodal reservation (multimodal.mm_reservation_gib)
    rest   = rest − the Mamba state slots     (hybrid models: mamba.carve_mamba_cache)
    budget = int(rest × 2**30)               rest ≤ 0: "Loaded weights leave no GPU memory …"

SGLang *measures* pre and avail; kvplan estimates them (`estimate_free_memory`): pre = the cudaMemGetInfo
total less the memory in use at the baseline (CUDA context, NCCL), avail = pre less the weights per GPU
(kvplan's loaded-weights estimate, `kvplan.vllm.memory.weights.estimate_weights`), each with a range.
Pure: numbers in, numbers out.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass

from kvplan.errors import InvalidParameter
from kvplan.sglang.mamba import MAMBA_FULL_MEMORY_RATIO, MambaCache, MambaState, SpecReserve, carve_mamba_cache

GiB = 1 << 30

# Memory in use at SGLang's "Memory baseline" (CUDA context, cuBLAS, NCCL / custom all-reduce buffers),
# an estimate from the public logs of tests/fixtures/sglang/startup-logs.yaml on H200 (cudaMemGetInfo total
# 139.72 GiB, the catalog's): one GPU, "Load weight begin" ≈ 131.08 + 8.13 = 139.21 GiB free → 0.51 GiB
# (sglang PR #4826); TP 8, 137.29 GiB → 2.43 GiB (PR #11716) and 137.90 GiB → 1.82 GiB (InferenceX #2128).
# (best, low, high) in GiB; one log for one GPU, so its range is a guess of ±0.2 GiB.
BASELINE_GIB_SINGLE = (0.51, 0.31, 0.71)
BASELINE_GIB_MULTI = (2.13, 1.82, 2.43)


@dataclass(frozen=True)
class FreeMemory:
    """Free memory before and after the weights load on the tightest rank, GiB (best, low, high)."""

    pre_gib: float
    avail_gib: float
    pre_range: tuple[float, float]
    avail_range: tuple[float, float]
    source: str  # "estimate" or "given"


def estimate_free_memory(*, cuda_total_bytes: int, weights_bytes: int, weights_range: tuple[int, int],
                         world: int) -> FreeMemory:
    """kvplan's estimate of SGLang's two measurements: pre = total − baseline, avail = pre − weights."""
    best, low, high = BASELINE_GIB_MULTI if world > 1 else BASELINE_GIB_SINGLE
    total = cuda_total_bytes / GiB
    w, w_lo, w_hi = weights_bytes / GiB, weights_range[0] / GiB, weights_range[1] / GiB
    pre = total - best
    return FreeMemory(pre, pre - w, (total - high, total - low), (total - high - w_hi, total - low - w_lo),
                      "estimate")


# model_executor/model_runner.py:ModelRunner.load_model's end line: "Load weight end. elapsed=…, type=…, [quant=…,]
# avail mem=A GB, mem usage=W GB." (GB = GiB: utils/common.py:get_available_gpu_memory).
_WEIGHT_END = re.compile(r"avail mem=(\d{1,5}(?:\.\d{1,4})?) GB, mem usage=(\d{1,5}(?:\.\d{1,4})?) GB")


def free_memory_from_log(line: str) -> FreeMemory:
    """The free memory SGLang measured around the weights, from its `Load weight end` line: avail A after, and
    A + W before (W, mem usage, is free-before − free-after). The log rounds both to 0.01 GiB."""
    match = _WEIGHT_END.search(line[:4096])
    if match is None:
        raise InvalidParameter("--sglang-weight-log: no 'avail mem=A GB, mem usage=W GB' in it",
                               hint="paste SGLang's `Load weight end. … avail mem=…, mem usage=… GB.` line")
    avail, usage = float(match.group(1)), float(match.group(2))
    pre = avail + usage
    return FreeMemory(pre, avail, (pre, pre), (avail, avail), "log")


@dataclass(frozen=True)
class Budget:
    """What _profile_available_bytes returns (budget_bytes), or its refusal."""

    budget_bytes: int | None
    slack_gib: float
    refusal: str | None
    minimum_fraction: float  # 1 − avail / pre
    mamba: MambaCache | None = None  # the state slots carved out first (hybrid models)


def refusal_text(mem_fraction_static: float, avail_gib: float, pre_gib: float) -> str:
    """The ValueError _profile_available_bytes raises, verbatim (minimum printed with 4 decimals, the
    suggestion ceil(minimum × 1000) / 1000 with 3)."""
    minimum = 1 - avail_gib / pre_gib
    suggested = math.ceil(minimum * 1000) / 1000
    return (f"Loaded weights leave no GPU memory for the KV cache under --mem-fraction-static="
            f"{mem_fraction_static}. Raise --mem-fraction-static above {suggested:.3f} (minimum viable = 1 - "
            f"available/pre = {minimum:.4f}). If using speculative decoding, draft weights are now counted.")


def profile_budget(*, avail_gib: float, pre_gib: float, mem_fraction_static: float,
                   mm_reservation_gib: float = 0.0, mamba: MambaState | None = None,
                   mamba_ratio: int = 3, mamba_full_memory_ratio: float | None = None,
                   max_mamba_cache_size: int | None = None, attn_dp_size: int = 1,
                   spec: SpecReserve | None = None) -> Budget:
    """KVCacheConfigurator._profile_available_bytes (post-capture sizing off): the slack and the multimodal
    reservation off the free memory, then (hybrid models) the Mamba state slots, with a speculative run's
    intermediate state (`spec`), whose own refusal comes first."""
    slack = pre_gib * (1 - mem_fraction_static)
    rest = avail_gib - slack - mm_reservation_gib
    minimum = 1 - avail_gib / pre_gib
    cache = None
    if mamba is not None:
        cache = carve_mamba_cache(rest, mamba, ratio=mamba_ratio, full_memory_ratio=(
            MAMBA_FULL_MEMORY_RATIO if mamba_full_memory_ratio is None else mamba_full_memory_ratio),
            max_mamba_cache_size=max_mamba_cache_size, attn_dp_size=attn_dp_size, spec=spec)
        if cache.refusal is not None:  # SGLang's RuntimeError: a startup verdict, not bad input
            return Budget(None, slack, cache.refusal, minimum, cache)
        rest = cache.rest_gib
    if rest <= 0:
        return Budget(None, slack, refusal_text(mem_fraction_static, avail_gib, pre_gib), minimum, cache)
    return Budget(int(rest * (1 << 30)), slack, None, minimum, cache)
