"""`vllm serve` settings: what the user gave (`ServeSettings`, nested as vLLM's VllmConfig in configs.py),
vLLM's argument checks, and the first stage of `fit`: every setting resolved to the value vLLM would use, nested
the same way, with where it came from (`ResolvedSettings`)."""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, NamedTuple, Protocol, cast

from kvplan.errors import InvalidParameter, NotServed
from kvplan.model.kv_cache import (
    KV_CACHE_DTYPES,
    resolve_kv_cache_dtype,
)
from kvplan.model.parallel import attention_free, has_recurrent_layers
from kvplan.vllm import defaults as vd
from kvplan.vllm.architectures import serving_refusal
from kvplan.vllm.backends import FLASHINFER_MLA_SPARSE_SM120, AttentionBackend, dsv4_backend, select_backend
from kvplan.vllm.backends import GpuLike as BackendGpu
from kvplan.vllm.configs import LoRAConfig, ParallelConfig
from kvplan.vllm.configs import ServeSettings as ServeSettings  # re-exported: the settings this module checks
from kvplan.vllm.defaults import BatchSettings, MambaCacheMode, VllmVersion
from kvplan.vllm.model_runner import ModelRunner, model_runner
from kvplan.vllm.multimodal import (
    MmLimits,
    encoder_budget_refusal,
    gemma4_item_tokens,
    tower_tp_refusal,
)
from kvplan.vllm.speculative import speculative_method

if TYPE_CHECKING:
    from kvplan.model.spec import ModelSpec
    from kvplan.vllm.rocm import RocmAiter

class GpuLike(BackendGpu, Protocol):
    """What planning needs from a GPU (kvplan.hardware.gpus.GpuSpec has it): a backend's name and arch, plus
    its id and memory totals."""

    @property
    def id(self) -> str: ...
    @property
    def cuda_total_bytes(self) -> int: ...
    @property
    def nvml_total_bytes(self) -> int: ...


def _validate_lora(lora: LoRAConfig) -> None:
    """config/lora.py: max_lora_rank is one of MaxLoRARanks; max_loras ≥ 1."""
    from kvplan.vllm.memory.lora import LORA_RANKS, MAX_LORAS

    if lora.max_lora_rank not in LORA_RANKS:
        raise InvalidParameter(f"--max-lora-rank must be one of {', '.join(map(str, LORA_RANKS))}, "
                               f"got {lora.max_lora_rank}")
    if not 1 <= lora.max_loras <= MAX_LORAS:
        raise InvalidParameter(f"--max-loras must be 1–{MAX_LORAS}, got {lora.max_loras}")


def _validate_parallel(model: ModelSpec, par: ParallelConfig) -> None:
    """vLLM's checks of decode context and data parallelism (config/parallel.py, config/vllm.py)."""
    dcp, pcp = par.decode_context_parallel_size, par.prefill_context_parallel_size
    for flag, value in (("--decode-context-parallel-size", dcp), ("--data-parallel-size", par.data_parallel_size),
                        ("--prefill-context-parallel-size", pcp)):
        if value < 1 or value > MAX_PARALLEL_SIZE:
            raise InvalidParameter(f"{flag} must be 1–{MAX_PARALLEL_SIZE}, got {value}")
    if pcp > 1:
        _validate_prefill_context_parallel(model, par.tensor_parallel_size, pcp, dcp)
        return
    if par.tensor_parallel_size % dcp:
        raise InvalidParameter(f"--tensor-parallel-size {par.tensor_parallel_size} must be divisible by "
                               f"--decode-context-parallel-size {dcp}",
                               hint="vLLM shards each request's KV over dcp ranks of the TP group")
    if dcp > 1 and model.mla is None and par.tensor_parallel_size <= model.num_kv_heads:
        raise InvalidParameter(f"--decode-context-parallel-size {dcp} needs --tensor-parallel-size above the "
                               f"{model.num_kv_heads} KV heads for a non-MLA model",
                               hint="DCP reuses the ranks that would otherwise replicate KV heads")


