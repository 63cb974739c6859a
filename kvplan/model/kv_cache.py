"""KV-cache bytes per token and per block, per layer and per GPU, as vLLM's KVCacheSpec computes them.

Source: vllm/v1/kv_cache_interface.py (FullAttentionSpec, SlidingWindowSpec, ChunkedLocalAttentionSpec,
MLAAttentionSpec, MambaSpec) and config/model.py:ModelConfig.get_num_kv_heads (vLLM 0.33).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from kvplan.model.parallel import check_tensor_parallel, pp_layer_ranges

if TYPE_CHECKING:
    from kvplan.model.spec import ModelSpec, RecurrentState

CacheKind = Literal["full", "sliding_window", "chunked_local", "mla", "mamba"]

# Bytes per element of each --kv-cache-dtype (utils/torch_utils.py:STR_DTYPE_TO_TORCH_DTYPE: fp8, nvfp4 and the
# DeepSeek `_ds_mla` layouts → uint8; nvfp4 packs two values a byte, see NVFP4_KV_DTYPES).
KV_DTYPE_BYTES: dict[str, int] = {
    "float32": 4,
    "bfloat16": 2,
    "float16": 2,
    "fp8": 1,
    "fp8_e4m3": 1,
    "fp8_e5m2": 1,
    "fp8_ds_mla": 1,
    "nvfp4_ds_mla": 1,
    "nvfp4": 1,
    "nvfp4_4over6": 1,
}
KV_CACHE_DTYPES = ("auto", "bfloat16", "float16", "fp8", "fp8_e4m3", "fp8_e5m2", "fp8_ds_mla", "nvfp4_ds_mla",
                   "nvfp4", "nvfp4_4over6")
# vLLM 0.33's NVFP4 KV cache (FlashInfer only): per head, K and V each hold head_size/2 bytes of packed fp4 values
# and head_size/16 fp8 block scales (utils/torch_utils.py:nvfp4_kv_cache_full_dim,
# v1/attention/backends/flashinfer.py:FlashInferBackend.customize_spec).
NVFP4_KV_DTYPES = frozenset({"nvfp4", "nvfp4_4over6"})
# DeepSeek sparse-attention (DSA) latent layouts: one opaque row per token (mla_attention.py
# state_content_bytes): fp8_ds_mla 512 fp8 NoPE values + 4 fp32 scales + 64 bf16 RoPE values; nvfp4_ds_mla
# NVFP4 NoPE + FP8 RoPE (SM100 only, v1/attention/backends/mla/flashmla_sparse.py).
DS_MLA_BYTES = {"fp8_ds_mla": 656, "nvfp4_ds_mla": 352}
NVFP4_MLA_REFUSAL = ("nvfp4 KV cache is not supported with MLA (Multi-head Latent Attention) backends. Please use a "
                     "different --kv-cache-dtype (e.g., 'fp8', 'auto', or 'nvfp4_ds_mla' with a sparse MLA backend) "
                     "for MLA models such as DeepSeek.")


def nvfp4_kv_head_bytes(head_size: int) -> int:
    """Bytes of one head's K (or V) per token in an NVFP4 cache (nvfp4_kv_cache_full_dim)."""
    return head_size // 2 + head_size // 16


