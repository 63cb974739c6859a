"""vLLM's defaults that decide the KV-cache budget, by vLLM version and GPU.

Every value names the vLLM file it comes from (paths relative to the `vllm/` package of the
0.33.0 release unless a version says otherwise). kvplan defaults to the newest rules
(`LATEST_VLLM_VERSION`); `--vllm-version` selects older rules only where they are known to differ.
Pure: numbers in, numbers out.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Literal

from kvplan.errors import InvalidParameter
from kvplan.units import GiB

Usage = Literal["serve", "llm"]
PerformanceMode = Literal["balanced", "interactivity", "throughput"]
MambaCacheMode = Literal["align", "none"]

LATEST_VLLM_VERSION = "0.33"
# The V1 engine (v1/engine/core.py) is the only engine kvplan models. It became the default in 0.8
# (VLLM_USE_V1=1, engine/arg_utils.py:_is_v1_supported_oracle falls back to V0 only for unsupported
# features) and V0 was removed in 0.11, so 0.8 and 0.9 are planned as V1.
OLDEST_VLLM_VERSION = "0.8"


@dataclass(frozen=True, order=True)
class VllmVersion:
    """A vLLM release as (major, minor); patch releases share their minor's rules."""

    major: int
    minor: int

    def __str__(self) -> str:
        return f"{self.major}.{self.minor}"


def parse_vllm_version(text: str) -> VllmVersion:
    """`0.33`, `0.33.0`, `v0.11.2`, `0.11.0rc1` → VllmVersion; outside the modelled range → InvalidParameter."""
    m = re.match(r"^\s*v?(\d+)\.(\d+)(?:\.\d+)?(?:[.\-+]?\w+)?\s*$", text)
    if not m:
        raise InvalidParameter(f"--vllm-version: cannot read {text!r} (examples: 0.33, 0.11.0)")
    version = VllmVersion(int(m.group(1)), int(m.group(2)))
    if version < parse_vllm_version_unchecked(OLDEST_VLLM_VERSION):
        raise InvalidParameter(
            f"--vllm-version {version}: kvplan models the V1 engine of vLLM {OLDEST_VLLM_VERSION} and later",
            hint="older releases sized the cache with the V0 worker, whose accounting differs",
        )
    if version > parse_vllm_version_unchecked(LATEST_VLLM_VERSION):
        raise InvalidParameter(
            f"--vllm-version {version} is newer than the rules kvplan knows ({LATEST_VLLM_VERSION})",
            hint=f"use --vllm-version {LATEST_VLLM_VERSION}",
        )
    return version


def parse_vllm_version_unchecked(text: str) -> VllmVersion:
    """`major.minor` without range checks (for the constants in this module)."""
    major, minor = text.split(".")[:2]
    return VllmVersion(int(major), int(minor))


LATEST = parse_vllm_version_unchecked(LATEST_VLLM_VERSION)

# The release bands whose memory accounting differs (kvplan/vllm/memory/: each term says what differs).
#   0.8–0.9   V1 engine by default; FlashInfer top-k/top-p sampler whenever importable; graphs after sizing
#   0.10      same sampler and graph rules (the bands are kept apart: 0.10 is the release the logs show)
#   0.11–0.14 V0 removed; V1 runner
#   0.15–0.20 V1 runner; CUDA graphs still captured after the KV cache is sized
#   0.21–0.33 CUDA-graph estimate subtracted (0.21); Model Runner V2 default from 0.29
VERSION_BANDS: tuple[tuple[str, str], ...] = (
    ("0.8", "0.8–0.9"), ("0.10", "0.10"), ("0.11", "0.11–0.14"), ("0.15", "0.15–0.20"), ("0.21", "0.21–0.33"),
)


def version_band(version: VllmVersion = LATEST) -> str:
    """The band of releases `version` belongs to (VERSION_BANDS), e.g. "0.11–0.14"."""
    band = VERSION_BANDS[0][1]
    for start, name in VERSION_BANDS:
        if version >= parse_vllm_version_unchecked(start):
            band = name
    return band

# ---------------------------------------------------------------------------------------------
# Memory budget
# ---------------------------------------------------------------------------------------------

