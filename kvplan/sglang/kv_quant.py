"""SGLang 0.5.23's block-scaled KV caches: `--kv-cache-dtype mxfp8`, `nvfp4`, `fp4_mx_block16` (paths relative to
`sglang/srt/`). Pure: numbers in, numbers out.

* which deployments SGLang accepts, in its words (arg_groups/kv_cache_hook.py): mxfp8 needs a Blackwell GPU
  (handle_mxfp8_kv_cache_compatibility: utils/common.py:is_blackwell, capability 10 / 11 / 12); FP4 needs CUDA,
  nvfp4 SM100 or SM120, and an MHA model one of KV4_ATTENTION_MHA_BACKEND_CHOICES (handle_kv4_compatibility);
* the per-token bytes (model_executor/pool_configurator.py:DefaultPoolConfigurator._compute_cell_size, MHA):
  mxfp8 adds one 1-byte scale per 32 elements to the fp8 cell; FP4 packs two values a byte
  (torch.float4_e2m1fn_x2) plus one 1-byte scale per 16 (layers/quantization/fp4_kv_cache_quant_method.py
  compute_cell_size). The FP4 scale layouts and dequant workspace depend on the backends; kvplan models the one
  the oracle checked, trtllm_mha (SGLang's default on SM100), and refuses the rest as not modelled.
"""
from __future__ import annotations

MXFP8_SCALE_BLOCK = 32  # pool_configurator.py: mxfp8 scale_block_size
FP4_SCALE_BLOCK = 16  # fp4_kv_cache_quant_method.py: NVFP4KVCacheMethod / FP4MXBlock16 SCALE_BLOCK_SIZE
FP4_DTYPES = frozenset({"nvfp4", "fp4_mx_block16"})
BLOCK_SCALED = FP4_DTYPES | {"mxfp8"}
# kv_cache_hook.py:handle_kv4_compatibility, the !FA4 + MHA branch.
KV4_MHA_BACKENDS = ("triton", "torch_native", "flex_attention", "trtllm_mha")


def refusal(kv_dtype: str, *, platform: str, sm_major: int | None, backend: str, use_mla: bool) -> str | None:
    """SGLang's refusal of a block-scaled KV dtype for this platform and attention backend (None: accepted)."""
    if kv_dtype == "mxfp8" and not (platform == "cuda" and (sm_major or 0) in (10, 11, 12)):
        return ("--kv-cache-dtype mxfp8 requires an SM100+ (Blackwell) GPU for the block-scaled operands used by "
                "the FA4 MXFP8 attention path.")
    if kv_dtype not in FP4_DTYPES:
        return None
    if platform != "cuda":
        return "KV4 is not tested on non-CUDA platforms."
    if kv_dtype == "nvfp4" and sm_major not in (10, 12):
        return ("--kv-cache-dtype=nvfp4 requires Blackwell SM100 or SM120. Use --kv-cache-dtype=fp4_mx_block16 for "
                "the block-size-16 FP4 recipe.")
    if not use_mla and backend not in KV4_MHA_BACKENDS:
        return (f"KV4 MHA expects attention_backend to be one of {list(KV4_MHA_BACKENDS)}, but got {backend}")
    return None


def unmodelled(kv_dtype: str, *, backend: str, use_mla: bool, plain_mha: bool) -> str | None:
    """What of a block-scaled pool kvplan does not model (None: all of it)."""
    if kv_dtype not in BLOCK_SCALED:
        return None
    if use_mla or not plain_mha:
        return f"--kv-cache-dtype {kv_dtype} outside a plain MHA pool is not modelled yet"
    if kv_dtype in FP4_DTYPES and backend != "trtllm_mha":
        return (f"--kv-cache-dtype {kv_dtype} with the {backend} backend (its FP4 scale layouts and dequant "
                "workspace, fp4_kv_cache_quant_method.py) is not modelled yet")
    return None


def row_bytes(kv_dtype: str, width: int, element_bytes: int) -> int:
    """Bytes of one K (or V) row of `width` elements, scales included: what _compute_cell_size adds per head and
    layer, and what the pool's buffers (data + scale) hold per token."""
    if kv_dtype == "mxfp8":
        return width * element_bytes + width // MXFP8_SCALE_BLOCK
    if kv_dtype in FP4_DTYPES:
        return width // 2 + width // FP4_SCALE_BLOCK
    return width * element_bytes