@dataclass(frozen=True)
class KVCacheSpec:
    """One layer's cache on one GPU (per rank), like vLLM's per-layer KVCacheSpec.

    Attention kinds store `num_kv_heads × (head_size + head_size_v) × dtype_bytes` per token;
    MLA stores one latent (`num_kv_heads=1`, `head_size = kv_lora_rank + qk_rope_head_dim`,
    `head_size_v = 0`); `mamba` (Mamba1/2, gated delta-net, linear attention, short conv) stores a
    fixed `state_bytes` per request instead.
    """

    layer: int  # global layer index in the model
    kind: CacheKind
    num_kv_heads: int = 0
    head_size: int = 0
    head_size_v: int = 0
    dtype_bytes: int = 2
    sliding_window: int | None = None
    attention_chunk_size: int | None = None
    state_bytes: int = 0  # mamba: Σ prod(shape) × dtype size over the state tensors (unpadded)
    # DeepSeek-V4's caches (dsv4_specs): a block size of their own (None: the plan's), tokens per stored state
    # (AttentionSpec.tokens_per_state), the page rounded up to `page_alignment` bytes (kv_cache_interface.py:
    # _apply_alignment_padding), a block-outermost KV layout (BLHNC: the packed groups of kv_groups.py), and
    # what the cache is, for the reader.
    block_size: int | None = None
    tokens_per_state: int = 1
    page_alignment: int | None = None
    block_outermost: bool = False
    role: str = ""

    @property
    def is_attention(self) -> bool:
        return self.kind != "mamba"

    @property
    def state_content_bytes(self) -> int:
        """Bytes of one stored state: num_kv_heads × (head_size + head_size_v) × e (AttentionSpec)."""
        return self.num_kv_heads * (self.head_size + self.head_size_v) * self.dtype_bytes

    @property
    def bytes_per_token(self) -> int:
        """K+V bytes one token occupies in this layer (0 for recurrent layers).

        vLLM AttentionSpec.page_size_bytes / block_size = num_kv_heads × (head_size + head_size_v) × e; a
        compressed cache (tokens_per_state > 1) stores one state per tokens_per_state tokens: the average,
        rounded down (its pages are exact, `page_size_bytes`).
        """
        if self.kind == "mamba":
            return 0
        return self.state_content_bytes // self.tokens_per_state

    def page_size_bytes(self, block_size: int) -> int:
        """Bytes of one block of this layer, before any hybrid padding (KVCacheSpec.page_size_bytes): block_size //
        tokens_per_state states, rounded up to the page alignment; a cache with its own block size keeps it."""
        if self.kind == "mamba":
            return self.state_bytes
        states = (self.block_size or block_size) // self.tokens_per_state
        page = states * self.state_content_bytes
        if self.page_alignment:
            page = -(-page // self.page_alignment) * self.page_alignment
        return page


# ---------------------------------------------------------------------------------------------
# From a ModelSpec to per-rank specs
# ---------------------------------------------------------------------------------------------

_DTYPE_SIZE = {"float32": 4, "bfloat16": 2, "float16": 2}


def resolve_kv_cache_dtype(model: ModelSpec, kv_cache_dtype: str = "auto") -> str:
    """What `--kv-cache-dtype` means for this model (config/cache.py, resolve_kv_cache_dtype_string).

    `auto` is the model dtype, unless the checkpoint declares a KV scheme (ModelOpt
    `kv_cache_quant_algo: FP8`, llm-compressor `kv_cache_scheme`), which makes it fp8.
    """
    if kv_cache_dtype not in KV_CACHE_DTYPES:
        from kvplan.errors import InvalidParameter, close_matches

        hint = close_matches(kv_cache_dtype, KV_CACHE_DTYPES)
        raise InvalidParameter(
            f"--kv-cache-dtype {kv_cache_dtype!r} is not one of {', '.join(KV_CACHE_DTYPES)}",
            hint=f"did you mean {hint[0]}?" if hint else None,
        )
    if kv_cache_dtype != "auto":
        return kv_cache_dtype
    if model.quant is not None and model.quant.kv_cache_dtype:
        return model.quant.kv_cache_dtype
    return model.dtype


def recurrent_state_shapes(state: RecurrentState, tp: int) -> tuple[tuple[tuple[int, ...], str], ...]:
    """State tensors (shape, dtype) of one recurrent layer on one TP rank.

    vllm/model_executor/layers/mamba/mamba_utils.py:MambaStateShapeCalculator
    (mamba1_state_shape, mamba2_state_shape, gated_delta_net_state_shape, short_conv_state_shape,
    linear_attention_state_shape).
    """
    k = state.conv_kernel - 1  # the conv state keeps the last (kernel − 1) inputs
    if state.variant == "mamba1":
        d = state.intermediate_size // tp
        return (((d, k), state.conv_dtype), ((d, state.state_size), state.ssm_dtype))
    if state.variant == "mamba2":
        # n_groups that do not divide TP are replicated to the next multiple (extra_groups_for_head_shards).
        groups = state.n_groups
        if groups % tp:
            groups = tp
        conv_dim = state.intermediate_size + 2 * groups * state.state_size
        return (((k, conv_dim // tp), state.conv_dtype),
                ((state.num_heads // tp, state.head_dim, state.state_size), state.ssm_dtype))
    if state.variant == "gdn":
        conv_dim = state.head_k_dim * state.num_k_heads * 2 + state.head_v_dim * state.num_v_heads
        return (((k, conv_dim // tp), state.conv_dtype),
                ((state.num_v_heads // tp, state.head_k_dim, state.head_v_dim), state.ssm_dtype))
    if state.variant == "short_conv":  # LFM2: one conv state of conv_dim / tp channels
        return (((k, state.intermediate_size // tp), state.conv_dtype),)
    if state.variant == "linear_attention":  # MiniMax lightning attention: a head_dim² state per head
        return (((state.num_heads // tp, state.head_dim, state.head_dim), state.conv_dtype),)
    from kvplan.errors import BadConfig

    raise BadConfig(f"recurrent layer variant {state.variant!r} is not understood by kvplan")


def recurrent_state_bytes(state: RecurrentState, tp: int) -> int:
    """Σ prod(shape) × dtype size over the state tensors (MambaSpec.page_size_bytes, unpadded)."""
    total = 0
    for shape, dtype in recurrent_state_shapes(state, tp):
        n = 1
        for dim in shape:
            n *= dim
        total += n * _DTYPE_SIZE[dtype]
    return total


MAMBA_CACHE_DTYPES = ("auto", "float32", "bfloat16", "float16")


FP8_DS_MLA_BYTES = DS_MLA_BYTES["fp8_ds_mla"]
# models/deepseek_v4/attention.py:_resolve_dsv4_kv_cache_dtype, raised while the layers are built.
DSV4_KV_DTYPE_REFUSAL = ("DeepseekV4 fp8_ds_mla layout only supports fp8 kv-cache, got {}. Please set "
                         "`--kv-cache-dtype fp8` or select a backend that supports bfloat16 KV cache.")


def _mla_specs(layer: int, head_size: int, indexer_head_size: int, ds_mla: str | None, e: int) -> list[KVCacheSpec]:
    """MLA's latent (whole on every rank), plus the DSA indexer's uint8 K cache when the model has one
    (deepseek_v2.py:DeepseekV32IndexerCache.get_kv_cache_spec: MLAAttentionSpec, one head). A DSA latent takes
    the `ds_mla` layout (`fp8_ds_mla`, also what FLASHMLA_SPARSE makes of a user's `--kv-cache-dtype fp8`, or
    `nvfp4_ds_mla`); a checkpoint's own fp8 scheme keeps the plain 576-byte fp8 latent
    (FLASHINFER_MLA_SPARSE_SM90) — as vLLM 0.33's CUDA planner lays them (tests/fixtures/oracle-cuda/extra)."""
    if not indexer_head_size:
        return [KVCacheSpec(layer, "mla", num_kv_heads=1, head_size=head_size, head_size_v=0, dtype_bytes=e)]
    latent = (KVCacheSpec(layer, "mla", num_kv_heads=1, head_size=DS_MLA_BYTES[ds_mla], dtype_bytes=1)
              if ds_mla else
              KVCacheSpec(layer, "mla", num_kv_heads=1, head_size=head_size, head_size_v=0, dtype_bytes=e))
    return [latent, KVCacheSpec(layer, "mla", num_kv_heads=1, head_size=indexer_head_size, dtype_bytes=1)]


def _ds_mla_layout(kv_cache_dtype: str) -> str | None:
    """The DSA latent layout a `--kv-cache-dtype` flag gives (mla_attention.py:
    _canonicalize_sparse_mla_kv_cache_dtype: on FLASHMLA_SPARSE an fp8 flag is served as fp8_ds_mla)."""
    if kv_cache_dtype in DS_MLA_BYTES:
        return kv_cache_dtype
    return "fp8_ds_mla" if kv_cache_dtype == "fp8" else None


# DeepSeek-V4 on its FlashMLA path (SM90/SM100; models/deepseek_v4/attention.py:_resolve_dsv4_kv_cache_dtype serves
# `auto` and every fp8 flag as fp8_ds_mla): a state is 448 fp8 NoPE + 64 bf16 RoPE values + 8 B of UE8M0 scales =
# 584 B (DeepseekV4Attention.get_kv_cache_spec: state_content_bytes), and the fp8_ds_mla pages of every DSV4 cache
# are rounded up to 576 B (`alignment=576`).
DSV4_STATE_BYTES = 584
DSV4_PAGE_ALIGNMENT = 576
# v1/attention/backends/mla/sparse_swa.py:DeepseekV4SWACache: block_size=64 tokens.
DSV4_SWA_BLOCK_SIZE = 64
# compressor.py:CompressorStateCache: block 4 (ratio 4) or 8 (ratio 128) float32 rows of 2 × coff × head_dim
# (kv state + score state; coff = 2 for the overlapping ratio-4 compressor), a window of coff × ratio tokens.
DSV4_COMPRESSOR_BLOCK_SIZE = {4: 4, 128: 8}
DSV4_COMPRESSOR_STATE_BYTES = 4
DSV4_SERVED_KV_DTYPES = ("auto", "fp8", "fp8_e4m3", "fp8_e5m2", "fp8_ds_mla")


def _dsv4_compressor_state(layer: int, ratio: int, head_dim: int, role: str) -> KVCacheSpec:
    """One compressor's rolling state (compressor.py:CompressorStateCache.get_kv_cache_spec: SlidingWindowMLASpec)."""
    coff = 2 if ratio == 4 else 1  # DeepseekCompressor: overlap = compress_ratio == 4, coff = 1 + overlap
    return KVCacheSpec(layer, "sliding_window", num_kv_heads=1, head_size=2 * coff * head_dim,
                       dtype_bytes=DSV4_COMPRESSOR_STATE_BYTES, sliding_window=coff * ratio,
                       block_size=DSV4_COMPRESSOR_BLOCK_SIZE[ratio], page_alignment=DSV4_PAGE_ALIGNMENT,
                       block_outermost=True, role=role)


def dsv4_specs(layer: int, ratio: int, window: int, head_dim: int, indexer_head_size: int,
               index_head_dim: int) -> list[KVCacheSpec]:
    """A DeepSeek-V4 layer's caches, in the order the layer registers them (vllm/models/deepseek_v4/):

    * the sliding window (sparse_swa.py:DeepseekV4SWACache): `window` tokens, 64-token blocks, 584 B a token;
    * ratio 4 or 128: the compressed latent (attention.py:DeepseekV4Attention.get_kv_cache_spec, MLAAttentionSpec
      with tokens_per_state = ratio, the plan's block size) and its compressor's state;
    * ratio 4: the indexer's K cache (attention.py:DeepseekV4IndexerCache, `indexer_head_size` uint8 a state,
      tokens_per_state 4) and the indexer compressor's state (head_dim = index_head_dim).

    Every one is whole on every TP rank (num_kv_heads=1, max_tp_shards=1) and laid out block-outermost (the DSV4
    backends declare BLHNC: v1/core/kv_cache_planning.py:_get_packed_kv_cache_groups packs their pages)."""
    specs = [KVCacheSpec(layer, "sliding_window", num_kv_heads=1, head_size=DSV4_STATE_BYTES, dtype_bytes=1,
                         sliding_window=window, block_size=DSV4_SWA_BLOCK_SIZE, page_alignment=DSV4_PAGE_ALIGNMENT,
                         block_outermost=True, role="sliding window")]
    if ratio > 1:
        specs.append(KVCacheSpec(layer, "mla", num_kv_heads=1, head_size=DSV4_STATE_BYTES, dtype_bytes=1,
                                 tokens_per_state=ratio, page_alignment=DSV4_PAGE_ALIGNMENT, block_outermost=True,
                                 role=f"compressed latent (1 per {ratio} tokens)"))
        specs.append(_dsv4_compressor_state(layer, ratio, head_dim, "compressor state"))
    if indexer_head_size:
        specs.append(KVCacheSpec(layer, "mla", num_kv_heads=1, head_size=indexer_head_size, dtype_bytes=1,
                                 tokens_per_state=ratio, page_alignment=DSV4_PAGE_ALIGNMENT, block_outermost=True,
                                 role="indexer K cache"))
        specs.append(_dsv4_compressor_state(layer, ratio, index_head_dim, "indexer compressor state"))
    return specs


def kv_cache_specs(
    model: ModelSpec,
    *,
    tp: int = 1,
    pp: int = 1,
    kv_cache_dtype: str = "auto",
    mamba_cache_dtype: str = "auto",
    mamba_ssm_cache_dtype: str = "auto",
) -> list[list[KVCacheSpec]]:
    """Per-layer KV specs for each pipeline stage (worker), per TP rank.

    KV heads per rank: max(1, total // tp) (ModelConfig.get_num_kv_heads); MLA keeps its one latent
    whole on every rank. Layers without a cache of their own (KV sharing, MLP-only) get no spec
    (v1/worker/gpu/attn_utils.py:get_kv_cache_spec). `mamba_cache_dtype` / `mamba_ssm_cache_dtype` are
    vLLM's `--mamba-cache-dtype` / `--mamba-ssm-cache-dtype` (conv and SSM state; `auto` keeps the
    model's default, MambaStateDtypeCalculator).
    """
    from dataclasses import replace

    from kvplan.errors import InvalidParameter

    for flag, value in (("--mamba-cache-dtype", mamba_cache_dtype), ("--mamba-ssm-cache-dtype", mamba_ssm_cache_dtype)):
        if value not in MAMBA_CACHE_DTYPES:
            raise InvalidParameter(f"{flag} {value!r} is not one of {', '.join(MAMBA_CACHE_DTYPES)}")

    check_tensor_parallel(model, tp)
    if pp < 1 or pp > model.num_layers:
        raise InvalidParameter(f"--pipeline-parallel-size must be between 1 and {model.num_layers}, got {pp}")
    dtype = resolve_kv_cache_dtype(model, kv_cache_dtype)
    e = KV_DTYPE_BYTES[dtype]
    stages = []
    for rng in pp_layer_ranges(model.num_layers, pp):
        specs: list[KVCacheSpec] = []
        for i in rng:
            layer = model.layers[i]
            if layer.kind in ("kv_shared", "mlp_only"):
                continue
            if layer.kind == "mamba":
                assert layer.state is not None
                state = layer.state
                if mamba_cache_dtype != "auto":
                    state = replace(state, conv_dtype=mamba_cache_dtype)
                if mamba_ssm_cache_dtype != "auto":
                    state = replace(state, ssm_dtype=mamba_ssm_cache_dtype)
                specs.append(KVCacheSpec(i, "mamba", state_bytes=recurrent_state_bytes(state, tp)))
            elif layer.compress_ratio:
                if kv_cache_dtype not in DSV4_SERVED_KV_DTYPES:
                    raise InvalidParameter(DSV4_KV_DTYPE_REFUSAL.format(kv_cache_dtype))
                assert model.dsv4 is not None
                specs.extend(dsv4_specs(i, layer.compress_ratio, layer.sliding_window or 0, layer.head_size,
                                        layer.indexer_head_size, model.dsv4.index_head_dim))
            elif layer.kind == "mla":
                specs.extend(_mla_specs(i, layer.head_size, layer.indexer_head_size,
                                        _ds_mla_layout(kv_cache_dtype), e))
            else:
                kind: CacheKind = layer.kind  # type: ignore[assignment]  # attention kinds only here
                head_size, head_size_v = layer.head_size, layer.head_size_v
                if dtype in NVFP4_KV_DTYPES:
                    head_size, head_size_v = nvfp4_kv_head_bytes(head_size), nvfp4_kv_head_bytes(head_size_v)
                specs.append(KVCacheSpec(
                    i, kind, num_kv_heads=max(1, layer.num_kv_heads // tp), head_size=head_size,
                    head_size_v=head_size_v, dtype_bytes=e, sliding_window=layer.sliding_window,
                    attention_chunk_size=layer.attention_chunk_size,
                ))
        stages.append(specs)
    return stages
