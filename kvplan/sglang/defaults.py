"""The server-argument defaults SGLang 0.5.23 resolves for a deployment (paths relative to `sglang/srt/`).

Order as `arg_groups/pipeline.py:run_resolution_pipeline` runs them: the GPU-memory tier
(`arg_groups/memory_hook.py:handle_gpu_memory_settings`) sets `chunked_prefill_size` and the decode
CUDA-graph `max_bs`, then `mem_fraction_static` from them; later `arg_groups/attention_hook.py` scales the
fraction by 0.85 for `aiter` with a context over 8192, and `arg_groups/parallel_hook.py:
handle_data_parallelism` divides the chunk by the attention-DP size (after the fraction was computed).
Pure: numbers in, numbers out.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from kvplan.errors import InvalidParameter
from kvplan.sglang import dsv4
from kvplan.sglang.speculative import default_backend_allows, sm100_trtllm_allowed

Platform = Literal["cuda", "hip"]

# arg_groups/fields/schedule.py: max_prefill_tokens default.
MAX_PREFILL_TOKENS_DEFAULT = 16384
# memory_hook.py:handle_gpu_memory_settings: the fraction when the GPU's memory is unknown.
UNKNOWN_GPU_FRACTION = 0.95
# attention_hook.py:handle_attention_backend_compatibility: aiter with context_len > 8192.
AITER_LONG_CONTEXT = 8192
AITER_FRACTION_SCALE = 0.85


@dataclass(frozen=True)
class GpuTier:
    """One row of handle_gpu_memory_settings' capacity table (`gpu_mem` in MiB, below `below_mib`)."""

    below_mib: float
    chunked_prefill_size: int
    max_bs_small_tp: int  # tp < 4
    max_bs_large_tp: int  # tp >= 4


# memory_hook.py:handle_gpu_memory_settings, in its order (comments there: T4/4080; A10/4090/5090;
# A100-40/L40; H100/A100-80; H20/H200; B200/MI300).
GPU_TIERS: tuple[GpuTier, ...] = (
    GpuTier(20 * 1024, 2048, 8, 8),
    GpuTier(35 * 1024, 4096, 48, 160),
    GpuTier(60 * 1024, 4096, 32, 160),
    GpuTier(90 * 1024, 8192, 256, 512),
    GpuTier(160 * 1024, 8192, 256, 512),
    GpuTier(float("inf"), 16384, 512, 512),
)
UNKNOWN_TIER = GpuTier(float("inf"), 4096, 160, 160)  # gpu_mem None


def gpu_tier(gpu_mem_mib: int | None) -> GpuTier:
    """The capacity row for a GPU of `gpu_mem_mib` MiB (nvidia-smi memory.total / rocminfo; None: unknown)."""
    if gpu_mem_mib is None:
        return UNKNOWN_TIER
    return next(t for t in GPU_TIERS if gpu_mem_mib < t.below_mib)


def decode_graph_batch_sizes(max_bs: int, *, speculative: bool = False) -> list[int]:
    """arg_groups/cuda_graph_hook.py:generate_decode_cuda_graph_batch_sizes (no --disable-cuda-graph-padding)."""
    if speculative:
        sizes = (list(range(1, 9)) + list(range(10, 33, 2)) + list(range(40, 65, 4)) + list(range(72, 257, 8))
                 + list(range(272, max_bs + 1, 16)))
    else:
        sizes = [1, 2, 4, 8, 12] + list(range(16, 257, 8)) + list(range(272, 512, 16)) + list(
            range(512, max_bs + 1, 32))
    sizes = [s for s in sizes if s <= max_bs]
    if max_bs not in sizes:
        sizes.append(max_bs)
    return sizes


def prefill_graph_batch_sizes(max_tokens: int) -> list[int]:
    """arg_groups/cuda_graph_hook.py:generate_prefill_cuda_graph_batch_sizes (token buckets)."""
    sizes = (list(range(4, 33, 4)) + list(range(48, 257, 16)) + list(range(288, 513, 32))
             + list(range(576, 1025, 64)) + list(range(1280, 4097, 256)) + list(range(4608, max_tokens + 1, 512)))
    return [s for s in sizes if s <= max_tokens]


