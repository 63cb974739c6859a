"""SGLang 0.5.23's DeepSeek sparse-attention (DSA: DeepSeek-V3.2, GLM-5) pool (paths relative to `sglang/srt/`).

* KV dtype: `--kv-cache-dtype auto` becomes fp8_e4m3 on compute capability ≥ 10 and bfloat16 below (or with
  learnable sinks) (`arg_groups/overrides.py:_dsa_kv_cache_dtype_default`);
* backends: attention_backend `dsa` (`model_overrides/deepseek_v2.py`); the split DSA backends of
  `overrides.py:_dsa_split_backend_resolution`: fp8 → trtllm on ≥ 10, flashmla_kv on Hopper; bf16 →
  flashmla_sparse prefill with trtllm (≥ 10) or fa3 decode;
* page size 64 × index_kpool (`model_overrides/deepseek_v2.py`); on ROCm 1 unless aiter's preshuffle paged-MQA
  path is on (`layers/attention/dsa/utils.py:aiter_can_use_preshuffle_paged_mqa`: SGLANG_USE_AITER=1 with
  Triton ≥ 3.5 or AITER_ENABLE_AOT_GLUON_PA_MQA_LOGITS=1); kvplan models SGLang's default environment
  (SGLANG_USE_AITER unset: the legacy page size 1), and SGLANG_USE_AITER=1 on a pasted line (64 × index_kpool);
* the latent row (`mem_cache/kv_cache_configurator.py:calculate_mla_kv_cache_dim`): kv_lora_rank + rope, except an
  fp8 cache on a scaled-layout backend (not trtllm, not TileLang on both sides, not HIP's default triton DSA
  backends, `overrides.py:_dsa_split_backend_resolution`, which read the raw layout):
  kv_lora_rank + kv_lora_rank / 128 × 4 + rope × 2 bytes (656 for 512 / 64);
* the indexer (`model_executor/pool_configurator.py:DefaultPoolConfigurator._compute_dsa_indexer_cell_size`):
  ceil(index_head_dim + index_head_dim / 128 × 4, index_kpool) bytes per token on every layer that computes its
  own top-k (`configs/model_config.py:dsa_layer_skips_topk`; the shared ones get no rows,
  kv_cache_configurator.py:_should_elide_dsa_index_k).
The KV dtype default on ROCm follows the same rule: torch reports capability 9.x on MI300X / MI355X, so bfloat16.
Pure: numbers in, numbers out.
"""
from __future__ import annotations

from kvplan.errors import InvalidParameter
from kvplan.model.spec import ModelSpec, SglangFacts

# configs/model_config.py:is_deepseek_dsa (with index_topk set).
DSA_ARCHITECTURES = frozenset({
    "DeepseekV3ForCausalLM", "DeepseekV32ForCausalLM", "DeepseekV3ForCausalLMNextN", "MistralLarge3ForCausalLM",
    "PixtralForConditionalGeneration", "GlmMoeDsaForCausalLM", "GlmMoeDsaForCausalLMNextN",
    "Glm5NextForConditionalGenerationNextN", "Glm5NextForConditionalGeneration", "LongcatFlashForCausalLM",
    "LongcatFlashForCausalLMNextN", "Dots3NoteForCausalLM", "Dots3NoteForCausalLMNextN", "HYV4ForCausalLM",
    "HYV4ForCausalLMNextN",
})
QUANT_BLOCK = 128  # mem_cache/memory_pool.py:DSATokenToKVPool.quant_block_size
ROPE_STORAGE_BYTES = 2  # DSATokenToKVPool.rope_storage_dtype: bfloat16


def is_dsa(spec: ModelSpec) -> bool:
    """configs/model_config.py:is_deepseek_dsa."""
    arch = spec.architectures[0] if spec.architectures else ""
    return arch in DSA_ARCHITECTURES and spec.facts.index_topk is not None