def _validate_prefill_context_parallel(model: ModelSpec, tp: int, pcp: int, dcp: int) -> None:
    """config/parallel.py: with PCP, DCP is 1, the PCP axis or the whole TP × PCP axis; only MLA attention
    implements PCP (v1/attention/backend.py: MLAAttentionImpl.supports_pcp; the others "PCP not supported")."""
    if dcp not in (1, pcp, tp * pcp):
        raise InvalidParameter("When PCP is enabled, DCP must be disabled, span the PCP axis, or span the full TP x "
                               f"PCP axis. Got TP={tp}, PCP={pcp}, DCP={dcp}; valid DCP sizes are "
                               f"{sorted({1, pcp, tp * pcp})}.")
    if model.mla is None:
        raise NotServed("No valid attention backend found for cuda with use_pcp=True: PCP not supported (only the "
                        "MLA attention backends implement prefill context parallelism)")


# Far above any real deployment (a GB300 NVL72 domain has 72 GPUs); bounds every count derived from them.
MAX_PARALLEL_SIZE = 1024


def validate_settings(model: ModelSpec, s: ServeSettings) -> None:
    """vLLM's own argument checks that kvplan can make without a GPU."""
    from kvplan.model.parallel import check_tensor_parallel

    par, cache, sched, mc = s.parallel_config, s.cache_config, s.scheduler_config, s.model_config
    if cache.gpu_memory_utilization is not None and not 0 < cache.gpu_memory_utilization <= 1:
        raise InvalidParameter(f"--gpu-memory-utilization must be in (0, 1], got {cache.gpu_memory_utilization}")
    check_tensor_parallel(model, par.tensor_parallel_size)
    if par.pipeline_parallel_size < 1 or par.pipeline_parallel_size > model.num_layers:
        raise InvalidParameter(f"--pipeline-parallel-size must be between 1 and {model.num_layers}, "
                               f"got {par.pipeline_parallel_size}")
    for flag, value in (
        ("--max-num-seqs", sched.max_num_seqs),
        ("--max-num-batched-tokens", sched.max_num_batched_tokens),
        ("--block-size", cache.block_size),
        ("--context", s.load.context),
        ("--concurrency", s.load.concurrency),
    ):
        if value is not None and value < 1:
            raise InvalidParameter(f"{flag} must be ≥ 1, got {value}")
    if mc.max_model_len is not None and mc.max_model_len != -1:
        if mc.max_model_len < 1:
            raise InvalidParameter(f"--max-model-len must be ≥ 1 (or -1/auto), got {mc.max_model_len}")
        if mc.max_model_len > model.max_model_len and not s.env.allow_long_max_model_len:
            raise InvalidParameter(
                f"User-specified max_model_len ({mc.max_model_len}) is greater than the derived max_model_len "
                f"({model.max_model_len}{', ' + model.max_model_len_source if model.max_model_len_source else ''})",
                hint="vLLM refuses this unless VLLM_ALLOW_LONG_MAX_MODEL_LEN=1 is set",
            )
    for flag, value in (
        ("--kv-cache-memory-bytes", cache.kv_cache_memory_bytes),
        ("--weights-memory", s.measured.weights_bytes),
        ("--activation-memory", s.measured.activation_bytes),
        ("--non-torch-memory", s.measured.non_torch_bytes),
        ("--cuda-graph-memory", s.measured.cuda_graph_bytes),
    ):
        if value is not None and value < 0:
            raise InvalidParameter(f"{flag} must be ≥ 0, got {value}")
    if cache.kv_cache_dtype not in KV_CACHE_DTYPES:
        raise InvalidParameter(f"--kv-cache-dtype {cache.kv_cache_dtype!r} is not one of {', '.join(KV_CACHE_DTYPES)}")
    if (
        sched.max_num_seqs is not None
        and sched.max_num_batched_tokens is not None
        and sched.max_num_batched_tokens < sched.max_num_seqs
    ):
        raise InvalidParameter(
            f"max_num_batched_tokens ({sched.max_num_batched_tokens}) must be greater than or equal to "
            f"max_num_seqs ({sched.max_num_seqs})",
            hint="vLLM's SchedulerConfig check",
        )