@dataclass(frozen=True)
class SglangDeployment:
    """A deployment as SGLang's flags give it (None: SGLang's default)."""

    tp: int = 1
    pp: int = 1
    dp: int = 1  # --dp-size: replicas, or attention-DP groups with --enable-dp-attention
    enable_dp_attention: bool = False
    ep: int = 1
    mem_fraction_static: float | None = None
    chunked_prefill_size: int | None = None
    max_prefill_tokens: int = MAX_PREFILL_TOKENS_DEFAULT
    max_running_requests: int | None = None
    max_total_tokens: int | None = None
    page_size: int | None = None
    kv_cache_dtype: str = "auto"
    context_length: int | None = None
    attention_backend: str | None = None
    cuda_graph_max_bs: int | None = None
    disable_cuda_graph: bool = False
    speculative_algorithm: str | None = None
    speculative_num_steps: int | None = None
    speculative_eagle_topk: int | None = None
    speculative_num_draft_tokens: int | None = None
    speculative_draft_model_path: str | None = None
    trust_remote_code: bool = False
    swa_full_tokens_ratio: float | None = None  # None: arg_groups/fields/schedule.py's 0.8
    mamba_full_memory_ratio: float | None = None  # None: arg_groups/fields/schedule.py's 0.9
    # SGLANG_USE_AITER (environ.py EnvBool; a pasted line's leading SGLANG_USE_AITER=1): on ROCm it turns aiter's
    # preshuffle paged-MQA path on, so DSA pages by 64 × index_kpool (dsa.page_size)
    use_aiter: bool = False
    disable_hybrid_swa_memory: bool = False  # one pool for a sliding-window hybrid (pool.geometry)
    max_mamba_cache_size: int | None = None  # None: sized from mamba_full_memory_ratio (_handle_max_mamba_cache)
    mamba_ssm_dtype: str | None = None  # float32 / bfloat16 / float16; None: the config's, else float32
    # --json-model-override-args as compact JSON text (None: SGLang's "{}"); applied where the model's config is
    # read (sglang/model_override.py), before any of these rules see the model
    json_model_override_args: str | None = None

    @property
    def attn_dp_size(self) -> int:
        """Attention-DP groups (arg_groups/parallel_hook.py:handle_deprecated_dp_attention: --dp N
        --enable-dp-attention becomes attn_dp_size N, dp_size 1)."""
        return self.dp if self.enable_dp_attention else 1

    @property
    def replicas(self) -> int:
        """Independent copies of the model (--dp-size without attention DP)."""
        return 1 if self.enable_dp_attention else self.dp

    @property
    def attn_tp_size(self) -> int:
        """runtime_context.py:derive_attn_tp_size: tp / attn_dp (attn_cp 1)."""
        return self.tp // self.attn_dp_size


# arg_groups/choices.py:ATTENTION_BACKEND_CHOICES, the argparse choices of --attention-backend
# (arg_groups/fields/exec_.py), in SGLang's order.
ATTENTION_BACKEND_CHOICES = (
    "triton", "torch_native", "flex_attention", "dsa", "nsa", "qsa", "dsv4", "compressed", "fa3", "fa4",
    "flashinfer", "llada2_cfg_flashinfer", "flashmla", "trtllm_mla", "cutedsl_mla", "tokenspeed_mla", "trtllm_mha",
    "hpc_ops", "minicpm_flashattn", "minicpm_flashinfer", "aiter", "wave", "intel_amx", "ascend", "intel_xpu",
)
# arg_groups/fields/exec_.py: --mamba-ssm-dtype's argparse choices, in SGLang's order.
MAMBA_SSM_DTYPES = ("float32", "bfloat16", "float16")
# arg_groups/serving_hook.py:_handle_deprecated_args: deprecated spellings SGLang renames (with a warning).
ATTENTION_BACKEND_ALIASES = {"compressed": "dsv4", "tokenspeed_mla": "cutedsl_mla"}