def default_kv_dtype(spec: ModelSpec, *, sm_major: int | None) -> str:
    """_dsa_kv_cache_dtype_default for `--kv-cache-dtype auto` on CUDA."""
    sinks = spec.facts.sglang.learnable_sink
    return "fp8_e4m3" if (sm_major or 0) >= 10 and not sinks else "bfloat16"


def kv_dtype(given: str, spec: ModelSpec, sm_major: int | None) -> str:
    """_dsa_kv_cache_dtype_default: auto by compute capability; only bf16 and fp8_e4m3 are served."""
    value = given.lower()
    if value == "auto":
        return default_kv_dtype(spec, sm_major=sm_major)
    if value in ("bf16", "bfloat16"):
        return "bfloat16"
    if value == "fp8_e4m3":
        return value
    raise InvalidParameter("DeepSeek DSA only supports bf16/bfloat16 or fp8_e4m3 kv_cache_dtype",
                           hint=f"--kv-cache-dtype {given!r} is refused by SGLang for this model")


def page_size(spec: ModelSpec, *, hip: bool = False, use_aiter: bool = False) -> int:
    """model_overrides/deepseek_v2.py: 64 × index_kpool (configs/model_config.py:get_dsa_index_kpool); on ROCm 1
    unless aiter's preshuffle path is on: layers/attention/dsa/utils.py:aiter_can_use_preshuffle_paged_mqa is False
    while SGLANG_USE_AITER is unset (`use_aiter`), and with it True when Triton ≥ 3.5 (assumed: the oracle's, and
    the ROCm 7 images'; SGLANG_DSA_HIP_DISABLE_PRESHUFFLE=1 turns it off, not modelled)."""
    return 1 if hip and not use_aiter else 64 * spec.facts.sglang.index_kpool


def latent_row_bytes(spec: ModelSpec, *, kv_dtype: str, element_bytes: int, sm_major: int | None,
                     hip: bool = False) -> int:
    """calculate_mla_kv_cache_dim × element size under SGLang's default DSA backends (HIP: triton, the raw
    layout, "nope(512 fp8) + rope(64 fp8), without extra per-block scales")."""
    assert spec.mla is not None
    rank, rope = spec.mla.kv_lora_rank, spec.mla.qk_rope_head_dim
    trtllm = (sm_major or 0) >= 10  # both dtypes decode with trtllm on SM100 (the raw layout)
    if kv_dtype == "fp8_e4m3" and not trtllm and not hip and not spec.facts.sglang.learnable_sink:
        return rank + rank // QUANT_BLOCK * 4 + rope * ROPE_STORAGE_BYTES
    return (rank + rope) * element_bytes


def _skips_topk(s: SglangFacts, layer: int) -> bool:
    """configs/model_config.py:dsa_layer_skips_topk (indexer_types, cli_factor, index_topk_pattern, index_topk_freq
    with index_skip_topk_offset, in that order)."""
    if s.indexer_shared is not None:
        return 0 <= layer < len(s.indexer_shared) and s.indexer_shared[layer]
    if s.cli_factor > 1:
        return layer % s.cli_factor != 0
    if s.topk_pattern_shared is not None:
        return layer < len(s.topk_pattern_shared) and s.topk_pattern_shared[layer]
    if s.skip_topk_offset > 0:
        return max(layer - s.skip_topk_offset + 1, 0) % s.index_topk_freq != 0
    return max(layer - 1, 0) % s.index_topk_freq != 0


def indexer_row_bytes(spec: ModelSpec) -> int:
    """_compute_dsa_indexer_cell_size's indexer_size_per_token × uint8: one layer's index-K with its scales."""
    s = spec.facts.sglang
    head, kpool = s.index_head_dim, s.index_kpool
    return -(-(head + head // QUANT_BLOCK * 4) // kpool)


def indexer_bytes_per_token(spec: ModelSpec, layers: int) -> int:
    """_compute_dsa_indexer_cell_size: uint8 index-K with scales on each layer computing its own top-k."""
    s = spec.facts.sglang
    return indexer_row_bytes(spec) * sum(not _skips_topk(s, i) for i in range(layers))
