"""The attention backend vLLM picks on CUDA, and so the KV block size: platforms/cuda.py's priority lists and
each backend's supports_* checks (v1/attention/backends/), as vLLM 0.33 has them. Pure."""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Protocol

from kvplan.errors import InvalidParameter, NotServed
from kvplan.model.kv_cache import (
    DS_MLA_BYTES,
    DSV4_KV_DTYPE_REFUSAL,
    DSV4_SERVED_KV_DTYPES,
    NVFP4_KV_DTYPES,
    NVFP4_MLA_REFUSAL,
)
from kvplan.vllm.defaults import DSV4_AUTO_KV_SINCE, DSV4_FP8_DS_MLA_WORDING_SINCE, LATEST, VllmVersion

if TYPE_CHECKING:
    from kvplan.model.spec import ModelSpec


class GpuLike(Protocol):
    """What backend selection needs from a GPU."""

    @property
    def name(self) -> str: ...
    @property
    def arch(self) -> str | None: ...


FP8_KV_DTYPES = frozenset({"fp8", "fp8_e4m3", "fp8_e5m2"})
# Architectures where vLLM 0.33 serves an NVFP4 KV cache (v1/attention/backends/flashinfer.py:
# FlashInferBackend.supports_kv_cache_dtype): SM10x through FlashInfer's TRTLLM kernels (nvfp4 and
# nvfp4_4over6), SM8x/SM90/SM12x through its FA2 path (nvfp4 only; not at head size 64, not with sinks).
NVFP4_TRTLLM_ARCHS = frozenset({"blackwell"})
NVFP4_FA2_ARCHS = frozenset({"ampere", "ada", "hopper", "blackwell-rtx"})


@dataclass(frozen=True)
class AttentionBackend:
    """The backend vLLM would select and the block size it prefers (`get_preferred_block_size(16)`)."""

    name: str
    block_size: int
    min_kernel_block_size: int


# v1/attention/backends/*: get_supported_kernel_block_sizes / get_preferred_block_size.
_FLASH_ATTN = AttentionBackend("FLASH_ATTN", 16, 16)
_FLASHINFER = AttentionBackend("FLASHINFER", 16, 16)
FLASHINFER_BACKEND = _FLASHINFER  # the one backend with an NVFP4 KV cache
_FLASH_ATTN_MLA = AttentionBackend("FLASH_ATTN_MLA", 16, 16)
_FLASHMLA = AttentionBackend("FLASHMLA", 64, 64)
_FLASHINFER_MLA = AttentionBackend("FLASHINFER_MLA", 32, 32)  # supports [32, 64]
_TRITON_MLA = AttentionBackend("TRITON_MLA", 16, 16)
# DeepSeek sparse attention (DSA) backends: 64-token blocks (v1/attention/backends/mla/flashmla_sparse.py,
# flashattn_mla_sparse.py, flashinfer_mla_sparse_sm90.py: get_supported_kernel_block_sizes [64]).
_FLASH_ATTN_MLA_SPARSE = AttentionBackend("FLASH_ATTN_MLA_SPARSE", 64, 64)
_FLASHMLA_SPARSE = AttentionBackend("FLASHMLA_SPARSE", 64, 64)
_FLASHINFER_MLA_SPARSE_SM90 = AttentionBackend("FLASHINFER_MLA_SPARSE_SM90", 64, 64)
_FLASHINFER_MLA_SPARSE = AttentionBackend("FLASHINFER_MLA_SPARSE", 64, 64)  # SM10x with a checkpoint's fp8 cache
# SM12x (RTX 50, RTX PRO 6000, GB10): platforms/cuda.py lists TRITON_MLA then FLASHINFER_MLA_SPARSE_SM120 for MLA;
# the sparse one takes a bf16 model with index_topk 2048 and auto/fp8/fp8_e4m3/fp8_ds_mla, kernel blocks a
# multiple of 64 (flashinfer_mla_sparse.py:FlashInferMLASparseSM120Backend), and serves the latent as fp8_ds_mla
# (mla_attention.py:_canonicalize_sparse_mla_kv_cache_dtype).
FLASHINFER_MLA_SPARSE_SM120 = AttentionBackend("FLASHINFER_MLA_SPARSE_SM120", 64, 64)
SM120_SPARSE_KV_DTYPES = frozenset({"auto", "fp8", "fp8_e4m3", "fp8_ds_mla"})
SM120_SPARSE_INDEX_TOPK = 2048
# Multimodal prefix LMs (platforms/cuda.py:_get_backend_priorities, use_mm_prefix): SM10x puts
# TRITON_FLASHINFER first (64-token blocks, as vLLM 0.33's planner sets them), SM90 TRITON_FLASH_ATTN, and
# older GPUs fall through to TRITON_ATTN (the other backends do not support mm-prefix attention).
_TRITON_FLASHINFER = AttentionBackend("TRITON_FLASHINFER", 64, 64)
_TRITON_FLASH_ATTN = AttentionBackend("TRITON_FLASH_ATTN", 16, 16)
# Both composites declare the head sizes they take: v1/attention/backends/triton_flashinfer.py and
# triton_flash_attn.py, `head_sizes=(256, 512)`; composite.py:supports_head_size refuses any other, and
# selector.py then tries the next backend of the list.
COMPOSITE_MM_PREFIX_HEAD_SIZES = frozenset({256, 512})
_TRITON_ATTN = AttentionBackend("TRITON_ATTN", 16, 16)
# SM90 with an fp8 cache and 512-wide heads (gemma-4's global layers): 64-token blocks, as vLLM 0.33's
# planner picks them (FlashAttention 4's supported block sizes; tests/fixtures/oracle-cuda gemma-4 h100-fp8).
FP8_WIDE_HEAD_SIZE = 512
FP8_WIDE_HEAD_BLOCK_SIZE = 64