# config/cache.py:CacheConfig.gpu_memory_utilization (EngineArgs takes it): Field(default=0.9) up to
# 0.19.0, 0.92 from 0.20.0 (read in both wheels; 0.9 in every llm-d v0.11 log of
# tests/fixtures/data/vllm-startup-logs.yaml).
GPU_MEMORY_UTILIZATION_DEFAULT = 0.92
GPU_MEMORY_UTILIZATION_DEFAULT_BEFORE = 0.9
GPU_MEMORY_UTILIZATION_092_SINCE = VllmVersion(0, 20)

# envs.py:VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS defaults to "0" in 0.18.0 and 0.19.0 (whose workers
# log "In v0.19, CUDA graph memory profiling will be enabled by default"), "1" from 0.20.0 — although
# 0.20.0's own line says "CUDA graph memory profiling is enabled (default since v0.21.0)"
# (v1/worker/gpu_worker.py): the source wins.
CUDAGRAPH_ESTIMATE_SUBTRACTED_SINCE = VllmVersion(0, 20)

# Async scheduling by default (config/vllm.py:VllmConfig.__post_init__, `async_scheduling is None`): EngineArgs
# took config/scheduler.py's default False up to 0.13.0 and None (on unless incompatible) from 0.14.0, read in
# the wheels. Before, one batch was in flight: the gpt-oss-120b record vllm-27508 (Oct 2025,
# `--max-num-batched-tokens 1024`, "4.54 GiB KV cache is needed") matches 1 × MNBT. Of the incompatibilities
# kvplan models: a separate draft model turns it off until 0.28 (0.14–0.27 allow only EAGLE-type methods),
# 0.16 turns it off for a Mamba cache in align mode, and from 0.31 the V1 runner with PP > 1 runs without it
# (the same batches in flight as with it).
ASYNC_SCHEDULING_DEFAULT_SINCE = VllmVersion(0, 14)
ASYNC_WITH_DRAFT_MODEL_SINCE = VllmVersion(0, 28)
ASYNC_OFF_FOR_MAMBA_ALIGN = VllmVersion(0, 16)


def async_scheduling_default(version: VllmVersion, *, speculative_method: str | None = None,
                             mamba_cache_mode: str = "none") -> tuple[bool, str]:
    """Whether vLLM turns async scheduling on when `--async-scheduling` is not given, and why."""
    if version < ASYNC_SCHEDULING_DEFAULT_SINCE:
        return False, f"vLLM {version}: off by default (on by default from {ASYNC_SCHEDULING_DEFAULT_SINCE})"
    if speculative_method == "draft_model" and version < ASYNC_WITH_DRAFT_MODEL_SINCE:
        return False, f"vLLM {version}: off with draft_model speculative decoding"
    if version == ASYNC_OFF_FOR_MAMBA_ALIGN and mamba_cache_mode != "none":
        return False, f"vLLM {version}: off with a Mamba cache in {mamba_cache_mode} mode"
    return True, f"vLLM {version}: on by default"


# Model Runner V2 keeps its sampler's penalty state (memory/activation.py) in what vLLM's profiler counts
# from 0.27, when utils/mem_utils.py:memory_profiling began to measure the consumed memory with
# cudaMemGetInfo ("total_consumed"); up to 0.26 non-KV was weights + torch peak increase + non-torch growth,
# which misses a tensor allocated between the weights and the profiling run. Which runner vLLM picks is
# vllm/model_runner.py's.
TOTAL_CONSUMED_SINCE = VllmVersion(0, 27)


# Hybrid KV cache manager with chunked-local attention (Llama-4), config/vllm.py:VllmConfig.__post_init__:
# turned off for chunked-local models with an EAGLE-type draft (SpeculativeConfig.use_eagle: EAGLE, EAGLE-3,
# MTP, DFlash) in every release read (0.13–0.33), and otherwise unless
# envs.py:VLLM_ALLOW_CHUNKED_LOCAL_ATTN_WITH_HYBRID_KV_CACHE, whose default is "0" in 0.10–0.13 (PR #21761)
# and "1" from 0.14.0 (read in the wheels). The vLLM 0.32 oracle keeps chunked-local groups (Llama-4-Scout
# golden: "482.25 GiB KV cache is needed").
CHUNKED_LOCAL_HYBRID_MANAGER_SINCE = VllmVersion(0, 14)
EAGLE_TYPE_METHODS = frozenset({"eagle", "eagle3", "mtp", "dflash", "dspark"})


