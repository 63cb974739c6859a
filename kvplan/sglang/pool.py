"""SGLang 0.5.23's token pool: what a KV byte budget buys (paths relative to `sglang/srt/`).

    cell   = kv_heads(attn_tp) × (head_dim + v_head_dim) × layers × e       (MHA / GQA / MQA)
           = (kv_lora_rank + qk_rope_head_dim) × layers × e                (MLA: one latent, every TP rank)
    tokens = budget // cell // page × page, then min(--max-total-tokens)
    reqs   = min(clamp(int(tokens / context_len × 512), 2048, 4096), tokens // 2)   (per attention-DP worker)
    rows   = tokens + page                (the padding page for dummy writes)

Dense full-attention and MLA models only; the sliding-window (HybridSWAPoolConfigurator), Mamba
(_handle_max_mamba_cache), DSA-indexer, FP4 and DeepSeek-V4 pools are refused by `pool_kind`.
Pure: numbers in, numbers out.
"""
from __future__ import annotations

from dataclasses import dataclass

from kvplan.errors import InvalidParameter
from kvplan.model.architectures import gemma_line, model_types_where
from kvplan.model.spec import ModelSpec

GiB = 1 << 30  # mem_cache/memory_pool.py: GB = 1024**3 (SGLang's "GB" are GiB)

# mem_cache/kv_cache_dtype.py:configure_kv_cache_dtype and arg_groups/fields/model.py choices: element bytes.
KV_DTYPE_BYTES = {"bfloat16": 2, "float16": 2, "float32": 4, "fp8_e4m3": 1, "fp8_e5m2": 1, "bf16": 2}
# The torch dtype SGLang's log prints for each (CUDA; mem_cache/kv_cache_dtype.py).
KV_DTYPE_TORCH = {"bfloat16": "torch.bfloat16", "bf16": "torch.bfloat16", "float16": "torch.float16",
                  "float32": "torch.float32", "fp8_e4m3": "torch.float8_e4m3fn", "fp8_e5m2": "torch.float8_e5m2"}

# configs/model_config.py:is_hybrid_swa_model's allowlist (plus SWA_SINK_ARCHS: gpt-oss; MiMo-V2).
HYBRID_SWA_ARCHITECTURES = frozenset({
    "BeamForCausalLM", "Llama4ForConditionalGeneration", "DeepseekV4ForCausalLM", "GptOssForCausalLM",
    "MiMoV2FlashForCausalLM", "Step3p5ForCausalLM", "Step3p7ForConditionalGeneration", "Gemma4ForCausalLM",
    "Gemma4ForConditionalGeneration", "EmbeddingGemma2Model", "Gemma4UnifiedForConditionalGeneration",
    "LagunaForCausalLM", "MellumForCausalLM", "MuseGlimmerForCausalLM", "MuseGlimmerForConditionalGeneration",
    "InklingForConditionalGeneration", "UnlimitedOCRForCausalLM",
})


@dataclass(frozen=True)
class PoolGeometry:
    """Per-token KV geometry of one attention-TP rank, as DefaultPoolConfigurator sees it."""

    kind: str  # "mha" or "mla"
    layers: int
    kv_heads: int  # per rank (1 for MLA)
    head_dim: int  # K width (MLA: kv_lora_rank + qk_rope_head_dim)
    v_head_dim: int  # V width (0 for MLA: one KV buffer)
    dtype: str  # kv cache dtype name (bfloat16, fp8_e4m3, ...)
    element_bytes: int

    @property
    def cell_bytes(self) -> int:
        """pool_configurator.py:DefaultPoolConfigurator._compute_cell_size."""
        if self.kind == "mla":
            return self.head_dim * self.layers * self.element_bytes
        return self.kv_heads * (self.head_dim + self.v_head_dim) * self.layers * self.element_bytes


def unsupported_reason(spec: ModelSpec) -> str | None:
    """Why this slice cannot size the model's pool as SGLang does (None: a dense or MLA pool)."""
    kinds = {layer.kind for layer in spec.layers}
    if spec.architectures and spec.architectures[0] in HYBRID_SWA_ARCHITECTURES:
        return (f"{spec.architectures[0]} gets SGLang's sliding-window pool (pool_configurator.py:"
                "HybridSWAPoolConfigurator), not modelled yet")
    if "mamba" in kinds:
        return ("a Mamba / linear-attention hybrid: SGLang carves its state out of the budget "
                "(kv_cache_configurator.py:_handle_max_mamba_cache), not modelled yet")
    if kinds - {"full", "sliding_window", "mla"}:
        return f"layers of kind {', '.join(sorted(kinds - {'full', 'sliding_window', 'mla'}))} are not modelled yet"
    if any(layer.indexer_head_size for layer in spec.layers):
        return "a DeepSeek sparse-attention (DSA) model: its indexer pool is not modelled yet"
    return None