class ResolvedModelConfig(NamedTuple):
    """ModelConfig's values as vLLM resolves them (config/model.py)."""

    max_model_len: int
    auto_fit: bool  # --max-model-len -1: vLLM shrinks max_model_len to what fits


class ResolvedCacheConfig(NamedTuple):
    """CacheConfig's values as vLLM resolves them (config/cache.py, the backend's block size)."""

    gpu_memory_utilization: float
    kv_cache_dtype: str
    kv_cache_dtype_flag: str  # --kv-cache-dtype after vLLM's per-model update (what the KV specs are built from)
    block_size: int  # before hybrid alignment
    block_size_source: str
    mamba_cache_mode: MambaCacheMode
    mamba_checkpoint_alignment: int
    mamba_prefill_checkpoint_blocks: int


class ResolvedSchedulerConfig(NamedTuple):
    """SchedulerConfig's values as vLLM resolves them (config/scheduler.py, engine/arg_utils.py's defaults)."""

    batch: BatchSettings  # max_num_seqs, max_num_batched_tokens, each with its source
    in_flight_tokens: int
    # what sliding-window and chunked-local caches reserve past their window: the tokens in flight since vLLM 0.26,
    # max_num_batched_tokens before (vd.WINDOW_RESERVES_IN_FLIGHT_SINCE)
    window_tokens: int
    async_scheduling: bool
    disable_hybrid_kv_cache_manager: bool


@dataclass(frozen=True)
class ResolvedSettings:
    """Every setting `fit` needs, as vLLM resolves it for this model and GPU, nested as ServeSettings is
    (model_config, cache_config, scheduler_config), with the vLLM release, the attention backend and the model
    runner; `sources` says where each user-visible value came from (a flag, a default of this vLLM version, the
    model config), keyed by vLLM's name (`block_size`'s is cache_config.block_size_source)."""

    version: VllmVersion
    model_config: ResolvedModelConfig
    cache_config: ResolvedCacheConfig
    scheduler_config: ResolvedSchedulerConfig
    backend: AttentionBackend
    model_runner: ModelRunner
    sources: Mapping[str, str]


def _max_model_len(model: ModelSpec, s: ServeSettings) -> tuple[int, str]:
    if s.model_config.max_model_len is None:
        return model.max_model_len, f"model config ({model.max_model_len_source or 'derived'})"
    if s.model_config.max_model_len == -1:
        return model.max_model_len, "auto-fit"
    return s.model_config.max_model_len, "--max-model-len"


def _block_size(s: ServeSettings, backend: AttentionBackend) -> tuple[int, str]:
    """--block-size, else the attention backend's preference (Platform.update_block_size_for_backend)."""
    if s.cache_config.block_size is not None:
        return s.cache_config.block_size, "--block-size"
    if backend.block_size != vd.DEFAULT_BLOCK_SIZE:
        return backend.block_size, f"{backend.name} backend"
    return backend.block_size, f"vLLM default; the {backend.name} backend keeps it"


def _mamba_alignment(model: ModelSpec, arch: str | None, mode: MambaCacheMode) -> tuple[int, int]:
    """(checkpoint alignment, prefill-checkpoint blocks) of the recurrent layers in align mode."""
    if mode != "align":
        return 1, 0
    states = [layer.state for layer in model.layers if layer.state is not None]
    variants = {state.variant for state in states}
    head_k = max((state.head_k_dim for state in states if state.variant == "gdn"), default=0)
    alignment = vd.gdn_checkpoint_alignment(arch, head_k) if "gdn" in variants else 1
    blocks = max((vd.prefill_checkpoint_blocks(v, arch, head_k) for v in variants), default=0)
    return alignment, blocks


# quantization/utils/gptq_utils.py:normalize_and_validate_gptq_desc_act (read in vLLM 0.33; the release that
# first refused it is not pinned here, so older versions are not refused).
GPTQ_ACT_ORDER_REFUSED_SINCE = vd.VllmVersion(0, 33)
GPTQ_ACT_ORDER_MESSAGE = ("GPTQ group activation ordering (desc_act=True) is no longer supported. Use a checkpoint "
                          "with static activation ordering or desc_act=False.")