def hybrid_manager_disabled_by_default(has_chunked_local: bool, version: VllmVersion = LATEST, *,
                                       speculative_method: str | None = None) -> bool:
    """Whether vLLM turns the hybrid KV cache manager off on its own (config/vllm.py post-init)."""
    if not has_chunked_local:
        return False
    return speculative_method in EAGLE_TYPE_METHODS or version < CHUNKED_LOCAL_HYBRID_MANAGER_SINCE


def default_gpu_memory_utilization(version: VllmVersion = LATEST) -> float:
    """`--gpu-memory-utilization` when not given (config/cache.py:CacheConfig)."""
    if version >= GPU_MEMORY_UTILIZATION_092_SINCE:
        return GPU_MEMORY_UTILIZATION_DEFAULT
    return GPU_MEMORY_UTILIZATION_DEFAULT_BEFORE


# The dummy sampler's path by patch release (v1/sample/ops/topk_topp_sampler.py:TopKTopPSampler.__init__, read in the
# 0.11.0, 0.11.1 and 0.11.2 wheels): 0.11.0, as every release before it, samples with FlashInfer whenever flashinfer
# imports and VLLM_USE_FLASHINFER_SAMPLER is not 0 ("Using FlashInfer for top-p & top-k sampling."; flashinfer is only
# the wheel's [flashinfer] extra, the vllm/vllm-openai image ships it); 0.11.1 made it opt-in ("Users must opt in
# explicitly via VLLM_USE_FLASHINFER_SAMPLER=1", PR #26859 "Disable FlashInfer sampler by default", merged 2025-10-15,
# after the 0.11.0 tag). VllmVersion keeps major.minor only, so the patch is read from the version text; a bare "0.11"
# keeps the opt-in releases' sort path (the larger peak).
FLASHINFER_SAMPLER_LAST_DEFAULT = (0, 11, 0)
_PATCH_VERSION = re.compile(r"^\s*v?(\d+)\.(\d+)\.(\d+)")


def flashinfer_sampler_by_default(version_text: str | None) -> bool | None:
    """True where `version_text` names a 0.11 release up to FLASHINFER_SAMPLER_LAST_DEFAULT (0.11.0, its rc builds
    included): its sampler takes FlashInfer's path whenever flashinfer imports, as the releases before 0.11 do. None:
    the version band decides (memory/activation.py:sampler_bytes_per_logit)."""
    m = _PATCH_VERSION.match(version_text or "")
    if m is None:
        return None
    major, minor, patch = (int(g) for g in m.groups())
    last = FLASHINFER_SAMPLER_LAST_DEFAULT
    return True if (major, minor) == last[:2] and patch <= last[2] else None


def cudagraph_estimate_subtracted(version: VllmVersion = LATEST) -> bool:
    """Whether the CUDA-graph estimate is taken out of the KV budget (v1/worker/gpu_worker.py)."""
    return version >= CUDAGRAPH_ESTIMATE_SUBTRACTED_SINCE


def max_concurrent_batches(pp: int, *, async_scheduling: bool = True, model_runner_v2: bool = True) -> int:
    """Batches in flight at once (config/vllm.py:VllmConfig.max_concurrent_batches).

    `pp + 1` with async scheduling on Model Runner V2, 2 with async on the V1 runner at PP=1,
    `pp` otherwise.
    """
    if async_scheduling and model_runner_v2:
        return pp + 1
    if async_scheduling and pp == 1:
        return 2
    return pp