# v1/attention/backends/flash_attn.py:FlashAttentionBackend.supports_head_size: heads ≤ 256, or ≤ 512 where
# FlashAttention 4 runs (SM90/SM10x); elsewhere (Ampere, Ada) a wider head falls through vLLM's priority list to
# TRITON_ATTN (tests/fixtures/oracle-cuda/multimodal: text-only gemma-4 on L40S).
FA2_MAX_HEAD_SIZE = 256
FA4_MAX_HEAD_SIZE = 512
FA4_ARCHS = frozenset({"hopper", "blackwell"})


def mm_prefix_backend(arch: str | None, head_sizes: frozenset[int] | set[int] = frozenset({256})) -> AttentionBackend:
    """The backend of a multimodal prefix LM on this GPU, whose attention layers have these head sizes: vLLM
    0.33's CUDA priority list (platforms/cuda.py:_get_backend_priorities, use_mm_prefix) walked with each
    backend's checks (backend.py:validate_configuration):

    * SM10x: TRITON_FLASHINFER takes head sizes 256 and 512 only; FLASHINFER has no mm-prefix support
      (backend.py:supports_mm_prefix False); FLASH_ATTN takes it where FlashAttention 4 runs, which it does on
      SM100 (fa_utils.py:get_flash_attn_version; flash_attn.py:supports_combination "mm_prefix … requires
      FlashAttention v4"), with 16-token blocks (MultipleOf(16)) below head size 256.
    * SM90: TRITON_FLASH_ATTN takes 256 and 512 only; FLASH_ATTN refuses mm-prefix below head size 256 (FA3
      there, not FA4); FLASHINFER has no mm-prefix support; TRITON_ATTN (16-token blocks) takes it.
    * Older GPUs: TRITON_ATTN.

    vLLM selects per layer; a model mixing accepted and refused head sizes (none seen) would get two backends
    there, and gets the fall-through backend for every layer here.
    """
    family = (arch or "").lower()
    composite = bool(head_sizes) and set(head_sizes) <= COMPOSITE_MM_PREFIX_HEAD_SIZES
    if family == "blackwell":
        if composite:
            return _TRITON_FLASHINFER
        return _FLASH_ATTN if all(h % 8 == 0 and h <= FA4_MAX_HEAD_SIZE for h in head_sizes) else _TRITON_ATTN
    if family == "hopper" and composite:
        return _TRITON_FLASH_ATTN
    return _TRITON_ATTN