_STR_DTYPES = {"half": "float16", "float16": "float16", "float": "float32", "float32": "float32",
               "bfloat16": "bfloat16"}


def model_dtype(spec: ModelSpec) -> str:
    """configs/model_config.py:_get_and_verify_dtype under --dtype auto: the config's dtype / torch_dtype;
    float32 or none is served as float16 (bfloat16 for gemma model types). Not vLLM's rule: a float16
    checkpoint stays float16."""
    value = spec.facts.spelt.dtype or spec.config_dtype
    dtype = _STR_DTYPES.get(value) if isinstance(value, str) else None
    if dtype in (None, "float32"):
        return "bfloat16" if gemma_line(spec.facts.spelt.model_type or "") else "float16"
    return dtype


def kv_dtype_name(given: str, spec: ModelSpec) -> str:
    """mem_cache/kv_cache_dtype.py:configure_kv_cache_dtype: `auto` is the model dtype unless the checkpoint
    declares an FP8 KV cache (kv_cache_quant_algo FP8); fp8_e4m3 / fp8_e5m2 / bf16 as given."""
    value = given.lower()
    if value == "auto":
        declared = spec.quant.kv_cache_dtype if spec.quant else None
        return "fp8_e4m3" if declared and declared.startswith("fp8") else model_dtype(spec)
    if value in ("fp8_e4m3", "fp8_e5m2", "bf16", "bfloat16", "float16"):
        return "bfloat16" if value == "bf16" else value
    raise InvalidParameter(f"--kv-cache-dtype {given!r} is not modelled for SGLang",
                           hint="auto, bf16, fp8_e4m3 or fp8_e5m2 (mxfp8 / nvfp4 / fp4_mx_block16 are not yet)")