def check_attention_backend(value: str | None) -> None:
    """Refuse an --attention-backend outside SGLang's choices, in argparse's words (Python 3.11, the wheel's)."""
    if value is not None and value not in ATTENTION_BACKEND_CHOICES:
        raise InvalidParameter(f"argument --attention-backend: invalid choice: {value!r} (choose from "
                               f"{', '.join(map(repr, ATTENTION_BACKEND_CHOICES))})")


def check_deployment(dep: SglangDeployment) -> None:
    """Refuse what SGLang refuses about the parallel layout (arg_groups/parallel_hook.py), in its words."""
    check_attention_backend(dep.attention_backend)
    for name, value in (("--tp-size", dep.tp), ("--pp-size", dep.pp), ("--dp-size", dep.dp), ("--ep-size", dep.ep)):
        if value < 1:
            raise InvalidParameter(f"{name} must be ≥ 1, got {value}")
    if dep.enable_dp_attention and dep.tp % dep.dp:
        raise InvalidParameter(f"--tp-size {dep.tp} is not divisible by the attention-DP size {dep.dp}",
                               hint="SGLang needs tp_size % attn_dp_size == 0 (attention TP = tp / dp)")
    if dep.mem_fraction_static is not None and not 0 < dep.mem_fraction_static < 1:
        raise InvalidParameter(f"--mem-fraction-static must be in (0, 1), got {dep.mem_fraction_static}")
    if dep.swa_full_tokens_ratio is not None and not 0 < dep.swa_full_tokens_ratio <= 1.0:
        raise InvalidParameter("--swa-full-tokens-ratio should be in range (0, 1.0].",
                               hint="SGLang's words (arg_groups/kv_cache_hook.py:_handle_cache_compatibility)")
    if dep.mamba_full_memory_ratio is not None and not dep.mamba_full_memory_ratio > 0:
        raise InvalidParameter(f"--mamba-full-memory-ratio must be > 0, got {dep.mamba_full_memory_ratio}")
    if dep.mamba_ssm_dtype is not None and dep.mamba_ssm_dtype not in MAMBA_SSM_DTYPES:
        raise InvalidParameter(f"argument --mamba-ssm-dtype: invalid choice: {dep.mamba_ssm_dtype!r} (choose from "
                               f"{', '.join(map(repr, MAMBA_SSM_DTYPES))})")
    if dep.max_mamba_cache_size is not None and dep.max_mamba_cache_size < 0:
        raise InvalidParameter(f"--max-mamba-cache-size must be ≥ 0, got {dep.max_mamba_cache_size}")
    if dep.page_size is not None and dep.page_size < 1:
        raise InvalidParameter(f"--page-size must be ≥ 1, got {dep.page_size}")
    # SGLang itself divides by a zero context_length and clamps a request cap below 1 to 1
    # (kv_cache_configurator.py:resolve_max_num_reqs); kvplan refuses these as bad input instead.
    for name, given in (("--context-length", dep.context_length), ("--max-total-tokens", dep.max_total_tokens),
                        ("--max-running-requests", dep.max_running_requests)):
        if given is not None and given < 1:
            raise InvalidParameter(f"{name} must be ≥ 1, got {given}")


@dataclass(frozen=True)
class ServerDefaults:
    """What ServerArgs.resolve_once() makes of a deployment (the fields the KV plan depends on)."""

    gpu_memory_mib: int | None
    platform: str
    mem_fraction_static: float
    mem_fraction_source: str  # "given" or the rule that computed it
    reserved_mib: float | None  # handle_gpu_memory_settings' reserved_mem (None: fraction given)
    chunked_prefill_size: int  # after the attention-DP division
    max_prefill_tokens: int
    decode_graph_max_bs: int
    decode_graph_sizes: int
    prefill_graph: str  # "breakable" or "disabled"
    prefill_graph_max_bs: int
    prefill_graph_sizes: int
    attention_backend: str
    page_size: int
    attn_dp_size: int
    attn_tp_size: int
    schedule_conservativeness: float