def check_model_served(model: ModelSpec, version: VllmVersion, *, allow_custom_code: bool = False) -> None:
    """vLLM's checks on the model itself, before any flag: the architecture is in its registry
    (architectures.py), and the checkpoint's quantization is one it still loads."""
    reason = serving_refusal(model, version, allow_custom_code=allow_custom_code)
    if reason is not None:
        raise NotServed(reason)
    if model.quant is not None and model.quant.act_order and version >= GPTQ_ACT_ORDER_REFUSED_SINCE:
        raise NotServed(GPTQ_ACT_ORDER_MESSAGE, hint=f"vLLM {version}; older releases served it")


def mm_limits(s: ServeSettings) -> MmLimits:
    """The multimodal limits the settings give (vLLM's defaults when none)."""
    mm = s.multimodal_config
    return MmLimits(mm.limit_mm_per_prompt, mm.language_model_only, mm.enable_mm_embeds, mm.mm_encoder_tp_mode)


def _mm_prefix_batch_floor(model: ModelSpec, batch: BatchSettings, limits: MmLimits, *,
                           user_set: bool) -> BatchSettings:
    """A multimodal prefix LM prefills an item atomically, so vLLM raises the default max_num_batched_tokens to
    the largest item of any *supported* modality, whatever its limit (engine/arg_utils.py:
    _set_default_max_num_seqs_and_batched_tokens_args, _get_min_mm_batched_tokens); a text-only model (every
    limit 0) is no prefix LM. Only Gemma-4 states that bound without running its processor; other models keep
    the default."""
    if user_set or not model.mm_prefix_lm or not model.facts.mm_item_tokens_stated:
        return batch
    tokens = gemma4_item_tokens(model, limits)
    modality = max(tokens, key=tokens.__getitem__)
    if batch.max_num_batched_tokens >= tokens[modality]:
        return batch
    return replace(batch, max_num_batched_tokens=tokens[modality],
                   mnbt_source=f"raised to {tokens[modality]:,} to accommodate '{modality}' input (prefix-LM)")


def _model_kv_cache_dtype(model: ModelSpec, gpu: GpuLike, flag: str) -> str:
    """--kv-cache-dtype as vLLM's per-model config hooks leave it: GLM-5 (GlmMoeDsaForCausalLM) on SM10x turns
    `auto` into fp8_e4m3 (model_executor/models/config.py:GlmMoeDsaForCausalLM.verify_and_update_config; its
    family's blackwell_auto_kv_cache_dtype)."""
    if flag == "auto" and model.family.blackwell_auto_kv_cache_dtype and (gpu.arch or "") == "blackwell":
        return model.family.blackwell_auto_kv_cache_dtype
    return flag


def _connector_turns_hma_off(s: ServeSettings) -> bool:
    """A KV connector without SupportsHMA turns the hybrid manager off (vllm/kv_connectors.py)."""
    if s.kv_transfer_config is None:
        return False
    from kvplan.vllm.kv_connectors import connector_supports_hma

    return connector_supports_hma(s.kv_transfer_config) is False


def _runner_and_async(model: ModelSpec, s: ServeSettings, version: VllmVersion, method: str | None,
                      mode: MambaCacheMode) -> tuple[ModelRunner, bool, str, str]:
    """The model runner vLLM builds and whether async scheduling is on, each with why (vllm/model_runner.py,
    defaults.async_scheduling_default)."""
    par, sched = s.parallel_config, s.scheduler_config
    runner = model_runner(model, version, quantized=model.quant is not None, speculative_method=method,
                          pp=par.pipeline_parallel_size, pcp=par.prefill_context_parallel_size,
                          env=s.env.use_v2_model_runner)
    if sched.async_scheduling is not None:
        return runner, sched.async_scheduling, runner.reason, (
            "--async-scheduling" if sched.async_scheduling else "--no-async-scheduling")
    # vLLM sets a Mamba cache mode only for models with Mamba layers (models/config.py)
    async_on, why = vd.async_scheduling_default(version, speculative_method=method,
                                                mamba_cache_mode=mode if has_recurrent_layers(model) else "none")
    return runner, async_on, runner.reason, why