# v1/core/kv_cache_utils.py: "GPU KV cache size" became max_concurrency × max_model_len in 0.21
# (get_kv_cache_capacity in 0.24); 0.20.0 still printed num_blocks // len(groups) × min_block_size.
KV_TOKENS_FROM_CONCURRENCY_SINCE = VllmVersion(0, 21)
# v1/core/kv_cache_utils.py:get_kv_cache_configs: from 0.14 (vLLM #29431) the one-request fit check ran on the merged
# spec of every worker, all PP stages' layers, against the smallest worker's memory ("_check_enough_kv_cache_memory(
# min(available_memory), ... global_kv_cache_groups", read in 0.14.0, 0.15.0, 0.15.1 and 0.16.0), so PP refused lengths
# each stage could hold (vllm#32105, fixed by #33698). 0.13 and 0.17+ check each worker's own layers (read in 0.11.2,
# 0.13.0, 0.17.0, 0.18.0, 0.20.0, 0.22.0 and 0.33).
PP_MERGED_FIT_CHECK_SINCE = VllmVersion(0, 14)
PP_PER_WORKER_FIT_CHECK_SINCE = VllmVersion(0, 17)


def pp_fit_check_merged(version: VllmVersion) -> bool:
    """Whether this release checks one max-length request against the whole model's KV (every PP stage's layers)
    in the smallest worker's memory, instead of each stage's own layers in its own memory."""
    return PP_MERGED_FIT_CHECK_SINCE <= version < PP_PER_WORKER_FIT_CHECK_SINCE


# v1/core/kv_cache_utils.py:get_kv_cache_configs (kv_cache_planning.py from 0.33): from 0.29 the one-request check, its
# estimated max model length and auto-fit run on `available − _pool_bytes_per_block(groups)` ("Reserve the null block
# BlockPool permanently holds back, so auto-fit and the capacity check both plan against usable blocks", read in 0.29.0,
# 0.30.0, 0.31.0, 0.32.0 and 0.33.0; check_enough_kv_cache_memory likewise). Up to 0.28 they run on the full available
# memory (read in 0.11.0, 0.11.2, 0.13.0, 0.14.0, 0.15.1, 0.16.0, 0.18.0, 0.20.0, 0.22.0–0.26.0, 0.27.1 and 0.28.0), and
# the refusal quotes that full figure. The needed bytes (one max-length request) are the same under both rules.
FIT_CHECK_RESERVES_NULL_BLOCK_SINCE = VllmVersion(0, 29)
# get_kv_cache_configs, with --num-gpu-blocks-override: from 0.21 the memory checked (and auto-fit) is override ×
# bytes per block ("Reflect that in `available_memory` here so auto-fit, the admission check, and the per-worker config
# builder all plan against the same effective capacity", read in 0.21.0, 0.22.0–0.26.0, 0.27.1, 0.28.0–0.33.0); up to
# 0.20 the check ran on the profiled memory and may_override_num_blocks replaced the count afterwards (read in 0.11.0,
# 0.11.2, 0.13.0, 0.14.0, 0.15.1, 0.16.0, 0.18.0 and 0.20.0).
OVERRIDE_SETS_CHECKED_MEMORY_SINCE = VllmVersion(0, 21)


# _check_enough_kv_cache_memory's refusal text changed four times (v1/core/kv_cache_utils.py, read in 0.8.5, 0.9.0.1,
# 0.9.1, 0.9.2, 0.10.0–0.13.0, 0.14.0, 0.21.0, 0.22, 0.28.0; v1/core/kv_cache_planning.py in 0.33): the releases that
# start each wording. 0.9 keeps 0.8's lost estimate in 0.9.0 / 0.9.0.1 (patch releases share their minor's rules here).
REFUSAL_WORDINGS = (VllmVersion(0, 8), VllmVersion(0, 9), VllmVersion(0, 13), VllmVersion(0, 14), VllmVersion(0, 22))


def refusal_wording(version: VllmVersion) -> VllmVersion:
    """The release whose refusal wording `version` prints (block_plan.refusal_message)."""
    return max((w for w in REFUSAL_WORDINGS if w <= version), default=REFUSAL_WORDINGS[0])


def fit_check_reserves_null_block(version: VllmVersion) -> bool:
    """Whether this release checks one max-length request (and estimates the max model length) against the available
    KV memory less one block, the null block, rather than the whole available memory."""
    return version >= FIT_CHECK_RESERVES_NULL_BLOCK_SINCE


def override_sets_checked_memory(version: VllmVersion) -> bool:
    """Whether `--num-gpu-blocks-override` also replaces the memory the one-request check runs on (override × bytes
    per block) rather than only the block count."""
    return version >= OVERRIDE_SETS_CHECKED_MEMORY_SINCE