# GPUs below compute capability 8.9: no native fp8 (the catalog's `arch` names).
PRE_SM89_ARCHS = frozenset({"ampere", "turing", "volta"})
NO_SPARSE_MLA_BACKEND = ("No valid attention backend found for cuda with use_sparse=True: FlashMLA Sparse is only "
                         "supported on Hopper and Blackwell DC devices")


def sparse_mla_backend(arch: str | None, *, kv_cache_dtype: str, checkpoint_kv: bool) -> AttentionBackend | None:
    """The DSA backend vLLM 0.33 picks (checked against its CUDA planner, tests/fixtures/oracle-cuda): Hopper
    FLASH_ATTN_MLA_SPARSE for a bf16 cache, FLASHMLA_SPARSE for `--kv-cache-dtype fp8`, and
    FLASHINFER_MLA_SPARSE_SM90 for a checkpoint's fp8 scheme; Blackwell FLASHMLA_SPARSE, FLASHINFER_MLA_SPARSE for a
    checkpoint's (or GLM-5's SM10x default) fp8 scheme; SM12x FLASHINFER_MLA_SPARSE_SM120; None otherwise."""
    family = (arch or "").lower()
    fp8 = kv_cache_dtype in FP8_KV_DTYPES or kv_cache_dtype == "fp8_ds_mla"
    if family == "hopper":
        if kv_cache_dtype == "nvfp4_ds_mla":  # flashmla_sparse.py: SM100 only; no other sparse backend takes it
            return None
        if fp8:
            return _FLASHINFER_MLA_SPARSE_SM90 if checkpoint_kv else _FLASHMLA_SPARSE
        return _FLASH_ATTN_MLA_SPARSE
    if family == "blackwell":
        return _FLASHINFER_MLA_SPARSE if fp8 and checkpoint_kv else _FLASHMLA_SPARSE
    if family == "blackwell-rtx" and (kv_cache_dtype in SM120_SPARSE_KV_DTYPES or checkpoint_kv):
        return FLASHINFER_MLA_SPARSE_SM120
    return None


def nvfp4_kv_refusal(arch: str | None, kv_cache_dtype: str, head_sizes: set[int]) -> str | None:
    """Why vLLM 0.33 finds no attention backend for an NVFP4 KV cache on this GPU, or None when FlashInfer
    takes it (tests/fixtures/oracle-cuda/extra: Qwen2.5-7B on B200, H100 and A100; gpt-oss-20b and
    opt-125m at head size 64 on H100 refused, on B200 served)."""
    family = (arch or "").lower()
    if family in NVFP4_TRTLLM_ARCHS:
        return None
    if family in NVFP4_FA2_ARCHS:
        if kv_cache_dtype != "nvfp4":
            return f"FLASHINFER serves {kv_cache_dtype} only on SM100 (its FA2 path takes plain nvfp4)"
        if 64 in head_sizes:
            return "FLASHINFER: fa2 prefill misreads an NVFP4 KV cache at head_size 64"
        return None
    return "only FLASHINFER has an NVFP4 KV cache, on SM80 and newer NVIDIA GPUs"


def attention_backend(arch: str | None, *, mla: bool, kv_cache_dtype: str) -> AttentionBackend:
    """The first backend of vLLM's CUDA priority list for this GPU (platforms/cuda.py:_get_backend_priorities).

    * SM90 (Hopper): FLASH_ATTN; MLA: FLASH_ATTN_MLA (bf16/fp16 only), so an fp8 MLA cache gets FLASHMLA (64).
    * SM100 (Blackwell): FLASHINFER; MLA: FLASHINFER_MLA (32).
    * Older GPUs (Ampere, Ada): FLASH_ATTN; MLA: TRITON_MLA.
    Head sizes that only FA4 or special kernels take (256/512 on some archs) are not modelled.
    """
    family = (arch or "").lower()
    fp8 = kv_cache_dtype in FP8_KV_DTYPES
    if family == "hopper":
        if mla:
            return _FLASHMLA if fp8 else _FLASH_ATTN_MLA
        return _FLASH_ATTN
    if family == "blackwell":
        return _FLASHINFER_MLA if mla else _FLASHINFER
    return _TRITON_MLA if mla else _FLASH_ATTN


