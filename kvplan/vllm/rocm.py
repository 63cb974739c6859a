"""vLLM 0.33's ROCm rules for AMD Instinct GPUs (MI300X, MI325X: gfx942 / CDNA 3; MI355X: gfx950 / CDNA 4): the
attention backend `RocmPlatform` picks, and so the KV block size, and the fp8 format its kernels read. Pure.

Source: the vllm==0.33.0 wheel, whose pure-Python tree carries the ROCm code
(`platforms/rocm.py`, `_aiter_ops.py`, `v1/attention/backends/rocm_*.py`, `mla/*`), checked against vLLM's own
planner run with its `RocmPlatform` (tests/fixtures/oracle-rocm/).

* `platforms/rocm.py:_get_backend_priorities`: MHA `[ROCM_ATTN (not with a KV connector), ROCM_AITER_FA (aiter
  installed and VLLM_ROCM_USE_AITER=1 and VLLM_ROCM_USE_AITER_MHA), ROCM_AITER_UNIFIED_ATTN (aiter installed, CDNA
  ≥ 3), TRITON_ATTN]`; MLA `[ROCM_AITER_MLA, TRITON_MLA, ROCM_AITER_TRITON_MLA]` when aiter's MLA is enabled,
  else `[TRITON_MLA]`; sparse MLA (DSA) `[ROCM_AITER_MLA_SPARSE]`. `get_attn_backend_cls` takes the first valid
  one per attention layer (`AttentionBackend.validate_configuration`).
* Block size (`platforms/interface.py:update_block_size_for_backend` → `_preferred_block_size_for_backends`):
  one backend → its `get_preferred_block_size(16)`: 64 for ROCM_AITER_UNIFIED_ATTN
  (`rocm_aiter_unified_attn.py`), 16 for the rest; several backends that all take 16 → 16.
* fp8 KV (`--kv-cache-dtype fp8|fp8_e4m3|fp8_e5m2`) is stored as uint8, one byte
  (`utils/torch_utils.py:STR_DTYPE_TO_TORCH_DTYPE`), and read as `current_platform.fp8_dtype()`:
  float8_e4m3fnuz where `"gfx94" in _GCN_ARCH` (`RocmPlatform.is_fp8_fnuz`), float8_e4m3fn on gfx950.
* MLA prefill (`RocmPlatform.get_mla_prefill_backend_cls`): ROCM_AITER_FA (aiter enabled) or FLASH_ATTN (the
  ROCm flash-attention package); neither → "No valid MLA prefill backend found".
* DeepSeek-V4 (`models/deepseek_v4/__init__.py` picks `amd/model.py` when `current_platform.is_rocm()`): its
  layers are `amd/rocm.py:DeepseekV4ROCMAiterMLAAttention`, a `DeepseekV4Attention` that keeps the fp8_ds_mla
  layout (`use_fp8_ds_mla_layout` is not overridden), so the caches are CUDA's FlashMLA ones; only the backend's
  name differs (ROCM_FLASHMLA_SPARSE_DSV4, 256-token blocks as sparse_mla.py:DeepseekV4SparseMLABackend).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from kvplan.errors import NotServed
from kvplan.model.kv_cache import DSV4_KV_DTYPE_REFUSAL, DSV4_SERVED_KV_DTYPES
from kvplan.vllm.backends import AttentionBackend

if TYPE_CHECKING:
    from kvplan.model.spec import LayerSpec, ModelSpec


class RocmGpu(Protocol):
    """What the ROCm rules need from a GPU: its name and gfx target (GpuSpec.compute_capability)."""

    @property
    def name(self) -> str: ...
    @property
    def compute_capability(self) -> str | None: ...


@dataclass(frozen=True)
class RocmAiter:
    """Whether AMD's aiter kernels are installed and enabled.

    `installed`: the `aiter` and ROCm `flash_attn` packages are importable. vLLM's ROCm images build both and set
    no VLLM_ROCM_USE_AITER, so the default is installed, not enabled. Source: vLLM 0.33.0's own Docker files, in
    its PyPI sdist (vllm-0.33.0.tar.gz, sha256 f4c33c2503d52bb411146afa9618a4f48bed68912f617e6803ac8d76e4c74112):
    docker/Dockerfile.rocm_base (sha256 54c0ade8…) builds flash-attention (FA_BRANCH 0e60e394) and aiter
    (AITER_BRANCH v0.1.26) wheels and its `final` stage pip-installs them; docker/Dockerfile.rocm (sha256
    f9ae35d6…), FROM that base, sets TOKENIZERS_PARALLELISM, SAFETENSORS_FAST_GPU, HIP_FORCE_DEV_KERNARG,
    HSA_ENABLE_IPC_MODE_LEGACY, UCX_* and PYTORCH_NVML_BASED_CUDA_CHECK in its `final_common` stage and no
    VLLM_ROCM_USE_AITER anywhere. The same holds in vllm-project/vllm docker/Dockerfile.rocm@00305ee5 and AMD's
    ROCm/vllm docker/Dockerfile.rocm@0004921e (its final stage: TOKENIZERS_PARALLELISM, SAFETENSORS_FAST_GPU,
    HIP_FORCE_DEV_KERNARG); run guides for that image pass `--env VLLM_ROCM_USE_AITER=1` themselves (e.g. a
    madengine Kimi-K3 benchmark guide for vllm/vllm-openai-rocm, found by code search). A bare `pip install vllm`
    has neither package. The rest are vLLM's variables (envs.py): VLLM_ROCM_USE_AITER (default False),
    VLLM_ROCM_USE_AITER_MHA and VLLM_ROCM_USE_AITER_MLA (default True).
    """

    installed: bool = True
    use_aiter: bool = False
    use_mha: bool = True
    use_mla: bool = True

    def supported(self, gpu: RocmGpu) -> bool:
        """_aiter_ops.py:is_aiter_found_and_supported: the package is found and get_cdna_version() > 2."""
        return self.installed and cdna_version(gpu) > 2

    def enabled(self, gpu: RocmGpu) -> bool:
        """rocm_aiter_ops.is_enabled(): supported and VLLM_ROCM_USE_AITER."""
        return self.supported(gpu) and self.use_aiter


def gcn_arch(gpu: RocmGpu) -> str:
    """The gfx target vLLM reads from amdsmi (platforms/rocm.py:_get_gcn_arch), e.g. gfx942."""
    return (gpu.compute_capability or "").split(":")[0]


def cdna_version(gpu: RocmGpu) -> int:
    """platforms/rocm.py:get_cdna_version: gfx90a → 2, gfx942 → 3, gfx950 → 4, anything else 0."""
    return {"gfx90a": 2, "gfx942": 3, "gfx950": 4}.get(gcn_arch(gpu), 0)


def fp8_view_dtype(gpu: RocmGpu) -> str:
    """The fp8 type ROCm kernels read a one-byte KV cache as (platforms/rocm.py:RocmPlatform.fp8_dtype)."""
    return "float8_e4m3fnuz" if "gfx94" in gcn_arch(gpu) else "float8_e4m3fn"


# Every ROCm MHA backend takes these KV dtypes (supported_kv_cache_dtypes of rocm_attn.py, rocm_aiter_fa.py,
# rocm_aiter_unified_attn.py, triton_attn.py); TRITON_MLA lacks fp8_e5m2 (mla/triton_mla.py).
_MHA_KV_DTYPES = frozenset({"auto", "float16", "bfloat16", "fp8", "fp8_e4m3", "fp8_e5m2"})
_TRITON_MLA_KV_DTYPES = frozenset({"auto", "float16", "bfloat16", "fp8", "fp8_e4m3"})
_AITER_MLA_KV_DTYPES = _MHA_KV_DTYPES
_SPARSE_MLA_KV_DTYPES = _TRITON_MLA_KV_DTYPES  # mla/rocm_aiter_mla_sparse.py
# RocmAttentionBackend.get_supported_head_sizes; AiterFlashAttentionBackend.get_supported_head_sizes.
ROCM_ATTN_HEAD_SIZES = frozenset({32, 64, 80, 96, 128, 160, 192, 224, 256})
AITER_FA_HEAD_SIZES = frozenset({64, 128, 256})
TRITON_MIN_HEAD_SIZE = 32  # triton_attn.py / rocm_aiter_unified_attn.py: supports_head_size(h) = h >= 32

ROCM_ATTN = AttentionBackend("ROCM_ATTN", 16, 16)  # MultipleOf(16)
ROCM_AITER_FA = AttentionBackend("ROCM_AITER_FA", 16, 16)  # [16, 32]; get_name() is "FLASH_ATTN"
ROCM_AITER_UNIFIED_ATTN = AttentionBackend("ROCM_AITER_UNIFIED_ATTN", 64, 16)  # MultipleOf(16), prefers 64
TRITON_ATTN = AttentionBackend("TRITON_ATTN", 16, 16)
ROCM_AITER_MLA = AttentionBackend("ROCM_AITER_MLA", 16, 1)  # MultipleOf(1): 16 is kept
TRITON_MLA = AttentionBackend("TRITON_MLA", 16, 16)
ROCM_AITER_MLA_SPARSE = AttentionBackend("ROCM_AITER_MLA_SPARSE", 16, 1)  # [1, MultipleOf(16)]: 16 is kept
# MiMo-V2 layers whose V head is narrower than K pick a DiffKV backend themselves (models/mimo_v2.py:
# MiMoV2Attention; Family.diffkv_attention): FLASH_ATTN_DIFFKV needs FA3/FA4 (CUDA), so ROCm gets TRITON_ATTN_DIFFKV
# (MultipleOf(16)).
TRITON_ATTN_DIFFKV = AttentionBackend("TRITON_ATTN_DIFFKV", 16, 16)

# amd/rocm.py:DeepseekV4ROCMAiterMLASparseBackend(DeepseekV4SparseMLABackend): get_name() ROCM_FLASHMLA_SPARSE_DSV4,
# the parent's 256-token kernel blocks; vLLM 0.33's planner logs "Setting kv cache block size to 256 for
# DEEPSEEK_SPARSE_SWA/ROCM_FLASHMLA_SPARSE_DSV4/DEEPSEEK_V4_INDEXER/CompressorBackend backend(s)" with or without
# aiter (tests/fixtures/oracle-rocm/deepseek-ai--DeepSeek-V4-Flash__*).
ROCM_DSV4_FLASHMLA = AttentionBackend("ROCM_FLASHMLA_SPARSE_DSV4", 256, 256)

NO_MLA_PREFILL = ("No valid MLA prefill backend found: ROCM_AITER_FA needs aiter enabled (VLLM_ROCM_USE_AITER=1), "
                  "FLASH_ATTN the flash_attn package (platforms/rocm.py:get_mla_prefill_backend_cls)")


def _has_sink(model: ModelSpec, layer: LayerSpec) -> bool:
    """Layers built with attention sinks (Attention(sinks=...)): gpt-oss every layer (models/gpt_oss.py: its
    family's WeightRules.attention_sinks, one learned sink per head);
    MiMo-V2 and Laguna their sliding-window layers when the config asks (models/mimo_v2.py
    add_swa_attention_sink_bias, models/laguna.py swa_attention_sink_enabled)."""
    if model.family.weights.attention_sinks:
        return True
    return model.facts.swa_attention_sinks and layer.sliding_window is not None


def _mha_reasons(backend: AttentionBackend, model: ModelSpec, layer: LayerSpec, kv_dtype: str) -> list[str]:
    """Why `backend` rejects this layer (AttentionBackend.validate_configuration's words), [] when it takes it."""
    reasons: list[str] = []
    head = layer.head_size
    if backend is ROCM_ATTN and head not in ROCM_ATTN_HEAD_SIZES:
        reasons.append("head_size not supported")
    if backend is ROCM_AITER_FA and head not in AITER_FA_HEAD_SIZES:
        reasons.append("head_size not supported")
    if backend in (ROCM_AITER_UNIFIED_ATTN, TRITON_ATTN) and head < TRITON_MIN_HEAD_SIZE:
        reasons.append("head_size not supported")
    if kv_dtype not in _MHA_KV_DTYPES and not (backend is TRITON_ATTN and kv_dtype.endswith("_per_token_head")):
        reasons.append("kv_cache_dtype not supported")
    if model.mm_prefix_lm and backend is not TRITON_ATTN:
        reasons.append("partial multimodal token full attention not supported")
    if _has_sink(model, layer) and backend is ROCM_ATTN:
        reasons.append("attention sinks not supported")
    return reasons


def _mha_priorities(aiter: RocmAiter, gpu: RocmGpu, *, kv_connector: bool) -> list[AttentionBackend]:
    """platforms/rocm.py:_get_backend_priorities for MHA layers (TURBOQUANT and later entries never win here)."""
    order = [] if kv_connector else [ROCM_ATTN]
    if aiter.enabled(gpu) and aiter.use_mha:  # rocm_aiter_ops.is_mha_enabled()
        order.append(ROCM_AITER_FA)
    if aiter.supported(gpu):
        order.append(ROCM_AITER_UNIFIED_ATTN)
    return [*order, TRITON_ATTN]


def _no_backend(gpu: RocmGpu, kv_dtype: str, reasons: dict[str, list[str]], supported: frozenset[str]) -> NotServed:
    """RocmPlatform.get_attn_backend_cls's refusal, with the kv-cache dtypes the rejecting backends accept."""
    listed = ", ".join(f"{name}: [{', '.join(why)}]" for name, why in reasons.items())
    hint = (f" Supported kv_cache_dtype values: {', '.join(sorted(supported))}."
            if any("kv_cache_dtype not supported" in why for why in reasons.values()) else "")
    return NotServed(f"No valid attention backend found for rocm with kv_cache_dtype={kv_dtype} on {gpu.name}. "
                     f"Reasons: {{{listed}}}.{hint}")


def _mla_backend(model: ModelSpec, gpu: RocmGpu, kv_dtype: str, aiter: RocmAiter) -> AttentionBackend:
    """The MLA decode backend, then the prefill check (get_mla_prefill_backend_cls)."""
    sparse = any(layer.indexer_head_size for layer in model.layers)
    if sparse:  # mla/rocm_aiter_mla_sparse.py imports aiter only inside its kernels: selection never asks for it
        order = [(ROCM_AITER_MLA_SPARSE, _SPARSE_MLA_KV_DTYPES)]
    elif aiter.enabled(gpu) and aiter.use_mla:  # rocm_aiter_ops.is_mla_enabled()
        order = [(ROCM_AITER_MLA, _AITER_MLA_KV_DTYPES), (TRITON_MLA, _TRITON_MLA_KV_DTYPES)]
    else:
        order = [(TRITON_MLA, _TRITON_MLA_KV_DTYPES)]
    reasons: dict[str, list[str]] = {}
    chosen = None
    for backend, kv_dtypes in order:
        why = [] if kv_dtype in kv_dtypes else ["kv_cache_dtype not supported"]
        if not why:
            chosen = backend
            break
        reasons[backend.name] = why
    if chosen is None:
        raise _no_backend(gpu, kv_dtype, reasons, frozenset().union(*(k for b, k in order if b.name in reasons)))
    if not sparse and not aiter.installed:  # neither aiter (enabled) nor flash_attn for the prefill
        raise NotServed(NO_MLA_PREFILL, hint="install aiter or flash-attn (AMD's vLLM images have both), "
                                             "i.e. drop --no-aiter")
    return chosen


def rocm_backend(model: ModelSpec, gpu: RocmGpu, kv_dtype: str, aiter: RocmAiter, *,
                 kv_connector: bool = False) -> AttentionBackend:
    """The attention backend vLLM 0.33's RocmPlatform selects for this model, and so its block size: the first
    valid backend of the priority list for each attention layer; several backends share 16-token blocks."""
    if model.mla is not None:
        return _mla_backend(model, gpu, kv_dtype, aiter)
    order = _mha_priorities(aiter, gpu, kv_connector=kv_connector)
    chosen: dict[str, AttentionBackend] = {}
    for layer in model.layers:
        if layer.kind not in ("full", "sliding_window", "chunked_local"):
            continue
        if layer.head_size_v != layer.head_size and model.family.diffkv_attention:
            chosen.setdefault(TRITON_ATTN_DIFFKV.name, TRITON_ATTN_DIFFKV)
            continue
        reasons: dict[str, list[str]] = {}
        for backend in order:
            why = _mha_reasons(backend, model, layer, kv_dtype)
            if not why:
                chosen.setdefault(backend.name, backend)
                break
            reasons[backend.name] = why
        else:
            raise _no_backend(gpu, kv_dtype, reasons, _MHA_KV_DTYPES)
    if not chosen:  # attention-free (Mamba): no attention layer picks a backend
        return ROCM_ATTN
    if len(chosen) == 1:
        return next(iter(chosen.values()))
    # _preferred_block_size_for_backends: every ROCm backend takes 16, so 16 it is
    return AttentionBackend(" + ".join(chosen), 16, 16)


def rocm_dsv4_backend(kv_flag: str) -> AttentionBackend:
    """DeepSeek-V4's backend on ROCm, or vLLM's refusal: attention.py:_resolve_dsv4_kv_cache_dtype serves auto and
    every fp8 flag as fp8_ds_mla and refuses the rest, on ROCm as on CUDA (the ROCm layer inherits it)."""
    if kv_flag not in DSV4_SERVED_KV_DTYPES:
        raise NotServed(DSV4_KV_DTYPE_REFUSAL.format(kv_flag))
    return ROCM_DSV4_FLASHMLA


def rules_note(gpu: RocmGpu, aiter: RocmAiter, kv_dtype: str) -> str:
    """One line saying which platform's rules planned this GPU, for the report."""
    image = ("aiter installed" if aiter.installed else "no aiter (bare pip install)") + (
        ", VLLM_ROCM_USE_AITER=1" if aiter.use_aiter else "")
    fp8 = f"; fp8 KV stored as uint8, read as {fp8_view_dtype(gpu)}" if kv_dtype.startswith("fp8") else ""
    return f"vLLM's ROCm rules (platforms/rocm.py, {gcn_arch(gpu) or 'unknown gfx'}): {image}{fp8}"