# v1/kv_cache_interface.py:SlidingWindowSpec / ChunkedLocalAttentionSpec.max_admission_blocks_per_request: the
# window (or chunk) plus max_num_batched_tokens up to 0.25 (read in 0.23 and 0.25), plus
# VllmConfig.max_in_flight_tokens (every batch in flight) from 0.26 (read in 0.26, 0.27, 0.28, 0.30, 0.33).
WINDOW_RESERVES_IN_FLIGHT_SINCE = VllmVersion(0, 26)
# models/deepseek_v4/attention.py:_resolve_dsv4_kv_cache_dtype: up to 0.29 an assertion refuses any flag that is not
# fp8 (`--kv-cache-dtype auto` included: "DeepseekV4 FlashMLA fp8 layout only supports fp8 kv-cache, got auto" in
# 0.23, "DeepseekV4 fp8_ds_mla layout ..." in 0.25 to 0.29); from 0.30 `auto` is served as fp8_ds_mla too.
DSV4_AUTO_KV_SINCE = VllmVersion(0, 30)
DSV4_FP8_DS_MLA_WORDING_SINCE = VllmVersion(0, 25)
# DeepSeek-V4's KV cache groups: up to 0.28 its own "layer tuple" grouping (v1/core/kv_cache_utils.py:
# _get_kv_cache_groups_uniform_groups, read in 0.23, 0.25 and 0.28), from 0.29 the generic packing of a
# block-outermost layout (_get_packed_kv_cache_groups, read in 0.29, 0.30 and 0.33).
DSV4_PACKED_GROUPS_SINCE = VllmVersion(0, 29)


def max_in_flight_tokens(max_num_batched_tokens: int, pp: int, *, async_scheduling: bool = True,
                         model_runner_v2: bool = True) -> int:
    """`max_concurrent_batches × max_num_batched_tokens` (config/vllm.py:VllmConfig.max_in_flight_tokens).

    Sliding-window and chunked-local layers reserve these tokens on top of the window per request;
    `--no-async-scheduling` leaves one batch in flight per pipeline stage.
    """
    return max_concurrent_batches(pp, async_scheduling=async_scheduling,
                                  model_runner_v2=model_runner_v2) * max_num_batched_tokens


# ---------------------------------------------------------------------------------------------
# Batch defaults: max_num_seqs and max_num_batched_tokens
# ---------------------------------------------------------------------------------------------

# engine/arg_utils.py:EngineArgs.get_batch_defaults — NVML total memory tiers. The ≥ 160 GiB tier first
# appears in 0.28.0 (0.27.0 has only the 70 GiB one: read in the wheels). GB10 stays on the small tier in
# every release: up to 0.32 because NVML cannot read its memory (platforms/cuda.py: the query raises, the
# except branch takes 0), from 0.33 by its explicit capability-12.1 test.
BIG_GPU_NVML_BYTES = 160 * GiB  # B200/B300, MI300X…
BIG_GPU_TIER_SINCE = VllmVersion(0, 28)
LARGE_GPU_NVML_BYTES = 70 * GiB  # H100, H200, H20, GH200 (not A100, not GB10)


@dataclass(frozen=True)
class BatchDefaults:
    """max_num_batched_tokens and max_num_seqs vLLM picks, with the reason."""

    max_num_batched_tokens: int
    max_num_seqs: int
    tier: str


def batch_defaults(nvml_total_bytes: int, device_name: str, usage: Usage = "serve",
                   version: VllmVersion = LATEST) -> BatchDefaults:
    """Defaults by NVML memory tier, device name and entry point (engine/arg_utils.py:get_batch_defaults).

    | tier                                   | LLM class     | vllm serve    |
    | NVML ≥ 160 GiB (vLLM 0.28+)            | 16384 / 1024  | 16384 / 1024  |
    | ≥ 70 GiB, not A100, not GB10           | 16384 / 1024  |  8192 / 1024  |
    | other CUDA GPUs                        |  8192 / 256   |  2048 / 256   |
    """
    name = device_name.lower()
    if nvml_total_bytes >= BIG_GPU_NVML_BYTES and version >= BIG_GPU_TIER_SINCE:
        return BatchDefaults(16384, 1024, "NVML total ≥ 160 GiB")
    if nvml_total_bytes >= LARGE_GPU_NVML_BYTES and "a100" not in name and "gb10" not in name:
        mnbt = 16384 if usage == "llm" else 8192
        return BatchDefaults(mnbt, 1024, "NVML total ≥ 70 GiB (not A100/GB10)")
    mnbt = 8192 if usage == "llm" else 2048
    return BatchDefaults(mnbt, 256, "NVML total < 70 GiB or A100/GB10")