def gpu_platform(gpu: object) -> str:
    """The vLLM platform that plans this GPU (GpuSpec.platform: cuda | rocm); cuda for GPUs that state none."""
    return str(getattr(gpu, "platform", "cuda"))


def rocm_aiter(s: ServeSettings) -> RocmAiter:
    """The aiter packages and switches these settings describe (ROCm GPUs only)."""
    from kvplan.vllm.rocm import RocmAiter

    env = s.env
    return RocmAiter(installed=env.rocm_aiter_installed, use_aiter=env.rocm_use_aiter, use_mha=env.rocm_use_aiter_mha,
                     use_mla=env.rocm_use_aiter_mla)


def _refuse_multimodal(model: ModelSpec, limits: MmLimits, max_num_batched_tokens: int, tp: int) -> None:
    """vLLM's multimodal refusals: the encoder budget (compute_mm_encoder_budget) and a tower whose attention
    heads do not split over the TP ranks (kvplan/vllm/multimodal.py)."""
    refusal = encoder_budget_refusal(model, limits, max_num_batched_tokens)
    if refusal is not None:
        raise InvalidParameter(refusal, hint="vLLM's encoder budget (compute_mm_encoder_budget); or limit that "
                                             "modality with --limit-mm-per-prompt")
    tower_refusal = tower_tp_refusal(model, limits, tp)
    if tower_refusal is not None:
        raise NotServed(tower_refusal, hint="the vision tower's attention heads must split over the TP ranks: "
                                            "pick a TP size that divides them")


def _dsv4_backend(gpu: GpuLike, kv_flag: str, version: VllmVersion) -> AttentionBackend:
    """DeepSeek-V4's backend: CUDA's (backends.py:dsv4_backend), or on ROCm the same FlashMLA caches under
    ROCm's backend name (kvplan/vllm/rocm.py:rocm_dsv4_backend)."""
    if gpu_platform(gpu) == "rocm":
        from kvplan.vllm.rocm import rocm_dsv4_backend

        return rocm_dsv4_backend(kv_flag)
    return dsv4_backend(gpu, kv_flag, version)


def _rocm_backend(model: ModelSpec, gpu: GpuLike, kv_dtype: str, s: ServeSettings) -> AttentionBackend:
    """vLLM's RocmPlatform choice (kvplan/vllm/rocm.py) for a GPU whose catalog platform is rocm."""
    from kvplan.vllm.rocm import RocmGpu, rocm_backend

    return rocm_backend(model, cast("RocmGpu", gpu), kv_dtype, rocm_aiter(s),
                        kv_connector=s.kv_transfer_config is not None)