@dataclass(frozen=True)
class SglangGpu:
    """The GPU as SGLang's server-argument resolution sees it: its platform, SM major (None off CUDA) and the
    memory it reads for the tiers (MiB; None: unknown). Read by sglang/fit.py:sglang_gpu."""

    platform: Platform
    sm_major: int | None
    memory_mib: int | None


@dataclass(frozen=True)
class ModelTraits:
    """What SGLang's server-argument resolution reads of the model (ServerArgs.resolve_once runs before the model
    class is built). Read from a ModelSpec by sglang/fit.py:model_traits."""

    use_mla: bool = False
    kv_heads: int = 1  # all KV heads (MLA configs: the attention heads), before TP
    architecture: str = ""
    llama2_path: bool = False  # "For Llama2 series models, max_bs is limited to 4096."
    has_mamba: bool = False
    prefill_graph_allowed: bool = True  # the breakable prefill graph survives the multimodal allowlist
    vlm_factor: float | None = None  # memory_hook.py:adjust_mem_fraction_for_vlm's factor
    asymmetric_kv: bool = False  # K and V heads of different widths
    attention_sinks: bool = False
    dsa_page_size: int | None = None  # DeepSeek sparse attention's fixed page (None: not DSA)
    deepseek_v4: bool = False  # DeepseekV4ForCausalLM: its own pools (kvplan.sglang.dsv4)