@dataclass(frozen=True)
class BatchSettings:
    """The resolved scheduler budget."""

    max_num_batched_tokens: int
    max_num_seqs: int
    mnbt_source: str
    seqs_source: str


# engine/arg_utils.py: --performance-mode (balanced / interactivity / throughput) first appears in 0.17.0.
PERFORMANCE_MODE_SINCE = VllmVersion(0, 17)


def resolve_batch_settings(
    defaults: BatchDefaults,
    *,
    max_model_len: int,
    max_num_seqs: int | None = None,
    max_num_batched_tokens: int | None = None,
    performance_mode: PerformanceMode = "balanced",
) -> BatchSettings:
    """Apply vLLM's post-adjustments to the values the user did not set
    (engine/arg_utils.py:_set_default_max_num_seqs_and_batched_tokens_args).

    `throughput` doubles both defaults; then `MNBT = min(max_num_seqs × max_model_len, MNBT)` and
    `max_num_seqs = min(max_num_seqs, MNBT)`. Chunked prefill is on (generate models), so MNBT is
    not raised to max_model_len.
    """
    factor = 2 if performance_mode == "throughput" else 1
    seqs = max_num_seqs if max_num_seqs is not None else defaults.max_num_seqs * factor
    mnbt = max_num_batched_tokens if max_num_batched_tokens is not None else defaults.max_num_batched_tokens * factor
    mnbt_source = "--max-num-batched-tokens" if max_num_batched_tokens is not None else f"default ({defaults.tier})"
    seqs_source = "--max-num-seqs" if max_num_seqs is not None else f"default ({defaults.tier})"
    if max_num_batched_tokens is None:
        capped = min(seqs * max_model_len, mnbt)
        if capped != mnbt:
            mnbt_source += ", capped at max_num_seqs × max_model_len"
        mnbt = capped
    if max_num_seqs is None:
        capped = min(seqs, mnbt)
        if capped != seqs:
            seqs_source += ", capped at max_num_batched_tokens"
        seqs = capped
    return BatchSettings(mnbt, seqs, mnbt_source, seqs_source)


# ---------------------------------------------------------------------------------------------
# Block size and hybrid alignment (the attention backend and its block size: vllm/backends.py)
# ---------------------------------------------------------------------------------------------

DEFAULT_BLOCK_SIZE = 16  # config/cache.py:CacheConfig.DEFAULT_BLOCK_SIZE
# Smallest block every CUDA attention backend's kernels accept; hybrid alignment rounds to it
# (platforms/interface.py:_align_hybrid_block_size, "lcm of all backends' smallest kernel blocks").
MIN_KERNEL_BLOCK_SIZE = 16
# _align_hybrid_block_size: MLA attention in a hybrid model aligns to at least 128 tokens.
MLA_HYBRID_MIN_ALIGN = 128
# v1/attention/backends/gdn_attn.py: the FlashInfer GDN prefill kernel writes state checkpoints every
# 64 tokens, so align-mode hybrids use lcm(block, 64). The Triton GDN backend has no such constraint.
GDN_FLASHINFER_CHECKPOINT_ALIGNMENT = 64

GDN_FLASHINFER_HEAD_K_DIM = 128  # the only linear_key_head_dim its SM10x/SM12x kernels take