def _fp8_on_triton_refusal(model: ModelSpec, gpu: GpuLike, kv_dtype: str) -> str | None:
    """Before SM89, MLA runs on TRITON_MLA and multimodal prefix LMs on TRITON_ATTN, which have no fp8 cache
    (v1/attention/backends/mla/triton_mla.py, triton_attn.py)."""
    if kv_dtype not in FP8_KV_DTYPES or (gpu.arch or "") not in PRE_SM89_ARCHS:
        return None
    if model.mla is None and not model.mm_prefix_lm:
        return None
    which = "Triton MLA" if model.mla is not None else "Triton attention"
    return (f"FP8 KV cache is not supported by the {which} backend on {gpu.name}; native FP8 (fp8e4nv) requires "
            "SM89+. Re-run with --kv-cache-dtype bfloat16.")


def _kv_dtype_refusal(model: ModelSpec, gpu: GpuLike, kv_dtype: str) -> None:
    """vLLM 0.33's refusals of the NVFP4 and DeepSeek `_ds_mla` KV layouts: nvfp4 on MLA (config/vllm.py:
    validate_nvfp4_kv_cache_with_mla), `_ds_mla` without DeepSeek sparse attention, nvfp4 where FlashInfer
    cannot serve it (no other backend can), asymmetric K/V head sizes (FlashInferBackend.customize_spec)."""
    sparse = any(layer.indexer_head_size for layer in model.layers)
    if kv_dtype in NVFP4_KV_DTYPES and model.mla is not None:
        raise InvalidParameter(NVFP4_MLA_REFUSAL)
    if kv_dtype in DS_MLA_BYTES and not sparse:
        raise NotServed(f"No valid attention backend found for cuda with kv_cache_dtype={kv_dtype}: only "
                        "FLASHMLA_SPARSE takes it, for DeepSeek sparse attention (DSA) models",
                        hint="use --kv-cache-dtype fp8 (or auto) for this model")
    if kv_dtype == "nvfp4_ds_mla" and (gpu.arch or "") != "blackwell":
        raise NotServed(f"No valid attention backend found for cuda with kv_cache_dtype=nvfp4_ds_mla on {gpu.name}: "
                        "FLASHMLA_SPARSE only supports the nvfp4_ds_mla kv-cache dtype on SM100 (Blackwell)",
                        hint="use --kv-cache-dtype fp8_ds_mla")
    if kv_dtype in NVFP4_KV_DTYPES:
        attention = [layer for layer in model.layers if layer.kind in ("full", "sliding_window", "chunked_local")]
        if any(layer.head_size != layer.head_size_v for layer in attention):
            raise NotServed("nvfp4 with asymmetric K/V head sizes not yet supported (vLLM's FlashInfer backend)")
        why = nvfp4_kv_refusal(gpu.arch, kv_dtype, {layer.head_size for layer in attention})
        if why is not None:
            raise NotServed(f"No valid attention backend found for cuda with kv_cache_dtype={kv_dtype} on "
                            f"{gpu.name}: {why}", hint="use --kv-cache-dtype fp8")


def _sm120_sparse_refusal(model: ModelSpec) -> None:
    """FlashInferMLASparseSM120Backend.supports_combination's refusals (flashinfer_mla_sparse.py)."""
    topk = model.facts.index_topk
    if model.dtype != "bfloat16":
        raise NotServed("No valid attention backend found for cuda with use_sparse=True: FLASHINFER_MLA_SPARSE_SM120: "
                        "dtype not supported", hint="it serves bfloat16 models only: --dtype bfloat16")
    if topk is None or isinstance(topk, bool) or topk != SM120_SPARSE_INDEX_TOPK:  # any JSON value
        got = "requires a model with index_topk config" if topk is None else f"requires index_topk=2048; got {topk!r}"
        raise NotServed(f"No valid attention backend found for cuda with use_sparse=True: FLASHINFER_MLA_SPARSE_SM120 "
                        f"{got}")