def resolve_settings(model: ModelSpec, gpu: GpuLike, s: ServeSettings) -> ResolvedSettings:
    """Stage 1 of `fit`: check the settings as vLLM does, then resolve each to vLLM's value."""
    par, cache, sched, mc = s.parallel_config, s.cache_config, s.scheduler_config, s.model_config
    version = vd.parse_vllm_version(s.vllm_version or vd.LATEST_VLLM_VERSION)
    check_model_served(model, version, allow_custom_code=mc.trust_remote_code)
    validate_settings(model, s)
    _validate_parallel(model, par)
    _validate_lora(s.lora_config)
    if s.performance_mode != "balanced" and version < vd.PERFORMANCE_MODE_SINCE:
        raise InvalidParameter(f"--performance-mode: vLLM {version} has no such flag (it appears in "
                               f"{vd.PERFORMANCE_MODE_SINCE})", hint="set --max-num-seqs / --max-num-batched-tokens")
    max_len, len_source = _max_model_len(model, s)
    util = (cache.gpu_memory_utilization if cache.gpu_memory_utilization is not None
            else vd.default_gpu_memory_utilization(version))
    batch = vd.resolve_batch_settings(
        vd.batch_defaults(gpu.nvml_total_bytes, gpu.name, s.usage, version),
        max_model_len=max_len,
        max_num_seqs=sched.max_num_seqs,
        max_num_batched_tokens=sched.max_num_batched_tokens,
        performance_mode=s.performance_mode,
    )
    limits = mm_limits(s)
    batch = _mm_prefix_batch_floor(model, batch, limits, user_set=sched.max_num_batched_tokens is not None)
    _refuse_multimodal(model, limits, batch.max_num_batched_tokens, par.tensor_parallel_size)
    kv_flag = _model_kv_cache_dtype(model, gpu, cache.kv_cache_dtype)
    if model.dsv4 is not None:
        backend = _dsv4_backend(gpu, kv_flag, version)
        kv_flag = "fp8_ds_mla"  # attention.py:_resolve_dsv4_kv_cache_dtype: auto and every fp8 flag
        kv_dtype = resolve_kv_cache_dtype(model, kv_flag)
    else:
        kv_dtype = resolve_kv_cache_dtype(model, kv_flag)
        backend = (_rocm_backend(model, gpu, kv_dtype, s) if gpu_platform(gpu) == "rocm"
                   else select_backend(model, gpu, kv_dtype, checkpoint_kv=cache.kv_cache_dtype == "auto"))
    if backend == FLASHINFER_MLA_SPARSE_SM120 and kv_flag != "fp8_ds_mla":
        # mla_attention.py:_canonicalize_sparse_mla_kv_cache_dtype: the SM120 kernel reads fp8_ds_mla only
        kv_flag = "fp8_ds_mla"
        kv_dtype = resolve_kv_cache_dtype(model, kv_flag)
    block_size, bs_source = _block_size(s, backend)
    # vLLM disables prefix caching for attention-free models (Mamba, Falcon-Mamba): one state per request.
    mode = vd.mamba_cache_mode(cache.enable_prefix_caching and not attention_free(model))
    alignment, checkpoint_blocks = _mamba_alignment(model, gpu.arch, mode)
    has_chunked = any(layer.kind == "chunked_local" for layer in model.layers)
    method = speculative_method(s.speculative_config) if s.speculative_config else None
    hma_off = (sched.disable_hybrid_kv_cache_manager if sched.disable_hybrid_kv_cache_manager is not None
               else vd.hybrid_manager_disabled_by_default(has_chunked, version, speculative_method=method)
               or _connector_turns_hma_off(s))
    kv_source = ("--kv-cache-dtype" if cache.kv_cache_dtype != "auto" else
                 f"auto: vLLM's default for {model.architectures[0]} on {gpu.arch}" if kv_flag != "auto"
                 else ("auto: checkpoint's KV scheme" if model.quant and model.quant.kv_cache_dtype
                       else "auto: model dtype"))
    sources = {
        "max_model_len": len_source,
        "gpu_memory_utilization": ("--gpu-memory-utilization" if cache.gpu_memory_utilization is not None
                                   else f"default for vLLM {version}"),
        "max_num_batched_tokens": batch.mnbt_source,
        "max_num_seqs": batch.seqs_source,
        "kv_cache_dtype": kv_source,
    }
    runner, async_on, sources["model_runner"], sources["async_scheduling"] = _runner_and_async(
        model, s, version, method, mode)
    in_flight = vd.max_in_flight_tokens(batch.max_num_batched_tokens, par.pipeline_parallel_size,
                                        async_scheduling=async_on, model_runner_v2=runner.v2)
    return ResolvedSettings(
        version=version,
        model_config=ResolvedModelConfig(max_model_len=max_len, auto_fit=mc.max_model_len == -1),
        cache_config=ResolvedCacheConfig(
            gpu_memory_utilization=util, kv_cache_dtype=kv_dtype, kv_cache_dtype_flag=kv_flag, block_size=block_size,
            block_size_source=bs_source, mamba_cache_mode=mode, mamba_checkpoint_alignment=alignment,
            mamba_prefill_checkpoint_blocks=checkpoint_blocks),
        scheduler_config=ResolvedSchedulerConfig(
            batch=batch, in_flight_tokens=in_flight,
            window_tokens=in_flight if version >= vd.WINDOW_RESERVES_IN_FLIGHT_SINCE else batch.max_num_batched_tokens,
            async_scheduling=async_on, disable_hybrid_kv_cache_manager=hma_off),
        backend=backend, model_runner=runner, sources=sources,
    )
