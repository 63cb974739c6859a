"""Non-torch memory that grows during vLLM's profiling run (NCCL buffers, attention and cuBLAS workspaces)."""
from __future__ import annotations

from kvplan.units import GiB
from kvplan.vllm.defaults import LATEST, VllmVersion, version_band
from kvplan.vllm.memory.budget import MemoryTerm, shifted, with_range

# --- Non-torch memory growth during profiling --------------------------------------------------------
# utils/mem_utils.py:memory_profiling (v1/worker/gpu_worker.py:determine_available_memory) charges what
# cudaMemGetInfo loses beyond torch's allocations between the first snapshot and the end of the profiling
# run: attention and cuBLAS workspaces, and with TP/PP > 1 the NCCL communicators' buffers and the custom
# all-reduce IPC buffers (distributed/device_communicators/custom_all_reduce.py), which connect lazily on
# the first collective of the dummy run.
#
# vLLM 0.11 and later — llm-d H100 logs, measured ("non-torch memory" line): 0.13–0.14 GiB on one GPU,
# 0.54–0.55 GiB at TP=2 (calibration half: 0.13 on one GPU).
NON_TORCH_BYTES_SINGLE_GPU = round(0.13 * GiB)
NON_TORCH_BYTES_MULTI_GPU = round(0.54 * GiB)
# vLLM 0.8–0.10 — implied by the A100 0.10.1.1 logs of the calibration half (requested − "Model loading
# took" − "Available KV cache memory" − the FlashInfer sampler peak): 0.05 GiB on one GPU (Qwen2-7B,
# utilization 0.25), 0.17 GiB at TP=2 over NVLink (the "~0.2 GiB" of the TP 2 logs; the 2 × A100 40GB record,
# whose log says "FlashInfer is not available", agrees once its native sampler is counted).
NON_TORCH_BYTES_SINGLE_GPU_V010 = round(0.05 * GiB)
NON_TORCH_BYTES_MULTI_GPU_V010 = round(0.17 * GiB)
NON_TORCH_V011_SINCE = VllmVersion(0, 11)
# Ranges (GiB, low … high) from the calibration residuals above, widened by the logs' 2-decimal rounding.
# TP/PP > 1 beyond TP=2 is assumed to cost what TP=2 costs (no calibration log with TP ≥ 4 states it). The
# multi-GPU top is the calibration half's highest measured value: 1.38 GiB "for non-torch memory" on
# 2 × H200 (Qwen3-Next-80B-A3B, vLLM 0.10.2, NVSwitch), which no interconnect rule kvplan has explains.
NON_TORCH_RANGE_SINGLE_GIB = (0.02, 0.20)
NON_TORCH_RANGE_MULTI_GIB = (0.10, 1.40)

# Integrated GPUs (DGX Spark's GB10, Jetson): utils/mem_utils.py:MemorySnapshot.measure takes free memory from
# psutil's MemAvailable, so the non-torch growth also holds what the host side of the engine gains between
# the first snapshot and the end of profiling (its Python heap, torch.compile's workers, …): an estimate.
# Calibration half, GB10, vLLM 0.13.0 (NVIDIA 26.01): ceil(121.63 GiB × utilization) − "Model loading took" −
# "Available KV cache memory" − the activation kvplan counts (256 rows × vocabulary × 38.4 B + 2,048 hidden
# states; the sampler dominates) − 0.13 GiB:
#   guardkit Qwen2.5-14B-Instruct-FP8-dynamic, 0.15: 18.245 − 15.223 + 1.30 − 1.412 − 0.13 = 2.78 GiB
#     (vocabulary 152,064, hidden 5,120: Qwen2.5-14B's config as quoted in public index file 30247352769)
#   guardkit Nemotron-3-Nano-4B-FP8, 0.05: 6.082 − 4.905 + 2.51 − 1.212 − 0.13 = 2.34 GiB (vocabulary 131,072,
#     as every Nemotron-H / Nemotron-Nano config of the corpus; hidden 3,136 from the model card)
# Best: their mean. Range: 0 (a host that gains nothing; the two logs only bound the top) … 2.80 GiB.
INTEGRATED_HOST_GROWTH_BYTES = round(2.56 * GiB)
INTEGRATED_HOST_GROWTH_RANGE_GIB = (0.0, 2.80)


def estimate_non_torch(*, tp: int, pp: int, version: VllmVersion = LATEST, integrated: bool = False) -> MemoryTerm:
    """Non-torch memory that appears during profiling (NCCL lazy buffers, workspaces), by version band and
    TP×PP (utils/mem_utils.py:memory_profiling's `non_torch_increase`). Assumes one interconnect per band
    (NVLink with custom all-reduce, as the calibration logs ran); a PCIe box without custom all-reduce
    falls inside the range, not on the best value. On an `integrated` GPU the host's growth joins it
    (INTEGRATED_HOST_GROWTH_BYTES)."""
    multi = tp * pp > 1
    old = version < NON_TORCH_V011_SINCE
    band = version_band(version)
    if multi:
        value = NON_TORCH_BYTES_MULTI_GPU_V010 if old else NON_TORCH_BYTES_MULTI_GPU
        where = ("A100 0.10.1.1 logs at TP=2, implied" if old
                 else "H100 0.11 logs at TP=2, measured")
        text = (f"vLLM {band}: {value / GiB:.2f} GiB ({where}: NCCL and custom all-reduce buffers created on "
                "first use); assumed for any TP×PP > 1")
        lo, hi = NON_TORCH_RANGE_MULTI_GIB
    else:
        value = NON_TORCH_BYTES_SINGLE_GPU_V010 if old else NON_TORCH_BYTES_SINGLE_GPU
        where = "A100 0.10.1.1 logs, implied" if old else "H100 0.11 logs, measured"
        text = f"vLLM {band}: {value / GiB:.2f} GiB on one GPU ({where}: attention and cuBLAS workspaces)"
        lo, hi = NON_TORCH_RANGE_SINGLE_GIB
    term = with_range(MemoryTerm("non_torch", value, "estimate", text), round(lo * GiB), round(hi * GiB))
    if not integrated:
        return term
    low, high = INTEGRATED_HOST_GROWTH_RANGE_GIB
    return shifted(term, INTEGRATED_HOST_GROWTH_BYTES,
                   f"plus the host's growth on an integrated GPU, {INTEGRATED_HOST_GROWTH_BYTES / GiB:.2f} GiB (free "
                   f"memory is the OS's MemAvailable; GB10 logs, estimate {low:.2f} … {high:.2f} GiB)",
                   low_delta=round(low * GiB), high_delta=round(high * GiB))