def geometry(spec: ModelSpec, *, attn_tp: int, kv_dtype: str) -> PoolGeometry:
    """The geometry DefaultPoolConfigurator sizes from. Every non-MLA layer counts as a full-attention layer
    (a sliding window outside HYBRID_SWA_ARCHITECTURES gets no pool of its own in SGLang; Gemma-2/3 turn
    theirs off: arg_groups/model_overrides/gemma2_gemma3.py). KV heads per rank are max(1, heads // attn_tp)
    (configs/model_config.py:ModelConfig.get_num_kv_heads)."""
    e = KV_DTYPE_BYTES[kv_dtype]
    layers = len(spec.layers)  # layer_info.num_effective_layers (PP 1)
    if spec.mla is not None:
        # kv_cache_configurator.py:calculate_mla_kv_cache_dim (non-DSA): kv_lora_rank + qk_rope_head_dim.
        width = spec.mla.kv_lora_rank + spec.mla.qk_rope_head_dim
        return PoolGeometry("mla", layers, 1, width, 0, kv_dtype, e)
    layer = next(x for x in spec.layers if x.kind in ("full", "sliding_window"))
    heads = max(1, layer.num_kv_heads // attn_tp)
    return PoolGeometry("mha", layers, heads, layer.head_size, layer.head_size_v or layer.head_size, kv_dtype, e)


@dataclass(frozen=True)
class TokenPool:
    """The pool SGLang builds from a byte budget, and what it logs."""

    budget_bytes: int
    cell_bytes: int
    page_size: int
    max_total_num_tokens: int
    max_running_requests: int
    context_len: int
    k_bytes: int  # MLA: the one KV buffer
    v_bytes: int  # 0 for MLA
    log_line: str  # "KV Cache is allocated. dtype: …, #tokens: N, K size: … GB, V size: … GB"
    banner: str  # the scheduler's "max_total_num_tokens=…, … max_running_requests=…" fields it can state
    warnings: tuple[str, ...] = ()


NOT_ENOUGH_MEMORY = "Not enough memory. Please try to increase --mem-fraction-static."


def max_running_requests(tokens: int, context_len: int, given: int | None, attn_dp_size: int) -> int:
    """mem_cache/kv_cache_configurator.py:KVCacheConfigurator.resolve_max_num_reqs (no Mamba): per DP worker."""
    estimated = max(min(int(tokens / context_len * 512), 4096), 2048)
    if given is not None:
        return min(max(1, given // attn_dp_size), tokens // 2)
    return min(estimated, tokens // 2)


def size_pool(geo: PoolGeometry, budget_bytes: int, *, page_size: int, context_len: int,
              max_total_tokens: int | None = None, max_running: int | None = None, attn_dp_size: int = 1,
              chunked_prefill_size: int = 8192, max_prefill_tokens: int = 16384) -> TokenPool:
    """DefaultPoolConfigurator.calculate_pool_sizes, KVCacheConfigurator._apply_token_constraints and
    resolve_max_num_reqs, then the K/V byte counts memory_pool.py:KVCache._finalize_allocation_log sums.
    Raises InvalidParameter with SGLang's words when no token fits
    (pool_configurator.py:MemoryPoolConfig.__post_init__)."""
    cell = geo.cell_bytes
    tokens = max(budget_bytes, 0) // cell // page_size * page_size
    warnings: list[str] = []
    if max_total_tokens is not None and max_total_tokens < tokens:
        tokens = max_total_tokens // page_size * page_size  # calculate_pool_sizes_from_max_tokens
    elif max_total_tokens is not None:
        warnings.append(f"max_total_tokens={max_total_tokens} is larger than the profiled value {tokens}. "
                        f"Use the profiled value instead.")
    if tokens <= 0:
        raise InvalidParameter(NOT_ENOUGH_MEMORY)
    reqs = max_running_requests(tokens, context_len, max_running, attn_dp_size)
    rows = tokens + page_size
    if geo.kind == "mla":
        k, v = rows * geo.layers * geo.head_dim * geo.element_bytes, 0
        sizes = f"KV size: {k / GiB:.2f} GB"
    else:
        k = rows * geo.layers * geo.kv_heads * geo.head_dim * geo.element_bytes
        v = rows * geo.layers * geo.kv_heads * geo.v_head_dim * geo.element_bytes
        sizes = f"K size: {k / GiB:.2f} GB, V size: {v / GiB:.2f} GB"
    dtype = KV_DTYPE_TORCH.get(geo.dtype, geo.dtype)
    log = f"KV Cache is allocated. dtype: {dtype}, #tokens: {tokens}, {sizes}"
    if tokens < context_len:
        warnings.append(f"the pool ({tokens} tokens) is smaller than context_len {context_len} "
                        "(managers/tp_worker.py:TpModelWorker.get_worker_info)")
    banner = (f"max_total_num_tokens={tokens}, chunked_prefill_size={chunked_prefill_size}, "
              f"max_prefill_tokens={max_prefill_tokens}, max_running_requests={reqs}, context_len={context_len}")
    return TokenPool(budget_bytes, cell, page_size, tokens, reqs, context_len, k, v, log, banner, tuple(warnings))


# transformers configs whose attribute_map reads max_position_embeddings from n_positions (GPT2Config,
# GPTBigCodeConfig, CodeGenConfig, GPTJConfig, OpenAIGPTConfig): getattr(config, "max_position_embeddings") in
# get_context_length then finds n_positions. The families that say so (n_positions_alias): kvplan/model/architectures/.


def context_length(spec: ModelSpec, given: int | None) -> int:
    """configs/model_config.py:ModelConfig._derive_context_length with
    utils/hf_transformers/common.py:get_context_length on the text config: the first of max_sequence_length,
    seq_length, max_seq_len, model_max_length, max_position_embeddings, times rope_scaling's factor unless it
    has original_max_position_embeddings or is llama3 rope; 2048 if none. A larger --context-length is refused
    (without SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN), as SGLang refuses it."""
    s = spec.facts.spelt
    factor: float = 1
    if s.rope_scaling:
        factor = s.rope_factor
        if s.rope_has_original or s.rope_type == "llama3":
            factor = 1
    text = dict(s.lengths)
    if s.model_type in model_types_where("n_positions_alias") and not s.has_max_position_embeddings:
        text["max_position_embeddings"] = text.pop("n_positions", None)  # type: ignore[arg-type]
    derived = 2048
    for key in ("max_sequence_length", "seq_length", "max_seq_len", "model_max_length", "max_position_embeddings"):
        value = text.get(key)
        if value is not None:
            derived = int(factor * value)
            break
    if given is None:
        return derived
    if given > derived:
        raise InvalidParameter(
            f"User-specified context_length ({given}) is greater than the derived context_length ({derived}).",
            hint="SGLang refuses it unless SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN=1")
    return given