def prefill_checkpoint_blocks(variant: str, arch: str | None, head_k_dim: int = GDN_FLASHINFER_HEAD_K_DIM) -> int:
    """Extra Mamba blocks per request for prefill-state checkpoints in `align` mode
    (MambaSpec.num_prefill_checkpoint_blocks). Mamba2 kernels write chunk states: 1 (the vLLM 0.32
    oracle's granite-4.0-h and Nemotron-H specs). GDN: 1 with the FlashInfer prefill kernel (reference
    §10e: 2 + 0 + 1 = 3 blocks), 0 with the Triton/CPU kernel (the oracle's Qwen3-Next spec). Other
    recurrent layers (Mamba1, short conv, linear attention) are assumed to write none."""
    if variant == "mamba2":
        return 1
    if variant == "gdn":
        return 1 if gdn_checkpoint_alignment(arch, head_k_dim) > 1 else 0
    return 0


def gdn_checkpoint_alignment(arch: str | None, head_k_dim: int = GDN_FLASHINFER_HEAD_K_DIM) -> int:
    """Token alignment of GDN state checkpoints in `align` mode: 64 with the FlashInfer GDN prefill kernel,
    1 with the Triton kernel (v1/attention/backends/gdn_attn.py). vLLM 0.33 picks FlashInfer
    (model_executor/layers/mamba/gdn/qwen_gdn_linear_attn.py:_resolve_gdn_prefill_backend) on SM90 always,
    on SM10x and SM12x when head_k_dim is 128 and the CUDA runtime is 13 or newer — assumed here, as the
    CUDA oracle's faked platform reports it (cuda_runtime_major 13)."""
    family = (arch or "").lower()
    flashinfer = family == "hopper" or (family in ("blackwell", "blackwell-rtx")
                                        and head_k_dim == GDN_FLASHINFER_HEAD_K_DIM)
    return GDN_FLASHINFER_CHECKPOINT_ALIGNMENT if flashinfer else 1


def mamba_cache_mode(enable_prefix_caching: bool) -> MambaCacheMode:
    """`align` when prefix caching is on, else `none` (model_executor/models/config.py:MambaModelConfig)."""
    return "align" if enable_prefix_caching else "none"


# ---------------------------------------------------------------------------------------------
# CUDA graphs
# ---------------------------------------------------------------------------------------------

# config/compilation.py: default max capture size min(max_num_seqs × decode_query_len × 2, 512),
# 1024 on the SM100 family; capped by max_num_batched_tokens.
MAX_CUDAGRAPH_CAPTURE_SIZE = 512
MAX_CUDAGRAPH_CAPTURE_SIZE_SM100 = 1024


def max_cudagraph_capture_size(
    max_num_seqs: int, max_num_batched_tokens: int, arch: str | None, *, decode_query_len: int = 1
) -> int:
    """Largest batch captured as a CUDA graph (config/vllm.py:_set_cudagraph_sizes)."""
    ceiling = MAX_CUDAGRAPH_CAPTURE_SIZE_SM100 if (arch or "").lower() == "blackwell" else MAX_CUDAGRAPH_CAPTURE_SIZE
    return max(1, min(max_num_seqs * decode_query_len * 2, ceiling, max_num_batched_tokens))


def cudagraph_capture_sizes(max_size: int) -> tuple[int, ...]:
    """vLLM's default capture list: 1, 2, 4, then every 8 to 255, then every 16 up to the max."""
    sizes = [s for s in (1, 2, 4) if s <= max_size]
    sizes += [s for s in range(8, 256, 8) if s <= max_size]
    sizes += list(range(256, max_size + 1, 16))
    if max_size not in sizes:
        sizes.append(max_size)
    return tuple(sorted(set(sizes)))


def cudagraph_count(max_num_seqs: int, max_num_batched_tokens: int, arch: str | None) -> tuple[int, int]:
    """(piecewise graphs, full graphs) captured in the default FULL_AND_PIECEWISE mode: piecewise for
    every capture size, full decode graphs for the sizes up to max_num_seqs."""
    sizes = cudagraph_capture_sizes(max_cudagraph_capture_size(max_num_seqs, max_num_batched_tokens, arch))
    return len(sizes), sum(1 for s in sizes if s <= max_num_seqs)


def requested_memory(cuda_total_bytes: int, gpu_memory_utilization: float) -> int:
    """`ceil(total × gpu_memory_utilization)` with the cudaMemGetInfo total (v1/worker/utils.py:request_memory)."""
    return math.ceil(cuda_total_bytes * gpu_memory_utilization)