# DeepSeek-V4 (models/deepseek_v4/nvidia/model.py:_select_dsv4_attn_cls): every CUDA arch but SM12x runs
# DeepseekV4FlashMLAAttention, whose backend FLASHMLA_SPARSE_DSV4 takes 256-token blocks only
# (sparse_mla.py:DeepseekV4SparseMLABackend.get_supported_kernel_block_sizes). The class is picked directly, not
# through the backend selector, so the backend's supports_compute_capability (9.x, 10.x) is never asked: vLLM 0.33's
# planner lays the same cache out on an A100 (tests/fixtures/oracle-cuda: DeepSeek-V4 __a100 answered; FlashMLA's
# kernels themselves are SM90+). SM12x takes DeepseekV4FlashInferSM120Attention, whose plain bf16 / fp8 rows
# kvplan does not model.
DSV4_FLASHMLA = AttentionBackend("FLASHMLA_SPARSE_DSV4", 256, 256)


def dsv4_backend(gpu: GpuLike, kv_flag: str, version: VllmVersion = LATEST) -> AttentionBackend:
    """DeepSeek-V4's attention backend on this GPU, or vLLM's refusal (before 0.30 `auto` is refused too:
    defaults.DSV4_AUTO_KV_SINCE)."""
    if (gpu.arch or "").lower() == "blackwell-rtx":
        raise NotServed(f"DeepSeek-V4 on {gpu.name} (SM12x) runs vLLM's FlashInfer SM120 sparse attention, whose "
                        "cache layout kvplan does not model yet", hint="plan it on an SM90 or SM100 GPU")
    if version < DSV4_AUTO_KV_SINCE and not kv_flag.startswith("fp8"):
        layout = "fp8_ds_mla" if version >= DSV4_FP8_DS_MLA_WORDING_SINCE else "FlashMLA fp8"
        raise NotServed(f"DeepseekV4 {layout} layout only supports fp8 kv-cache, got {kv_flag}",
                        hint=f"vLLM {version} asserts it: pass --kv-cache-dtype fp8")
    if kv_flag not in DSV4_SERVED_KV_DTYPES:
        raise NotServed(DSV4_KV_DTYPE_REFUSAL.format(kv_flag))
    return DSV4_FLASHMLA


def select_backend(model: ModelSpec, gpu: GpuLike, kv_dtype: str, *, checkpoint_kv: bool) -> AttentionBackend:
    """The attention backend (and so the block size) vLLM selects; DSA models have their own sparse ones, an
    NVFP4 cache has FlashInfer only."""
    _kv_dtype_refusal(model, gpu, kv_dtype)
    if any(layer.indexer_head_size for layer in model.layers):
        sparse = sparse_mla_backend(gpu.arch, kv_cache_dtype=kv_dtype, checkpoint_kv=checkpoint_kv)
        if sparse is None:
            raise NotServed(NO_SPARSE_MLA_BACKEND, hint=f"{gpu.name} is {gpu.arch or 'an unknown architecture'}")
        if sparse == FLASHINFER_MLA_SPARSE_SM120:
            _sm120_sparse_refusal(model)
        return sparse
    if kv_dtype in NVFP4_KV_DTYPES:
        return FLASHINFER_BACKEND
    refusal = _fp8_on_triton_refusal(model, gpu, kv_dtype)
    if refusal is not None:
        raise NotServed(refusal)
    head_sizes = {layer.head_size for layer in model.layers if layer.kind in ("full", "sliding_window",
                                                                             "chunked_local")}
    backend = (mm_prefix_backend(gpu.arch, head_sizes) if model.mm_prefix_lm and model.mla is None
               else attention_backend(gpu.arch, mla=model.mla is not None, kv_cache_dtype=kv_dtype))
    widest = max((layer.head_size for layer in model.layers), default=0)
    if backend.name == "FLASH_ATTN" and widest > FA2_MAX_HEAD_SIZE and (gpu.arch or "") not in FA4_ARCHS:
        return _TRITON_ATTN  # FlashAttention 2 takes heads ≤ 256 (flash_attn.py:supports_head_size)
    if (gpu.arch or "") == "hopper" and kv_dtype in FP8_KV_DTYPES and widest >= FP8_WIDE_HEAD_SIZE:
        return replace(backend, block_size=FP8_WIDE_HEAD_BLOCK_SIZE)
    return backend
