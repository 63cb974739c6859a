"""SGLang 0.5.23's token pool: what a KV byte budget buys (paths relative to `sglang/srt/`).

    cell   = kv_heads(attn_tp) × (head_dim + v_head_dim) × layers × e       (MHA / GQA / MQA)
           = (kv_lora_rank + qk_rope_head_dim) × layers × e                (MLA: one latent, every TP rank)
    tokens = budget // cell // page × page, then min(--max-total-tokens)
    reqs   = min(clamp(int(tokens / context_len × 512), 2048, 4096), tokens // 2)   (per attention-DP worker)
    rows   = tokens + page                (the padding page for dummy writes)

Dense full-attention, MLA and (with `kvplan.sglang.mamba`) Mamba-hybrid pools, whose KV cells count only the
full-attention layers, the sliding-window (`kvplan.sglang.swa`), DSA-indexer (`kvplan.sglang.dsa`) and DeepSeek-V4
(`kvplan.sglang.dsv4`: DSV4PoolConfigurator) pools; what is not modelled is refused by `unsupported_reason`.
Pure: numbers in, numbers out.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from kvplan.errors import BadConfig, InvalidParameter
from kvplan.model.architectures import gemma_line, model_types_where
from kvplan.model.spec import ModelSpec
from kvplan.sglang.dsa import indexer_bytes_per_token, indexer_row_bytes, is_dsa, latent_row_bytes
from kvplan.sglang.dsv4 import Dsv4Part, Dsv4Sizes, dsv4_part, is_dsv4, size_dsv4
from kvplan.sglang.dsv4 import kv_dtype as dsv4_kv_dtype
from kvplan.sglang.dsv4 import log_lines as dsv4_log_lines
from kvplan.sglang.kv_quant import row_bytes
from kvplan.sglang.mamba import MambaCache, mamba_state, state_cap_text
from kvplan.sglang.speculative import draft_cell_bytes
from kvplan.sglang.swa import SwaPart, sliding_window_size, split_layers, swa_part, swa_pool_too_small_text

GiB = 1 << 30  # mem_cache/memory_pool.py: GB = 1024**3 (SGLang's "GB" are GiB)

# mem_cache/kv_cache_dtype.py:configure_kv_cache_dtype and arg_groups/fields/model.py choices: element bytes.
# mxfp8 / nvfp4 / fp4_mx_block16: torch.float8_e4m3fn and torch.float4_e2m1fn_x2 (two values a byte), scales
# added per row by kvplan.sglang.kv_quant.row_bytes.
KV_DTYPE_BYTES = {"bfloat16": 2, "float16": 2, "float32": 4, "fp8_e4m3": 1, "fp8_e5m2": 1, "bf16": 2, "mxfp8": 1,
                  "nvfp4": 1, "fp4_mx_block16": 1}
# The torch dtype SGLang's log prints for each (CUDA; mem_cache/kv_cache_dtype.py).
KV_DTYPE_TORCH = {"bfloat16": "torch.bfloat16", "bf16": "torch.bfloat16", "float16": "torch.float16",
                  "float32": "torch.float32", "fp8_e4m3": "torch.float8_e4m3fn", "fp8_e5m2": "torch.float8_e5m2",
                  "mxfp8": "torch.float8_e4m3fn", "nvfp4": "torch.float4_e2m1fn_x2",
                  "fp4_mx_block16": "torch.float4_e2m1fn_x2"}

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
    swa: SwaPart | None = None  # a hybrid SWA model's sliding side (the fields above are then its full side)
    indexer_bytes: int = 0  # DSA: the index-K bytes per token (all layers), in the same rows
    indexer_row_bytes: int = 0  # DSA: one layer's index-K bytes per token (an MTP draft's layers each hold one)
    fnuz: bool = False  # fp8 on gfx942 (MI300X / MI325X): torch.float8_e4m3fnuz in the log
    draft_layers: int = 0  # an EAGLE/STANDALONE draft's KV layers, priced at the target's (kvplan.sglang.speculative)
    draft_swa_layers: int = 0  # a hybrid SWA target: those of the draft's layers in the sliding pool (eagle_draft_swa…)
    dsv4: Dsv4Part | None = None  # DeepSeek-V4 (kind "dsv4"): DSV4PoolConfigurator's geometry, kvplan.sglang.dsv4

    @property
    def cell_bytes(self) -> int:
        """DefaultPoolConfigurator's _cell_size: the target's (_compute_cell_size) plus an EAGLE/STANDALONE draft's
        int(cell × draft_layers / layers) (DefaultPoolConfigurator.__init__; a hybrid SWA model: the full side)."""
        target = self.target_cell_bytes
        if self.swa is not None:  # HybridSWAPoolConfigurator._full_cell_bytes: the draft's full rows, target-priced
            return target + target // self.layers * self.draft_full_layers if self.layers else target
        return target + draft_cell_bytes(target, layers=self.layers, draft_layers=self.draft_layers,
                                         indexer_bytes=self.indexer_bytes, indexer_row_bytes=self.indexer_row_bytes)

    @property
    def draft_full_layers(self) -> int:
        """HybridSWAPoolConfigurator.__init__: the draft's layers less its sliding ones (_draft_full_layers_num;
        no mtp_local_layer_ids: Inkling's is refused)."""
        return self.draft_layers - min(max(self.draft_swa_layers, 0), self.draft_layers)

    @property
    def target_cell_bytes(self) -> int:
        """pool_configurator.py:DefaultPoolConfigurator._compute_cell_size (a hybrid SWA model: the full side;
        DeepSeek-V4: DSV4PoolConfigurator's bytes_per_full_token rounded up, the float being `cell_size`)."""
        if self.dsv4 is not None:
            return -int(-self.dsv4.bytes_per_full_token // 1)
        if self.kind == "mla":
            return self.head_dim * self.layers * self.element_bytes + self.indexer_bytes
        e = self.element_bytes
        return self.kv_heads * (row_bytes(self.dtype, self.head_dim, e) + row_bytes(self.dtype, self.v_head_dim, e)) \
            * self.layers

    @property
    def cell_size(self) -> float:
        """The configurator's _cell_size: cell_bytes, or HybridSWAPoolConfigurator._recompute_cell_size's
        full cell + swa_full_tokens_ratio × the sliding cell (a float); DeepSeek-V4: bytes_per_full_token."""
        if self.dsv4 is not None:
            return self.dsv4.bytes_per_full_token
        if self.swa is None:
            return self.cell_bytes
        # _recompute_cell_size: full cell + ratio × swa_per_token × (the target's + the draft's sliding layers)
        swa_layers = self.swa.layers + min(max(self.draft_swa_layers, 0), self.draft_layers)
        return self.cell_bytes + self.swa.ratio * (self.swa.per_token(self.element_bytes) * swa_layers)


# models/gemma4_mtp.py: Gemma-4's MTP draft. Served as a model of its own, SGLang sizes a plain pool for it
# (DefaultPoolConfigurator; the architecture is not a hybrid-SWA one) with every layer at the full-attention shape,
# then its first forward (the CUDA-graph capture, or the warmup request) raises GEMMA4_ASSISTANT_FORWARD: only the
# speculative worker calls set_embed_and_head with the target's embedding.
GEMMA4_ASSISTANT = "Gemma4AssistantForCausalLM"
GEMMA4_ASSISTANT_FORWARD = "Gemma4AssistantForCausalLM requires set_embed_and_head() before token-id forward."


def unsupported_reason(spec: ModelSpec, *, attn_tp: int = 1, tp: int = 1) -> str | None:
    """Why this slice cannot size the model's pool as SGLang does (None: a dense, MLA, sliding-window hybrid or
    modelled Mamba pool)."""
    kinds = {layer.kind for layer in spec.layers}
    arch = spec.architectures[0] if spec.architectures else ""
    hybrid_swa = split_layers(spec) is not None
    if arch == "DeepseekV4ForCausalLM":
        return None if is_dsv4(spec) else f"{arch} without DeepSeek-V4's compressed-attention config"
    if arch in HYBRID_SWA_ARCHITECTURES and not hybrid_swa:
        return (f"{arch} gets SGLang's sliding-window pool (pool_configurator.py:HybridSWAPoolConfigurator) in a "
                "form not modelled yet")
    if arch == GEMMA4_ASSISTANT:
        return None if spec.facts.sglang.gemma4_full_attention else f"{arch} without a full-attention layer"
    if "mamba" in kinds and mamba_state(spec, attn_tp=attn_tp, tp=tp) is None:
        return ("recurrent layers of a family kvplan does not map to SGLang's state classes "
                "(configs/hybrid_arch.py:mambaish_config), not modelled yet")
    allowed = {"full", "sliding_window", "mla"} | ({"mamba", "mlp_only"} if "mamba" in kinds else set())
    allowed |= {"chunked_local", "kv_shared"} if hybrid_swa else set()
    if kinds - allowed:
        return f"layers of kind {', '.join(sorted(kinds - allowed))} are not modelled yet"
    if any(layer.indexer_head_size for layer in spec.layers) and not is_dsa(spec):
        return "a sparse-attention indexer outside SGLang's DSA architectures is not modelled yet"
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
    """mem_cache/kv_cache_dtype.py:configure_kv_cache_dtype: `auto` is the model dtype unless the model's
    quant_config.kv_cache_quant_algo is FP8: hf_quant_config.json's kv_cache_quant_algo, or a flat ModelOpt
    config's kv_cache_scheme {type: float, num_bits: 8} (layers/quantization/modelopt_quant.py:
    ModelOptFp4Config.from_config; a 4-bit scheme gives "auto" / "NVFP4", which configure_kv_cache_dtype leaves at
    the model dtype); fp8_e4m3 / fp8_e5m2 / bf16 as given."""
    value = given.lower()
    if is_dsv4(spec):
        return dsv4_kv_dtype(given)
    if value == "auto":
        declared = spec.quant.kv_cache_dtype if spec.quant else None
        # SGLang reads hf_quant_config.json whatever its producer (ModelConfig._parse_quant_hf_config).
        fp8 = (declared or "").startswith("fp8") or spec.checkpoint_kv_quant_algo == "FP8"
        return "fp8_e4m3" if fp8 else model_dtype(spec)
    if value in ("fp8_e4m3", "fp8_e5m2", "bf16", "bfloat16", "float16", "mxfp8", "nvfp4", "fp4_mx_block16"):
        return "bfloat16" if value == "bf16" else value
    raise InvalidParameter(f"--kv-cache-dtype {given!r} is not modelled for SGLang",
                           hint="auto, bf16, fp8_e4m3, fp8_e5m2, mxfp8, nvfp4 or fp4_mx_block16")


def geometry(spec: ModelSpec, *, attn_tp: int, kv_dtype: str, sm_major: int | None = None,
             hip: bool = False, swa_ratio: float | None = None, disable_hybrid_swa: bool = False) -> PoolGeometry:
    """The geometry DefaultPoolConfigurator sizes from. Every non-MLA layer counts as a full-attention layer
    (a sliding window outside HYBRID_SWA_ARCHITECTURES gets no pool of its own in SGLang; Gemma-2/3 turn
    theirs off: arg_groups/model_overrides/gemma2_gemma3.py). KV heads per rank are max(1, heads // attn_tp)
    (configs/model_config.py:ModelConfig.get_num_kv_heads)."""
    e = KV_DTYPE_BYTES[kv_dtype]
    layers = len(spec.layers)  # layer_info.num_effective_layers (PP 1)
    full_shape = spec.facts.sglang.gemma4_full_attention
    if is_dsv4(spec):  # DSV4PoolConfigurator (kvplan.sglang.dsv4): one latent head on every rank
        part = dsv4_part(spec, swa_ratio=swa_ratio)
        return PoolGeometry("dsv4", part.layers, 1, part.head_dim, 0, kv_dtype, e, dsv4=part)
    if spec.architectures[:1] == (GEMMA4_ASSISTANT,) and full_shape:  # every layer at the full shape (see above)
        head, kv = full_shape
        return PoolGeometry("mha", layers, max(1, kv // attn_tp), head, head, kv_dtype, e)
    split = split_layers(spec)
    if split is not None and disable_hybrid_swa:
        # --disable-hybrid-swa-memory: configs/model_config.py:_derive_hybrid_model leaves is_hybrid_swa off, so
        # DefaultPoolConfigurator._compute_cell_size sizes every layer at the model config's shape: the full side's
        # (Gemma-4: its global_head_dim and global KV heads; oracle runs …__disable-hybrid-swa-memory)
        full, swa = split
        heads = max(1, full[0].num_kv_heads // attn_tp)
        return PoolGeometry("mha", len(full) + len(swa), heads, full[0].head_size,
                            full[0].head_size_v or full[0].head_size, kv_dtype, e)
    if split is not None:  # HybridSWAPoolConfigurator: the full side here, the sliding side in `swa`
        full, swa = split
        heads = max(1, full[0].num_kv_heads // attn_tp)
        return PoolGeometry("mha", len(full), heads, full[0].head_size, full[0].head_size_v or full[0].head_size,
                            kv_dtype, e, swa_part(swa, attn_tp=attn_tp, window=sliding_window_size(spec),
                                                       ratio=swa_ratio))
    if any(x.kind == "mamba" for x in spec.layers):
        # DefaultPoolConfigurator.__init__: a mambaish model counts its full_attention_layer_ids only; a pure
        # Mamba model has none (cell 0).
        full = [x for x in spec.layers if x.kind in ("full", "sliding_window")]
        if not full:
            return PoolGeometry("mha", 0, 1, 0, 0, kv_dtype, e)
        heads = max(1, full[0].num_kv_heads // attn_tp)
        return PoolGeometry("mha", len(full), heads, full[0].head_size, full[0].head_size_v or full[0].head_size,
                            kv_dtype, e)
    if spec.mla is not None:
        # kv_cache_configurator.py:calculate_mla_kv_cache_dim (non-DSA): kv_lora_rank + qk_rope_head_dim.
        width = spec.mla.kv_lora_rank + spec.mla.qk_rope_head_dim
        if is_dsa(spec):  # the DSA row (kvplan.sglang.dsa) and its index-K in the same pool rows
            width = latent_row_bytes(spec, kv_dtype=kv_dtype, element_bytes=e, sm_major=sm_major, hip=hip) // e
            return PoolGeometry("mla", layers, 1, width, 0, kv_dtype, e,
                                indexer_bytes=indexer_bytes_per_token(spec, layers),
                                indexer_row_bytes=indexer_row_bytes(spec))
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
    log_lines: tuple[str, ...] = ()  # every `KV Cache is allocated` line (a hybrid SWA model: full, then sliding)
    swa_tokens: int = 0  # a hybrid SWA model's sliding pool (swa_layer_tokens)
    dsv4: Dsv4Sizes | None = None  # DeepSeek-V4's pool sizes (full, SWA, c4, c128, states)


NOT_ENOUGH_MEMORY = "Not enough memory. Please try to increase --mem-fraction-static."


def max_running_requests(tokens: int, context_len: int, given: int | None, attn_dp_size: int) -> int:
    """mem_cache/kv_cache_configurator.py:KVCacheConfigurator.resolve_max_num_reqs (no Mamba): per DP worker."""
    estimated = max(min(int(tokens / context_len * 512), 4096), 2048)
    if given is not None:
        return min(max(1, given // attn_dp_size), tokens // 2)
    return min(estimated, tokens // 2)


@dataclass(frozen=True)
class PoolLimits:
    """The resolved server arguments SGLang's pool configurator applies to the profiled token count: the page, the
    context length, --max-total-tokens and --max-running-requests as given (None: not given), the attention-DP
    groups, and the two prefill sizes its banner prints (sglang/defaults.py:ServerDefaults resolves them; the
    defaults here are SGLang's for an H100-class GPU)."""

    page_size: int
    context_len: int
    max_total_tokens: int | None = None
    max_running: int | None = None
    attn_dp_size: int = 1
    chunked_prefill_size: int = 8192
    max_prefill_tokens: int = 16384


def size_pool(geo: PoolGeometry, budget_bytes: int, limits: PoolLimits, *, mamba: MambaCache | None = None,
              sync_tokens: int | None = None) -> TokenPool:
    """DefaultPoolConfigurator.calculate_pool_sizes, KVCacheConfigurator._apply_token_constraints and
    resolve_max_num_reqs (capped at the Mamba state slots // ratio for a hybrid), then the K/V byte counts
    memory_pool.py:KVCache._finalize_allocation_log sums. Raises InvalidParameter with SGLang's words when no
    token fits (pool_configurator.py:MemoryPoolConfig.__post_init__) or no request has state slots."""
    if geo.dsv4 is not None:
        return _size_dsv4_pool(geo.dsv4, budget_bytes, context_len=limits.context_len,
                               max_total_tokens=limits.max_total_tokens, max_running=limits.max_running,
                               attn_dp_size=limits.attn_dp_size, chunked_prefill_size=limits.chunked_prefill_size,
                               max_prefill_tokens=limits.max_prefill_tokens)
    page_size, context_len, max_total_tokens = limits.page_size, limits.context_len, limits.max_total_tokens
    cell = geo.cell_bytes
    if geo.swa is not None:  # HybridSWAPoolConfigurator.calculate_pool_sizes: int(budget // the float cell)
        tokens = int(max(budget_bytes, 0) // geo.cell_size) // page_size * page_size
    elif cell:
        tokens = max(budget_bytes, 0) // cell // page_size * page_size
    else:  # no full-attention layer: _zero_kv_max_tokens = --max-total-tokens or context_len
        tokens = (max_total_tokens or context_len) // page_size * page_size
    warnings: list[str] = []
    if max_total_tokens is not None and max_total_tokens < tokens:
        tokens = max_total_tokens // page_size * page_size  # calculate_pool_sizes_from_max_tokens
    elif max_total_tokens is not None:
        warnings.append(f"max_total_tokens={max_total_tokens} is larger than the profiled value {tokens}. "
                        f"Use the profiled value instead.")
    if sync_tokens is not None:  # _apply_token_constraints: the MIN over PP stages (kvplan.sglang.pp)
        tokens = min(tokens, sync_tokens)
    if tokens <= 0:
        raise InvalidParameter(NOT_ENOUGH_MEMORY)
    reqs = max_running_requests(tokens, context_len, limits.max_running, limits.attn_dp_size)
    if mamba is not None:
        reqs = min(reqs, mamba.max_mamba_cache_size // mamba.ratio)
        if reqs <= 0:
            raise InvalidParameter(state_cap_text(mamba.max_mamba_cache_size, mamba.ratio, reqs))
    swa_tokens, swa_line = _swa_pool_line(geo, tokens, page_size)
    rows = tokens + page_size
    if geo.kind == "mla":
        k, v = rows * geo.target_cell_bytes, 0  # DSA: the index-K buffer is in the summed nbytes too
        sizes = f"KV size: {k / GiB:.2f} GB"
    else:
        k = rows * geo.layers * geo.kv_heads * row_bytes(geo.dtype, geo.head_dim, geo.element_bytes)
        v = rows * geo.layers * geo.kv_heads * row_bytes(geo.dtype, geo.v_head_dim, geo.element_bytes)
        sizes = f"K size: {k / GiB:.2f} GB, V size: {v / GiB:.2f} GB"
    dtype = _torch_dtype(geo)
    log = f"KV Cache is allocated. dtype: {dtype}, #tokens: {tokens}, {sizes}"
    log_lines = (log,) if swa_line is None else (log, swa_line)
    if tokens < context_len:
        warnings.append(f"the pool ({tokens} tokens) is smaller than context_len {context_len} "
                        "(managers/tp_worker.py:TpModelWorker.get_worker_info)")
    banner = (f"max_total_num_tokens={tokens}, chunked_prefill_size={limits.chunked_prefill_size}, "
              f"max_prefill_tokens={limits.max_prefill_tokens}, max_running_requests={reqs}, context_len={context_len}")
    return TokenPool(budget_bytes, cell, page_size, tokens, reqs, context_len, k, v, log, banner, tuple(warnings),
                     log_lines, swa_tokens)


def _size_dsv4_pool(part: Dsv4Part, budget_bytes: int, *, context_len: int, max_total_tokens: int | None,
                    max_running: int | None, attn_dp_size: int, chunked_prefill_size: int,
                    max_prefill_tokens: int) -> TokenPool:
    """DeepSeek-V4's pool (kvplan.sglang.dsv4.size_dsv4) as a TokenPool: k_bytes is what the configurator charges
    of the budget (full tokens × bytes_per_full_token + the c128 state), the log the lines SGLang prints for it."""
    s = size_dsv4(part, budget_bytes, max_running=max_running, attn_dp_size=attn_dp_size,
                  max_total_tokens=max_total_tokens)
    warnings = []
    if max_total_tokens is not None and max_total_tokens > s.profiled_tokens:
        warnings.append(f"max_total_tokens={max_total_tokens} is larger than the profiled value {s.profiled_tokens}. "
                        "Use the profiled value instead.")
    if s.full_tokens < context_len:
        warnings.append(f"the pool ({s.full_tokens} tokens) is smaller than context_len {context_len} "
                        "(managers/tp_worker.py:TpModelWorker.get_worker_info)")
    lines = dsv4_log_lines(part, s)
    banner = (f"max_total_num_tokens={s.full_tokens}, chunked_prefill_size={chunked_prefill_size}, "
              f"max_prefill_tokens={max_prefill_tokens}, max_running_requests={s.max_running_requests}, "
              f"context_len={context_len}")
    return TokenPool(budget_bytes, -int(-s.bytes_per_full_token // 1), part.page_size, s.full_tokens,
                     s.max_running_requests, context_len, int(s.charged_bytes), 0, lines[-2], banner,
                     tuple(warnings), lines, 0, s)


# mem_cache/deepseek_v4_memory_pool.py:DeepSeekV4SingleKVPool.create_buffer asserts `self.store_dtype ==
# torch.uint8`: KVCache keeps a bfloat16 cache as bfloat16, so SGLang sizes the pool, then stops building it.
DSV4_BF16_BUILD = ("AssertionError: (mem_cache/deepseek_v4_memory_pool.py:DeepSeekV4SingleKVPool.create_buffer "
                   "asserts store_dtype == torch.uint8: the V4 KV layout is an fp8 byte layout, so "
                   "--kv-cache-dtype bfloat16 stops SGLang after sizing the pool; use fp8_e4m3 or auto)")


def pool_build_refusal(geo: PoolGeometry | None) -> str | None:
    """What stops SGLang after it sized the pool, while it builds it (None: it builds)."""
    if geo is not None and geo.dsv4 is not None and geo.dtype == "bfloat16":
        return DSV4_BF16_BUILD
    return None


def _torch_dtype(geo: PoolGeometry) -> str:
    """The dtype the log prints: mem_cache/kv_cache_dtype.py maps both fp8 spellings to fp8_dtype on HIP, which
    is float8_e4m3fnuz on gfx942 (kernels/ops/quantization/fp8_kernel.py:is_fp8_fnuz)."""
    if geo.fnuz and geo.dtype.startswith("fp8"):
        return "torch.float8_e4m3fnuz"
    return KV_DTYPE_TORCH.get(geo.dtype, geo.dtype)


def _swa_pool_line(geo: PoolGeometry, full_tokens: int, page_size: int) -> tuple[int, str | None]:
    """HybridSWAPoolConfigurator._solve_pool_sizes' sliding pool and the `KV Cache is allocated` line its
    MHATokenToKVPool logs (mem_cache/swa_memory_pool.py:SWAKVPool; rows = tokens + page); (0, None) without one.
    Raises InvalidParameter with validate_swa_pool_size's words when the pool cannot hold one request."""
    swa = geo.swa
    if swa is None:
        return 0, None
    swa_tokens = int(full_tokens * swa.ratio) // page_size * page_size
    if swa.window is not None and swa.window + page_size >= swa_tokens:
        raise InvalidParameter(swa_pool_too_small_text(swa_tokens, swa.window, page_size))
    rows = swa_tokens + page_size
    k = rows * swa.layers * swa.kv_heads * swa.head_dim * geo.element_bytes
    v = rows * swa.layers * swa.kv_heads * swa.v_head_dim * geo.element_bytes
    dtype = _torch_dtype(geo)
    return swa_tokens, (f"KV Cache is allocated. dtype: {dtype}, #tokens: {swa_tokens}, K size: {k / GiB:.2f} GB, "
                        f"V size: {v / GiB:.2f} GB")


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
            length = factor * value
            if not math.isfinite(length):  # SGLang's int() fails on it (ValueError / OverflowError): no server
                raise BadConfig(f"config.json: {key} × the rope factor is not a finite length ({length})")
            derived = int(length)
            break
    if given is None:
        return derived
    if given > derived:
        raise InvalidParameter(
            f"User-specified context_length ({given}) is greater than the derived context_length ({derived}).",
            hint="SGLang refuses it unless SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN=1")
    return given