def default_attention_backend(model: ModelTraits, gpu: SglangGpu, tp: int, *, spec_topk_one: bool = True,
                              sm100_spec_ok: bool = True) -> str:
    """arg_groups/model_override_base.py:get_default_attn_backend (CUDA ≥ 12.3). With speculative decoding, MHA
    needs is_no_spec_infer_or_topk_one (`spec_topk_one`) for fa3 on Hopper, and that with a given top-k
    (`sm100_spec_ok`: kvplan.sglang.speculative.sm100_trtllm_allowed) for trtllm_mha on SM100."""
    platform = gpu.platform
    hopper, sm100 = platform == "cuda" and gpu.sm_major == 9, platform == "cuda" and gpu.sm_major == 10
    if not model.use_mla:
        if hopper and spec_topk_one:
            return "fa3"
        if sm100 and sm100_spec_ok:
            return "fa4" if model.asymmetric_kv else "trtllm_mha"
        if platform == "hip":
            return "aiter"
        return "triton" if model.attention_sinks else "flashinfer"
    if hopper:
        return "fa3"
    if sm100:
        return "flashinfer"
    if platform == "hip":
        # get_num_kv_heads(tp_size): MLA configs give their attention heads as KV heads.
        heads = max(1, model.kv_heads // tp)
        return "aiter" if heads in (16, 128) else "triton"
    return "triton"


# arg_groups/model_overrides/deepseek_v2.py:_deepseek_family_overrides registers these; without DSA, on SM100
# it sets attention_backend trtllm_mla when no backend is given.
DEEPSEEK_FAMILY = frozenset({
    "DeepseekV3ForCausalLM", "DeepseekV32ForCausalLM", "KimiK25ForConditionalGeneration", "MistralLarge3ForCausalLM",
    "PixtralForConditionalGeneration", "GlmMoeDsaForCausalLM", "Glm5NextForConditionalGeneration", "HYV4ForCausalLM",
    "HYV4ForCausalLMNextN", "LongcatFlashForCausalLM", "LongcatFlashForCausalLMNextN", "Dots3NoteForCausalLM",
})


# arg_groups/model_overrides/qwen3_5.py:_qwen3_5_hybrid_overrides registers these: on SM100 with no backend given
# it sets triton and page 1 (trtllm_mha only once the extra-buffer strategy, spec decoding or no radix cache is
# declared; the strategy is still `auto` when the override runs).
GDN_HYBRID_FAMILY = frozenset({
    "Qwen3NextForCausalLM", "Qwen3_5MoeForConditionalGeneration", "InternS2PreviewForConditionalGeneration",
    "InternS2MobiusForConditionalGeneration", "Qwen3_5ForConditionalGeneration",
})
# model_overrides/lfm2.py:_lfm2_overrides and granitemoehybrid.py:_granite_moe_hybrid_overrides (with a mamba
# layer): flashinfer on SM100 when no backend is given.
SM100_FLASHINFER_HYBRIDS = frozenset({"Lfm2ForCausalLM", "Lfm2MoeForCausalLM", "GraniteMoeHybridForCausalLM"})


GEMMA4_FAMILY = frozenset({"Gemma4ForConditionalGeneration", "Gemma4ForCausalLM",
                           "Gemma4UnifiedForConditionalGeneration"})


# model_overrides/nemotron_h.py:_nemotron_h_overrides registers these: with speculative decoding on SM100 and a
# top-k of None or 1 it sets trtllm_mha (page 64 unless given), a larger top-k triton; without, trtllm_mha on SM100.
NEMOTRON_H_FAMILY = frozenset({"NemotronHForCausalLM", "NemotronHPuzzleForCausalLM", "NemotronH_Omni_Reasoning_V3"})


def model_attention_backend(architecture: str, *, platform: Platform, sm_major: int | None,
                            has_mamba: bool = False, speculative: bool = False,
                            spec_topk: int | None = None) -> str | None:
    """A model override's backend when none is given (None: get_default_attn_backend decides)."""
    if architecture in NEMOTRON_H_FAMILY and speculative and platform == "cuda" and sm_major == 10:
        return "trtllm_mha" if spec_topk in (None, 1) else "triton"
    if architecture == "GptOssForCausalLM":  # model_overrides/gpt_oss.py:_gpt_oss_overrides, whatever the draft
        if platform == "hip":
            return "aiter"
        return {10: "trtllm_mha", 9: "fa3"}.get(sm_major or 0, "triton") if platform == "cuda" else "triton"
    if architecture in DEEPSEEK_FAMILY and platform == "cuda" and sm_major == 10:
        return "trtllm_mla"  # model_overrides/deepseek_v2.py:_deepseek_family_overrides (DeepSeek V3/R1/V3.1)
    if architecture in GDN_HYBRID_FAMILY and platform == "cuda" and sm_major == 10:
        return "triton"
    if architecture in SM100_FLASHINFER_HYBRIDS and has_mamba and platform == "cuda" and sm_major == 10:
        return "flashinfer"
    if architecture in GEMMA4_FAMILY:  # model_overrides/gemma4.py:_gemma4_overrides: trtllm_mha on SM100, else triton
        return "trtllm_mha" if platform == "cuda" and sm_major == 10 else "triton"
    if architecture == "Olmo2ForCausalLM":  # model_overrides/olmo2.py:_olmo2_overrides
        if platform == "cuda" and sm_major == 10:
            return "trtllm_mha"
        return "fa3" if platform == "cuda" and (sm_major or 0) >= 8 else "triton"
    return None


def default_page_size(backend: str, given: int | None, *, sm100_mha: bool = False) -> int:
    """arg_groups/overrides.py:_page_size_default (1 on CUDA and HIP) and the backend constraints of
    arg_groups/attention_hook.py: trtllm_mha keeps 16/32/64/128, else 64 (_trtllm_mha_page_constraint);
    trtllm_mla keeps 32/64, else 64 (overrides.py:_mla_backend_page_constraints); fa4 for a non-MLA model on
    SM100 is 128 (overrides.py:_fa4_page_constraint)."""
    if backend == "fa4" and sm100_mha:
        return 128
    if backend == "trtllm_mha":
        return given if given in (16, 32, 64, 128) else 64
    if backend == "trtllm_mla":
        return given if given in (32, 64) else 64
    return 1 if given is None else given


def reserve_for_graph_mb(*, decode_graphs: bool, decode_max_bs: int, attn_dp_size: int, prefill_graphs: bool,
                         prefill_sizes: int, use_mla: bool) -> float:
    """arg_groups/memory_hook.py:reserve_for_graph_mb (not PD-disaggregated, no DeepEP)."""
    reserved = 0.0
    if decode_graphs:
        reserved += decode_max_bs * 2
    if attn_dp_size > 1:
        reserved += decode_max_bs * attn_dp_size * 3
        if decode_max_bs > 300:
            reserved += decode_max_bs * attn_dp_size * 1.5
    if prefill_graphs:
        reserved += 1.5 * 1024 if use_mla else prefill_sizes * 8
    return reserved


def mem_fraction_from_reserve(gpu_mem_mib: int | None, *, chunk: int, tp: int, pp: int,
                              graph_mb: float) -> tuple[float, float | None]:
    """handle_gpu_memory_settings' mem_fraction_static and reserved_mem (MiB) when the flag is not given:
    512 + 1.5 × max(chunk, 2048) + tp·pp/8 × 1024 + graphs, at least 10240 on a GPU over 60 GiB."""
    if gpu_mem_mib is None:
        return UNKNOWN_GPU_FRACTION, None
    reserved = 512 + max(chunk, 2048) * 1.5 + tp * pp / 8 * 1024 + graph_mb
    if gpu_mem_mib > 60 * 1024:
        reserved = max(reserved, 10 * 1024)
    return round((gpu_mem_mib - reserved) / gpu_mem_mib, 3), reserved


def resolve_defaults(dep: SglangDeployment, gpu: SglangGpu, model: ModelTraits, context_len: int) -> ServerDefaults:
    """The resolved server arguments of one deployment (see the module docstring for the order)."""
    platform, sm_major, gpu_mem_mib = gpu.platform, gpu.sm_major, gpu.memory_mib
    use_mla, architecture, vlm_factor, dsa_page_size = (model.use_mla, model.architecture, model.vlm_factor,
                                                        model.dsa_page_size)
    deepseek_v4 = model.deepseek_v4  # model_overrides/deepseek_v4.py: backend dsv4 and page 256 whatever is given
    tier = gpu_tier(gpu_mem_mib)
    chunk = dep.chunked_prefill_size if dep.chunked_prefill_size is not None else tier.chunked_prefill_size
    max_bs = dep.cuda_graph_max_bs
    if max_bs is None:
        max_bs = tier.max_bs_small_tp if dep.tp < 4 else tier.max_bs_large_tp
        if dep.max_running_requests is not None and max_bs > dep.max_running_requests:
            max_bs = dep.max_running_requests
    decode_sizes = decode_graph_batch_sizes(max_bs, speculative=dep.speculative_algorithm is not None)
    # model_executor/cuda_graph_config.py:default_prefill_backend: breakable on CUDA, disabled elsewhere.
    # cuda_graph_hook.py:disable_breakable_cudagraph_if_incompatible (a multimodal model off its allowlist) runs
    # before the fraction: its reserve is not charged then.
    # cuda_graph_hook.py: PP disables the breakable prefill graph by default ("PP prefill graph replay is opt-in")
    prefill_on = platform == "cuda" and not dep.disable_cuda_graph and model.prefill_graph_allowed and dep.pp == 1
    prefill_max = min(8192, chunk) if use_mla else chunk
    if dep.pp > 1:
        prefill_max = min(prefill_max, 8192)  # memory_hook.py: _DEFAULT_PP_PREFILL_CUDA_GRAPH_MAX_TOKENS
    if dep.max_total_tokens is not None:
        prefill_max = min(prefill_max, dep.max_total_tokens)
    if model.llama2_path:
        prefill_max = min(prefill_max, 4096)  # "For Llama2 series models, max_bs is limited to 4096."
    prefill_sizes = prefill_graph_batch_sizes(prefill_max)
    given = ATTENTION_BACKEND_ALIASES.get(dep.attention_backend or "", dep.attention_backend)
    backend = (dsv4.ATTENTION_BACKEND if deepseek_v4 else None) or (
               given or ("dsa" if dsa_page_size else None)  # model_overrides/deepseek_v2.py
               or model_attention_backend(architecture, platform=platform, sm_major=sm_major,
                                          has_mamba=model.has_mamba,
                                          speculative=dep.speculative_algorithm is not None,
                                          spec_topk=dep.speculative_eagle_topk)
               or default_attention_backend(model, gpu, dep.tp,
                                            spec_topk_one=default_backend_allows(dep.speculative_eagle_topk,
                                                                                 dep.page_size),
                                            sm100_spec_ok=sm100_trtllm_allowed(dep.speculative_algorithm,
                                                                               dep.speculative_eagle_topk,
                                                                               dep.page_size)))
    if dep.mem_fraction_static is not None:
        fraction, source, reserved = dep.mem_fraction_static, "given", None
    else:
        graph_mb = reserve_for_graph_mb(decode_graphs=not dep.disable_cuda_graph, decode_max_bs=max_bs,
                                        attn_dp_size=dep.attn_dp_size, prefill_graphs=prefill_on,
                                        prefill_sizes=len(prefill_sizes), use_mla=use_mla)
        fraction, reserved = mem_fraction_from_reserve(gpu_mem_mib, chunk=chunk, tp=dep.tp, pp=dep.pp,
                                                       graph_mb=graph_mb)
        source = "memory_hook.py:handle_gpu_memory_settings"
        if vlm_factor is not None:  # memory_hook.py:adjust_mem_fraction_for_vlm, on the rounded value
            fraction *= vlm_factor
            source += f" × {vlm_factor:.4g} (vision tower: adjust_mem_fraction_for_vlm)"
    if backend == "aiter" and context_len > AITER_LONG_CONTEXT:
        fraction *= AITER_FRACTION_SCALE  # also a given value (SGLANG_AITER_HONOR_EXPLICIT_MEM_FRACTION unset)
        source += " × 0.85 (aiter, context > 8192: attention_hook.py)"
    prefill_kept = prefill_on
    if backend == "trtllm_mla" and dep.attention_backend is None and architecture == "DeepseekV3ForCausalLM":
        # cuda_graph_hook.py:disable_prefill_cuda_graph_for_deepseek_trtllm_mla (the DeepSeek-V3 architecture
        # only), after the fraction was set.
        prefill_kept = False
    attn_dp = dep.attn_dp_size
    if attn_dp > 1:
        # parallel_hook.py:handle_data_parallelism; prefill graphs re-derived from the divided chunk.
        chunk //= attn_dp
    if attn_dp > 1 and prefill_kept:
        prefill_sizes = prefill_graph_batch_sizes(min(prefill_max, chunk))
        prefill_max = min(prefill_max, chunk)
    page = (dsv4.PAGE_SIZE if deepseek_v4 else None) or dsa_page_size or default_page_size(backend, dep.page_size,
                                              sm100_mha=not use_mla and platform == "cuda" and sm_major == 10)
    return ServerDefaults(
        gpu_memory_mib=gpu_mem_mib, platform=platform, mem_fraction_static=fraction, mem_fraction_source=source,
        reserved_mib=reserved, chunked_prefill_size=chunk, max_prefill_tokens=dep.max_prefill_tokens,
        decode_graph_max_bs=max_bs, decode_graph_sizes=len(decode_sizes),
        prefill_graph="breakable" if prefill_kept else "disabled", prefill_graph_max_bs=prefill_max,
        prefill_graph_sizes=len(prefill_sizes), attention_backend=backend,
        page_size=page, attn_dp_size=attn_dp, attn_tp_size=dep.attn_tp_size,
        schedule_conservativeness=0.3 if attn_dp > 1 else 1.0)
