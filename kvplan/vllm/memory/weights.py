"""Weights as loaded: what vLLM's "Model loading took X GiB" measures on the busiest GPU — the checkpoint's
stored share (kvplan.model.weights) plus what loading adds or re-lays out for the kernels vLLM picks."""
from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

from kvplan.model.spec import LayerSpec, ModelSpec, TowerSpec
from kvplan.model.weights import (
    FP_BYTES,
    attention_geometry,
    count_parameters,
    dsa_indexer_params,
    kv_shared_geometry,
    mlp_width,
    per_layer_inputs_bytes,
    quantized_bits_per_weight,
    stage_stored_bytes,
    weights_bytes_per_gpu,
)
from kvplan.units import GiB, MiB
from kvplan.vllm.defaults import LATEST, VllmVersion
from kvplan.vllm.memory.budget import MemoryTerm, with_range

# =============================================================================================
# Loaded bytes: what vLLM's "Model loading took X GiB" measures on one GPU
# =============================================================================================
# v1/worker/gpu_model_runner.py:load_model wraps the load in utils/mem_utils.py:DeviceMemoryProfiler,
# which reads torch.cuda.max_memory_allocated right after reset_peak_memory_stats
# (platforms/cuda.py:get_current_memory_usage): the bytes still allocated once the checkpoint is loaded
# and every layer's quant_method.process_weights_after_loading has run. Transient copies made while
# re-laying out a weight do not count; anything kept does. What differs from the stored checkpoint:
#   * kernel layouts: padding, repacking, extra copies (MXFP4 MoE, GPTQ on Marlin),
#   * buffers built at model init (the rotary cos/sin cache),
#   * vocabulary padding of the embedding and LM head,
#   * quantization scales the stored-bytes formula leaves out (FP8 per-channel / per-block).

MoeBackend = Literal["triton", "marlin", "flashinfer_trtllm", "flashinfer_cutlass"]
"""MXFP4 MoE kernels, named as vLLM's `--moe-backend` names them (fused_moe/oracle/mxfp4.py:map_mxfp4_backend)."""

MOE_BACKENDS: tuple[MoeBackend, ...] = ("triton", "marlin", "flashinfer_trtllm", "flashinfer_cutlass")

# GPUs with compute capability >= 8.0: the floor of the Marlin kernels (quantization/utils/marlin_utils.py
# and gptq_marlin.py:GPTQMarlinConfig.get_min_capability = 80) and of MXFP4 (mxfp4.py:Mxfp4Config, 80).
_MARLIN_ARCHS = frozenset({"ampere", "ada", "hopper", "blackwell", "blackwell-rtx"})

# vLLM 0.10 and 0.11.0 did not install `triton_kernels`, so gpt-oss on Hopper fell back to Marlin unless
# the user installed it by hand (vllm#26582, vllm#27672: "users have to install triton_kernels
# manually"); the dependency (vllm#27370, with torch 2.9, which the Hopper swizzle needs: mxfp4_utils.py
# disables it below torch 2.8.1) first shipped in 0.11.1. kvplan versions are major.minor, so 0.11 is
# read as 0.11.0; pass moe_backend="triton" for 0.11.1/0.11.2.
MXFP4_TRITON_ON_HOPPER_SINCE = VllmVersion(0, 12)
# Before that the Hopper kernel depends on the install, not on the version: vLLM 0.11.0's
# model_executor/layers/quantization/mxfp4.py:get_mxfp4_backend returns MARLIN when
# `not has_triton_kernels()` and TRITON otherwise (torch 2.8.0 is pinned, so the torch test passes), and
# the 0.11.0 wheel's METADATA lists no triton_kernels; 0.11.1/0.11.2 (read as 0.11 here) depend on it. So
# on Hopper before 0.12 the weights' range spans both layouts (Marlin best, Triton the low end): the
# llm-d H100 logs of "0.11" (an image with triton_kernels) load the Triton layout.

# MXFP4 blocks: 32 FP4 values share one E8M0 scale byte; two values per uint8 (mxfp4.py:create_weights).
MXFP4_BLOCK = 32
# Per-rank padding of the expert widths, per backend (mxfp4.py:Mxfp4MoEMethod.create_weights;
# fused_moe/oracle/mxfp4.py:mxfp4_round_up_hidden_size_and_intermediate_size):
# (intermediate multiple, hidden multiple).
_MXFP4_PADDING: Mapping[MoeBackend, tuple[int, int]] = {
    "triton": (64, 1),
    "marlin": (128, 256),  # "the moe marlin kernel requires n % 256 == 0 and k % 128 == 0"
    "flashinfer_trtllm": (256, 256),
    "flashinfer_cutlass": (128, 128),
}
# Expert bias dtype after loading: Triton and TRT-LLM convert them to fp32 (process_weights_after_loading:
# `w13_bias.to(torch.float32)`); Marlin and CUTLASS keep bf16.
_MXFP4_BIAS_BYTES: Mapping[MoeBackend, int] = {"triton": 4, "marlin": 2, "flashinfer_trtllm": 4,
                                               "flashinfer_cutlass": 2}
# Triton (matmul_ogs) on Hopper: triton_kernels tensor_details/layout_details/hopper_scale.py
# HopperMXScaleLayout.swizzle_data pads the scale rows to 2·num_warps·2·8 and the scale columns to 2;
# mxfp4.py passes num_warps = 8 unless a batched (pplx / DeepEP low-latency) all-to-all is used.
TRITON_MOE_NUM_WARPS = 8
# hopper_value.py:HopperMXValueLayout.swizzle_data (mma v3): rows padded to 16, packed bytes to 32.
_HOPPER_VALUE_ALIGN = (16, 32)

# vocab_parallel_embedding.py: DEFAULT_VOCAB_PADDING_SIZE; VocabParallelEmbedding / ParallelLMHead pad
# the vocabulary to a multiple of it, then split the padded rows evenly over the TP ranks.
DEFAULT_VOCAB_PADDING_SIZE = 64

# Which vLLM classes build the embedding and the LM head on every pipeline stage is a Family field
# (Family.pp_vocab_every_stage: their __init__ creates VocabParallelEmbedding and ParallelLMHead unguarded and
# make_layers splits only the decoder layers; seen on the model vLLM 0.33 builds, tests/fixtures/oracle-weights:
# Qwen3-30B-A3B at TP 4 × PP 2 holds embed_tokens and lm_head on both stages). Guarded classes hold the
# embedding on the first stage and, when tied, on the last one too (0.33.0 llama.py:LlamaModel.__init__,
# qwen2.py:Qwen2Model.__init__: `is_first_rank or (config.tie_word_embeddings and is_last_rank)`).

# FP8 block quantization keeps one fp32 scale per weight block (fp8.py:Fp8LinearMethod.create_weights,
# `weight_scale_inv`); the compressed-tensors "channel" strategy keeps one fp32 scale per output row
# (compressed_tensors_w8a8_fp8.py / _w8a8_int8.py: ChannelQuantScaleParameter, float32).
FP32_BYTES = 4
# Range of the weights estimate, relative: the residuals ("Model loading took" − kvplan) of the calibration
# half (Llama-3.1-8B +0.0%, gpt-oss-20b on Triton −0.2%, gpt-oss-120b on Marlin +0.1%, Qwen2-7B on A100
# at TP 1/2 within ±0.5%), widened to cover what the stored-bytes formula does not see in a checkpoint it
# has not been checked on (loader-specific buffers, unlisted scales): −1% … +3%.
WEIGHTS_RANGE = (-0.01, 0.03)
# GPTQ on Marlin with act-order keeps the sorted g_idx and its sort indices, int32 per input row
# (quantization/kernels/mixed_precision/marlin.py:MarlinLinearKernel.process_weights_after_loading,
# marlin_sort_g_idx).
GPTQ_G_IDX_BYTES_PER_ROW = 2 * 4


@dataclass(frozen=True)
class LoadAdjustment:
    """Bytes vLLM holds beyond (or below, if negative) the stored checkpoint share on one GPU.

    `layers_bytes` covers all decoder layers (a pipeline stage holds its share of them);
    `first_stage_bytes` sits with the embedding, `last_stage_bytes` with the LM head, and
    `every_stage_bytes` is on every worker.
    """

    name: str
    source: str  # vLLM file:function
    layers_bytes: int = 0
    first_stage_bytes: int = 0
    last_stage_bytes: int = 0
    every_stage_bytes: int = 0

    @property
    def total_bytes(self) -> int:
        """The adjustment on one GPU when the whole model is on it (pp = 1)."""
        return self.layers_bytes + self.first_stage_bytes + self.last_stage_bytes + self.every_stage_bytes


def _round_up(x: int, multiple: int) -> int:
    return -(-x // multiple) * multiple


def default_mxfp4_backend(arch: str | None, version: VllmVersion | None = None) -> MoeBackend | None:
    """The MXFP4 MoE kernel vLLM picks on `arch` with its default install (no env overrides).

    fused_moe/oracle/mxfp4.py:select_mxfp4_moe_backend walks FlashInfer TRT-LLM (SM100 only), Triton
    (SM90–SM10x, needs triton_kernels), FlashInfer CUTLASS, Marlin: data-center Blackwell → TRT-LLM,
    Hopper → Triton (Marlin before triton_kernels shipped, see MXFP4_TRITON_ON_HOPPER_SINCE), anything
    else from Ampere on (incl. SM12x, vllm#41477) → Marlin. None: no CUDA arch kvplan models (ROCm,
    unknown), i.e. the checkpoint layout.
    """
    v = version or LATEST
    if arch == "blackwell":
        return "flashinfer_trtllm"
    if arch == "hopper":
        return "triton" if v >= MXFP4_TRITON_ON_HOPPER_SINCE else "marlin"
    if arch in _MARLIN_ARCHS:
        return "marlin"
    return None


def install_dependent_mxfp4_backends(arch: str | None, version: VllmVersion | None = None) -> tuple[MoeBackend, ...]:
    """MXFP4 kernels vLLM picks on `arch` besides `default_mxfp4_backend` depending on what is installed.

    Hopper before 0.12: Triton when `triton_kernels` is importable (mxfp4.py:get_mxfp4_backend), which
    no 0.10/0.11.0 wheel installs and 0.11.1/0.11.2 do (see MXFP4_TRITON_ON_HOPPER_SINCE).
    """
    v = version or LATEST
    if arch == "hopper" and v < MXFP4_TRITON_ON_HOPPER_SINCE:
        return ("triton",)
    return ()


def mxfp4_expert_bytes(hidden: int, intermediate: int, backend: MoeBackend | None) -> int:
    """Bytes of one routed MXFP4 expert of one layer on one GPU (gpt-oss: gate_up + down, biases).

    `intermediate` is the per-rank width (I / tp). None: the checkpoint layout — FP4 values two per
    byte, one E8M0 scale per 32 values, bf16 biases. With a backend: the padded shapes of
    mxfp4.py:create_weights and what process_weights_after_loading leaves allocated; for Triton the
    swizzled values replace the originals (`del layer.w13_weight`) but the unswizzled scales stay
    registered on the layer next to the swizzled copy held by the PrecisionConfig.
    """
    i_mult, h_mult = _MXFP4_PADDING[backend] if backend else (1, 1)
    i, h = _round_up(intermediate, i_mult), _round_up(hidden, h_mult)
    values = (2 * i) * (h // 2) + h * (i // 2)  # w13: (2I, H/2) uint8; w2: (H, I/2) uint8
    scales = (2 * i) * (h // MXFP4_BLOCK) + h * (i // MXFP4_BLOCK)
    biases = (2 * i + h) * (_MXFP4_BIAS_BYTES[backend] if backend else 2)
    if backend != "triton":
        return values + scales + biases
    rows, cols = _HOPPER_VALUE_ALIGN
    values = _round_up(2 * i, rows) * _round_up(h // 2, cols) + _round_up(h, rows) * _round_up(i // 2, cols)
    m = 2 * TRITON_MOE_NUM_WARPS * 2 * 8
    swizzled = (_round_up(2 * i, m) * _round_up(h // MXFP4_BLOCK, 2)
                + _round_up(h, m) * _round_up(i // MXFP4_BLOCK, 2))
    return values + scales + swizzled + biases


# --- Rotary cos/sin cache ---------------------------------------------------------------------
# rotary_embedding/base.py:RotaryEmbedding.__init__ registers `cos_sin_cache` (positions × rotary_dim,
# cos and sin halves) as a GPU buffer when the model is built, in the model dtype unless the model
# asks otherwise (get_rope's dtype). get_rope caches instances by their arguments, so layers share one.
# vLLM sizes it from the config, not from --max-model-len (vllm#44738 measures what that costs).
# Which families build no rotary cache, build it over half the head (ChatGLM), in float32 (gpt-oss) or twice
# (Gemma-3): ModelSpec.family.rope (kvplan/model/architectures/).
# Rope types whose cache covers max_position × factor (linear_scaling_rope.py, dynamic_ntk_scaling_rope.py)
# or original_max_position × factor (yarn_scaling_rope.py, deepseek_scaling_rope.py).
_ROPE_SCALED_FROM_MAX = frozenset({"linear", "dynamic"})
_ROPE_SCALED_FROM_ORIGINAL = frozenset({"yarn", "deepseek_yarn"})
# Multimodal rope (an `mrope_section`): rotary_embedding/mrope.py:MRotaryEmbedding.__init__ caches
# max_position_embeddings × 4 rows ("In Qwen2.5-VL, the maximum index value is related to the duration of the input
# video. We enlarge max_position_embeddings to 4 times"; read in 0.11.0, 0.22.0, 0.27.1, 0.30.0, 0.31.0). From 0.32
# Qwen3-VL, Qwen3-VL-MoE and Qwen3.5 (dense and MoE) pass positions_factor 1 unless video pruning is on
# (qwen3_vl.py:mrope_positions_factor, read in 0.32.0 and 0.33.0; kvplan does not model --video-pruning-rate).
# The families that do: RopeRules.mrope_single_positions.
MROPE_POSITIONS_FACTOR = 4
MROPE_SINGLE_POSITIONS_SINCE = VllmVersion(0, 32)


def mrope_positions_factor(model: ModelSpec, version: VllmVersion | None = None) -> int:
    """How many times max_position_embeddings the rotary cache covers: 1 without multimodal rope, else 4, or 1
    for the Qwen3-VL / Qwen3.5 families from vLLM 0.32 (see MROPE_POSITIONS_FACTOR)."""
    if not model.facts.rope.mrope:
        return 1
    if (version or LATEST) >= MROPE_SINGLE_POSITIONS_SINCE and model.family.rope.mrope_single_positions:
        return 1
    return MROPE_POSITIONS_FACTOR


def rope_cache_bytes(model: ModelSpec, version: VllmVersion | None = None) -> int:
    """Bytes of the rotary cos/sin cache(s) vLLM builds for this model (0 without rotary attention).

    positions × rotary_dim × dtype bytes, where positions is max_position_embeddings (× factor for
    linear / dynamic scaling; original_max_position_embeddings × factor for YaRN) and rotary_dim is
    head_size × partial_rotary_factor (qk_rope_head_dim for MLA, half the head for ChatGLM); multimodal rope
    multiplies the positions by mrope_positions_factor (`version` None: the latest release's rule).
    Gemma 3 builds a second, unscaled cache for its sliding layers (gemma3.py: rope_local_base_freq); Gemma 4 a
    second one for its full layers over their whole head (gemma4_rope.py:Gemma4RotaryEmbedding).
    """
    rope, rules = model.facts.rope, model.family.rope
    if not rules.rotary or rope.disabled:
        return 0
    if model.dsv4 is not None:
        return _dsv4_rope_cache_bytes(model)
    if not any(layer.kind not in ("mamba", "mlp_only") for layer in model.layers):
        return 0
    if model.mla is not None:
        rotary = model.mla.qk_rope_head_dim
    elif rules.half_rotary:
        rotary = model.head_size // 2  # chatglm.py: rotary_dim = head_dim // 2
    else:
        rotary = int(model.head_size * (rope.partial_rotary_factor or 1.0))
    max_pos = int(rope.max_positions or model.max_model_len)
    rtype = rope.rope_type
    factor = rope.factor or 1.0
    if rtype in _ROPE_SCALED_FROM_ORIGINAL:
        original = rope.original_max_positions or max_pos
        positions = max(math.ceil(original * factor), 0)
    elif rtype in _ROPE_SCALED_FROM_MAX:
        positions = int(max_pos * factor)
    else:
        positions = max_pos * mrope_positions_factor(model, version)
    elem = rules.cache_dtype_bytes or FP_BYTES.get(model.dtype, 2)
    caches = positions * rotary * elem
    if rules.local_cache and any(layer.sliding_window for layer in model.layers):
        caches += max_pos * rotary * elem  # the sliding layers' local-base rope, unscaled
    if rules.full_layer_cache:  # Gemma 4: the full layers' own cache over their whole head (gemma4_rope.py)
        full = {layer.head_size or model.head_size for layer in model.layers if layer.kind == "full"}
        caches += sum(max_pos * head * elem for head in full)
    return caches


def _dsv4_rope_cache_bytes(model: ModelSpec) -> int:
    """DeepSeek-V4 (vLLM 0.22–0.33 models/deepseek_v4/common/rope.py:build_deepseek_v4_rope): rotary_dim is
    qk_rope_head_dim; with YaRN scaling the class is DeepseekV4ScalingRotaryEmbedding, whose cos/sin cache
    is fp32 over original_max_position × factor positions (deepseek_scaling_rope.py: "cos_sin_cache stored
    as fp32"); without scaling, RotaryEmbedding's cache in the model dtype over max_position_embeddings.
    get_rope caches one embedding per key (rotary_embedding/__init__.py:_ROPE_DICT): rope_theta for the
    uncompressed layers, compress_rope_theta for the compressed ones, so two caches when they differ."""
    d4, rope = model.dsv4, model.facts.rope
    assert d4 is not None
    max_pos = int(rope.max_positions or model.max_model_len)
    if rope.rope_type in _ROPE_SCALED_FROM_ORIGINAL:
        positions, elem = int((rope.original_max_positions or max_pos) * (rope.factor or 1.0)), 4
    else:
        positions, elem = max_pos, FP_BYTES.get(model.dtype, 2)
    kinds = {layer.compress_ratio > 1 for layer in model.layers} if d4.separate_compress_rope else {True}
    return len(kinds) * positions * d4.rope_head_dim * elem


def _dsv4_fp8_shapes(model: ModelSpec, tp: int) -> list[tuple[int, int, int]]:
    """(count, rows N, columns K) per rank of DeepSeek-V4's FP8 block-quantized linears
    (models/deepseek_v4/attention.py, nvidia/model.py): fused_wqa_wkv and the indexer's wq_b replicated,
    wq_b / wo_a column-parallel, wo_b row-parallel, the shared experts' gate_up / down; the routed experts
    are MXFP4 (their scales are in the stored bytes) and the compressors, weights_proj and router unquantized."""
    d4, h = model.dsv4, model.hidden_size
    assert d4 is not None
    heads_d = model.num_attention_heads * d4.head_dim
    out: list[tuple[int, int, int]] = []
    for layer in model.layers:
        out += [(1, d4.q_lora_rank + d4.head_dim, h), (1, -(-heads_d // tp), d4.q_lora_rank),
                (1, -(-d4.o_groups * d4.o_lora_rank // tp), heads_d // d4.o_groups),
                (1, h, -(-d4.o_groups * d4.o_lora_rank // tp))]
        if layer.compress_ratio == 4:
            out.append((1, d4.index_n_heads * d4.index_head_dim, d4.q_lora_rank))
        if model.moe is not None and layer.moe and model.moe.shared_intermediate_size:
            w = -(-model.moe.shared_intermediate_size // tp)
            out += [(1, 2 * w, h), (1, h, w)]
    return out


def _dsv4_adjustment(model: ModelSpec, tp: int, max_num_batched_tokens: int | None) -> LoadAdjustment | None:
    """DeepSeek-V4 (vLLM 0.22–0.33, models/deepseek_v4/): what the stored share (everything ÷ TP) misses.

    Replicated on every TP rank: fused_wqa_wkv and the indexer's wq_b (attention.py: disable_tp=True,
    ReplicatedLinear), the compressors, weights_proj and the router (quant_config=None, replicated), the fp32
    hyper-connection mixers and the hash tables (kvplan.model.weights.dsv4_fp32_and_table_bytes). Buffers
    DeepseekV4Model.__init__ allocates while the model loads: topk_indices_buffer (max_num_batched_tokens,
    index_topk) int32 on every stage, _mtp_hidden_buffer (max_num_batched_tokens, hc_mult·hidden) in the model
    dtype on the last stage (allocated with or without MTP speculation)."""
    from kvplan.model.weights import dsv4_fp32_and_table_bytes, dsv4_unquantized_params

    d4 = model.dsv4
    if d4 is None:
        return None
    full = FP_BYTES.get(model.dtype, 2)
    fp8 = 1 if model.quant is not None else full
    replicated_fp8 = sum(h * (d4.q_lora_rank + d4.head_dim) + (
        d4.q_lora_rank * d4.index_n_heads * d4.index_head_dim if layer.compress_ratio == 4 else 0)
        for layer, h in ((layer, model.hidden_size) for layer in model.layers))
    replicated = (replicated_fp8 * fp8 + dsv4_unquantized_params(model) * full
                  + dsv4_fp32_and_table_bytes(model))
    tokens = max_num_batched_tokens or 0
    return LoadAdjustment(
        "DeepSeek-V4 replicated linears and mixers, indexer top-k and MTP hidden buffers",
        "models/deepseek_v4/attention.py:DeepseekV4Attention.__init__, nvidia/model.py:DeepseekV4Model.__init__",
        layers_bytes=replicated - replicated // tp,
        every_stage_bytes=tokens * d4.index_topk * 4,
        last_stage_bytes=tokens * d4.hc_mult * model.hidden_size * full)


def _linear_shapes(model: ModelSpec, tp: int, version: VllmVersion | None = None) -> list[tuple[int, int, int]]:
    """(count, rows N, columns K) per rank of the linear layers a weight-quantization scheme covers.

    Attention q/k/v (fused, KV heads replicated when fewer than tp; a KV-shared layer's q alone from vLLM 0.30,
    see _kv_shared_builds_kv) and o, dense (mlp_width) or shared-expert MLPs and routed experts. MLA and
    recurrent projections are left out (approximation).
    """
    h, moe, rules = model.hidden_size, model.moe, model.family.weights
    up = 2 if model.gated_mlp else 1
    out: list[tuple[int, int, int]] = []

    def mlp(width: int, count: int = 1) -> None:
        if width:
            w = -(-width // tp)
            out.extend([(count, up * w, h), (count, h, w)])

    for layer in model.layers:
        if layer.kind not in ("mamba", "mlp_only", "mla"):
            heads = -(-model.num_attention_heads // tp)
            hd, kvh = attention_geometry(model, layer)
            kvh = max(1, kvh // tp) if _kv_shared_builds_kv(layer, version) else 0
            out.extend([(1, (heads + 2 * kvh) * hd, h), (1, h, heads * hd)])
        if moe is not None and layer.moe:
            mlp(moe.expert_intermediate_size, moe.num_experts)
            mlp(moe.shared_intermediate_size)
        elif layer.kind == "mlp_only" or (rules.mixer_layers_have_mlp and (layer.kind != "mamba" or
                                                                             rules.recurrent_layers_have_mlp)):
            mlp(mlp_width(model, layer))
    return out


# A KV-shared layer (Gemma-3n / Gemma-4 num_kv_shared_layers) builds q_proj alone from vLLM 0.30 (models/gemma4.py,
# gemma3n.py: "K/V come from the target layer's cache, so like HF this layer only has q_proj (and no
# k_norm/v_norm)"; read in 0.30.0, 0.31.0, 0.32.0, 0.33.0), and drops the K/V tensors "original checkpoints still
# ship" (0.33 gemma3n.py:_kv_sharing_weights_mapper, gemma4.py:_gemma4_layer_weights_mapper). 0.20.0-0.29.0 build
# the full QKVParallelLinear and k_norm there (gemma4.py:Gemma4Attention, gemma3n.py:Gemma3nAttention), loaded.
KV_SHARED_Q_ONLY_SINCE = VllmVersion(0, 30)


def _kv_shared_builds_kv(layer: LayerSpec, version: VllmVersion | None) -> bool:
    """Whether vLLM `version` (None: the latest) builds this layer's K and V projections (KV_SHARED_Q_ONLY_SINCE)."""
    return layer.kind != "kv_shared" or (version or LATEST) < KV_SHARED_Q_ONLY_SINCE


def _kv_shared_adjustment(model: ModelSpec, tp: int, version: VllmVersion | None) -> LoadAdjustment | None:
    """The KV-shared layers' k_proj, v_proj and k_norm, which the stored count holds (the original checkpoint ships
    them: kvplan.model.weights) and vLLM 0.30+ neither builds nor loads (KV_SHARED_Q_ONLY_SINCE): their stored
    share, taken off. Gemma-4-E2B: 16 sliding layers × 2 × 1,536 × 256 and 4 full ones × 2 × 1,536 × 512, 36 MiB."""
    shared = [layer for layer in model.layers if not _kv_shared_builds_kv(layer, version)]
    if not shared:
        return None
    h, stored, full = model.hidden_size, _stored_linear_bytes(model), FP_BYTES.get(model.dtype, 2)
    dropped = 0.0
    for layer in shared:
        hd, kvh = kv_shared_geometry(model, layer)
        dropped += 2 * h * kvh * hd * stored + (hd * full if model.family.weights.qk_norm else 0)
    return LoadAdjustment("KV-shared layers build no k/v projections",
                          "models/gemma4.py:Gemma4Attention, gemma3n.py:Gemma3nAttention (q_proj only, vLLM 0.30+)",
                          layers_bytes=-int(dropped / tp))


def _per_layer_input_buffer(model: ModelSpec, max_num_batched_tokens: int | None) -> LoadAdjustment | None:
    """The per-layer-input buffer a Gemma-3n / Gemma-4 "E" wrapper allocates with the model "for CUDA graph
    compatibility": max_num_batched_tokens × num_hidden_layers × hidden_size_per_layer_input in the model dtype
    (vLLM 0.33 models/gemma4_mm.py:Gemma4ForConditionalGeneration.__init__ `self.per_layer_embeddings`, alike
    in 0.20.0-0.32.0; gemma3n_mm.py:Gemma3nForConditionalGeneration.__init__ from 0.10.1), on every stage that
    builds the class (Family.per_layer_input_buffer names it). Gemma-4-E2B at 8,192 tokens: 140 MiB."""
    ple = model.facts.per_layer_input_size
    if ple <= 0 or not max_num_batched_tokens or \
            not set(model.family.per_layer_input_buffer).intersection(model.architectures):
        return None
    return LoadAdjustment(
        f"per-layer-input buffer ({max_num_batched_tokens:,} tokens × {model.num_layers} layers × {ple})",
        "models/gemma4_mm.py:Gemma4ForConditionalGeneration.__init__ (per_layer_embeddings)",
        every_stage_bytes=per_layer_inputs_bytes(model, max_num_batched_tokens))


def _mxfp4_adjustment(model: ModelSpec, tp: int, backend: MoeBackend | None) -> LoadAdjustment | None:
    moe = model.moe
    if model.quant is None or model.quant.method != "mxfp4" or moe is None or backend is None:
        return None
    p = count_parameters(model)
    width = moe.expert_intermediate_size // tp  # FusedMoE: intermediate_size_per_partition
    per_expert = mxfp4_expert_bytes(model.hidden_size, width, backend) - mxfp4_expert_bytes(
        model.hidden_size, width, None)
    return LoadAdjustment(
        f"MXFP4 experts in the {backend} layout",
        "model_executor/layers/quantization/mxfp4.py:Mxfp4MoEMethod.create_weights / "
        "process_weights_after_loading",
        layers_bytes=p.moe_layers * moe.num_experts * per_expert,
    )


def _gptq_marlin_adjustment(model: ModelSpec, tp: int, arch: str | None,
                            version: VllmVersion | None = None) -> LoadAdjustment | None:
    """gptq_marlin.py: sym 4/8-bit GPTQ runs on Marlin from SM80 (is_gptq_marlin_compatible); Marlin
    drops the (symmetric, constant) qzeros and keeps g_idx + sort indices only with act-order."""
    q, layout = model.quant, model.facts.quant_layout
    if q is None or q.method != "gptq" or arch not in _MARLIN_ARCHS or not q.group_size:
        return None
    if not layout.symmetric or q.weight_bits not in (4, 8):
        return None
    shapes = _linear_shapes(model, tp, version)
    zeros = sum(c * n * (k // q.group_size) for c, n, k in shapes) * int(q.weight_bits) // 8
    g_idx = sum(c * k for c, _, k in shapes) * GPTQ_G_IDX_BYTES_PER_ROW if layout.desc_act else 0
    return LoadAdjustment(
        "GPTQ on Marlin: qzeros dropped" + (", act-order g_idx kept" if g_idx else ""),
        "quantization/kernels/mixed_precision/marlin.py:MarlinLinearKernel.process_weights_after_loading",
        layers_bytes=g_idx - zeros,
    )


def _fp8_scale_adjustment(model: ModelSpec, tp: int, version: VllmVersion | None = None) -> LoadAdjustment | None:
    """8-bit scales the stored-bytes formula leaves out: fp32 per 128×128 block (FP8 block quantization)
    or per output channel (compressed-tensors "channel" strategy); per-tensor scales are negligible."""
    q, layout = model.quant, model.facts.quant_layout
    if q is None or q.weight_bits != 8:
        return None
    shapes = _dsv4_fp8_shapes(model, tp) if model.dsv4 is not None else _linear_shapes(model, tp, version)
    if layout.fp8_block is not None:
        bn, bk = layout.fp8_block
        scales = sum(c * -(-n // bn) * -(-k // bk) for c, n, k in shapes)
        what, src = f"FP8 {bn}×{bk}-block scales", "fp8.py:Fp8LinearMethod.create_weights (weight_scale_inv)"
    elif layout.channel_scales:
        scales = sum(c * n for c, n, _ in shapes)
        what, src = ("per-output-channel fp32 weight scales",
                     "compressed_tensors_w8a8_fp8.py / _w8a8_int8.py:create_weights (ChannelQuantScaleParameter)")
    else:
        return None  # per-tensor scales: a few floats per layer
    return LoadAdjustment(what, src, layers_bytes=scales * FP32_BYTES)


def _stored_linear_bytes(model: ModelSpec) -> float:
    """Bytes per parameter kvplan's stored count gives attention and MLP weights (kvplan.model.weights.
    stored_weights_bytes): the quantized bits, or the model dtype (unquantized, or MXFP4's kept attention)."""
    q = model.quant
    if q is None or q.method == "mxfp4":
        return float(FP_BYTES.get(model.dtype, 2))
    return quantized_bits_per_weight(model) / 8


def _block_scales(n: int, k: int, model: ModelSpec) -> int:
    """fp32 bytes of an (n × k) FP8 block-quantized weight's weight_scale_inv (ceil blocks), 0 otherwise."""
    block = model.facts.quant_layout.fp8_block
    if model.quant is None or model.quant.weight_bits != 8 or block is None:
        return 0
    return -(-n // block[0]) * -(-k // block[1]) * FP32_BYTES


def _router_adjustment(model: ModelSpec, tp: int) -> LoadAdjustment | None:
    """The MoE router as vLLM builds it: unquantized (quant_config=None, or in the checkpoint's
    modules_to_not_convert), in the model dtype or the family's (MiniMax-M2: float32), whole on every TP rank
    (ReplicatedLinear: vLLM 0.19 models/deepseek_v2.py:DeepseekV2MoE `self.gate = GateLinear(...)`,
    qwen3_moe.py:Qwen3MoeSparseMoeBlock, minimax_m2.py:MiniMaxM2MoE). kvplan's stored count holds it at the
    checkpoint's linear bits and splits it over the ranks."""
    moe, rules = model.moe, model.family.weights
    if moe is None or model.dsv4 is not None:
        return None
    moe_layers = sum(1 for layer in model.layers if layer.moe)
    params = model.hidden_size * moe.num_experts + (moe.num_experts if rules.router_bias else 0)
    loaded = params * (rules.router_dtype_bytes or FP_BYTES.get(model.dtype, 2))
    delta = moe_layers * (loaded - params * _stored_linear_bytes(model) / tp)
    if abs(delta) < 1:
        return None
    return LoadAdjustment("MoE router unquantized, whole on every rank",
                          "models/deepseek_v2.py:DeepseekV2MoE / qwen3_moe.py / minimax_m2.py (ReplicatedLinear gate)",
                          layers_bytes=int(delta))


def _kv_replica_adjustment(model: ModelSpec, tp: int, version: VllmVersion | None = None) -> LoadAdjustment | None:
    """K and V projections of KV heads replicated over the TP ranks when tp exceeds them: layers/linear.py:
    QKVParallelLinear gives every rank max(1, kv_heads // tp) KV heads (num_kv_head_replicas = tp // kv_heads),
    where kvplan's stored share splits them evenly (a KV-shared layer's too where vLLM builds them)."""
    h, stored, delta = model.hidden_size, _stored_linear_bytes(model), 0.0
    for layer in model.layers:
        if layer.kind in ("mamba", "mlp_only", "mla") or not _kv_shared_builds_kv(layer, version):
            continue
        hd, kvh = attention_geometry(model, layer)
        if tp > kvh > 0:
            delta += 2 * hd * h * stored * (1 - kvh / tp)
    if delta < 1:
        return None
    return LoadAdjustment("KV heads replicated over the TP ranks",
                          "layers/linear.py:QKVParallelLinear (num_kv_head_replicas)", layers_bytes=int(delta))


def _mla_adjustments(model: ModelSpec, tp: int, max_num_batched_tokens: int | None) -> list[LoadAdjustment]:
    """What vLLM's MLA layers hold per rank beyond a 1/tp share of their stored bytes (vLLM 0.19.1):

    * the latent down-projection is replicated: models/deepseek_v2.py:DeepSeekV2FusedQkvAProjLinear
      (hidden → q_lora_rank + kv_lora_rank + rope, MergedColumnParallelLinear with disable_tp=True), or
      DeepseekV2MLAAttention.kv_a_proj_with_mqa (a ReplicatedLinear) without a q LoRA;
    * the DSA indexer is replicated ("no tensor parallel, just replicated": Indexer.wq_b and wk with the
      checkpoint's quantization, weights_proj with quant_config=None, k_norm);
    * a quantized kv_b_proj is also kept dequantized: layers/attention/mla_attention.py:
      MLAAttention.process_weights_after_loading stores W_UK_T / W_UV, views of one act-dtype copy
      (get_and_maybe_dequant_weights), kv_lora_rank × local heads × (qk_nope + v) ("the extra memory
      overhead of this is fairly low");
    * DSA models allocate topk_indices_buffer at init (DeepseekV2Model.__init__: max_num_batched_tokens ×
      index_topk int32), on every pipeline stage.
    """
    m = model.mla
    if m is None or model.dsv4 is not None:
        return []
    layers = sum(1 for layer in model.layers if layer.kind == "mla")
    if not layers:
        return []
    h, full, stored = model.hidden_size, FP_BYTES.get(model.dtype, 2), _stored_linear_bytes(model)
    out: list[LoadAdjustment] = []
    a_out = (m.q_lora_rank or 0) + m.kv_lora_rank + m.qk_rope_head_dim
    a_stored = h * a_out * stored
    down = a_stored - a_stored / tp + _block_scales(a_out, h, model)
    idx = dsa_indexer_params(model)
    if idx:
        n, d = m.index_n_heads, m.index_head_dim
        assert m.q_lora_rank is not None
        loaded = ((m.q_lora_rank * n * d + h * d) * stored + _block_scales(n * d, m.q_lora_rank, model)
                  + _block_scales(d, h, model) + (h * n + 2 * d) * full)
        down += loaded - idx * stored / tp
    name = "MLA latent down-projection" + (" and DSA indexer" if idx else "") + " replicated on every rank"
    if tp > 1 or idx:
        out.append(LoadAdjustment(name, "models/deepseek_v2.py:DeepSeekV2FusedQkvAProjLinear (disable_tp=True), "
                                  "Indexer (ReplicatedLinear)", layers_bytes=int(layers * down)))
    q = model.quant
    if q is not None and not any(name.endswith("kv_b_proj") for name in q.excluded):
        heads = model.num_attention_heads // tp
        copy = m.kv_lora_rank * heads * (m.qk_nope_head_dim + m.v_head_dim) * full
        out.append(LoadAdjustment("kv_b_proj dequantized copy (W_UK_T / W_UV)",
                                  "layers/attention/mla_attention.py:MLAAttention.process_weights_after_loading",
                                  layers_bytes=layers * copy))
    topk = model.facts.index_topk
    if idx and max_num_batched_tokens and isinstance(topk, int) and topk > 0:
        out.append(LoadAdjustment(f"DSA top-k index buffer ({max_num_batched_tokens:,} tokens × {topk:,})",
                                  "models/deepseek_v2.py:DeepseekV2Model.__init__ (topk_indices_buffer)",
                                  every_stage_bytes=max_num_batched_tokens * topk * 4))
    return out


def checkpoint_tower_bytes(model: ModelSpec) -> int:
    """Stored bytes of every counted tower, loaded or not (a checkpoint's safetensors total includes them),
    in the model dtype (vision towers stay unquantized in the checkpoints kvplan has seen)."""
    return sum(t.params for t in model.towers) * FP_BYTES.get(model.dtype, 2)


def tower_bytes_per_gpu(model: ModelSpec, tower: TowerSpec, *, tp: int = 1, mm_encoder_tp_mode: str = "weights") -> int:
    """A tower's loaded bytes on one TP rank of the first stage: replicated parameters in full, parallel
    linears split, in the model dtype. `mm_encoder_tp_mode` "data" (vLLM's --mm-encoder-tp-mode; vision.py:
    is_vit_use_data_parallel) replicates the linears the tower builds with disable_tp, all but
    `tower.data_mode_sharded_params`; a tower without that count keeps the "weights" layout (config/model.py falls
    back to "weights" for a model without supports_encoder_tp_data; the others are not modelled yet)."""
    split = tower.sharded_params
    if mm_encoder_tp_mode == "data" and tower.data_mode_sharded_params is not None:
        split = tower.data_mode_sharded_params
    return (tower.replicated_params + tower.sharded_params - split + -(-split // tp)) * FP_BYTES.get(model.dtype, 2)


def tower_adjustments(model: ModelSpec, *, tp: int = 1,
                      max_num_batched_tokens: int | None = None) -> tuple[LoadAdjustment, ...]:
    """The towers vLLM builds (SupportsMultiModal._mark_tower_model: on the first pipeline stage only under
    the V2 model runner, skipped when their modalities are all limited to 0): replicated parameters in full
    on every TP rank, parallel linears split; Qwen3-VL's deepstack buffers (qwen3_vl.py:
    Qwen3VLForConditionalGeneration.__init__: one max_num_batched_tokens × text-hidden tensor per level,
    allocated on the GPU with the model)."""
    elem = FP_BYTES.get(model.dtype, 2)
    out: list[LoadAdjustment] = []
    for t in model.towers:
        if not t.loaded:
            continue
        data = "; replicated: --mm-encoder-tp-mode data" if t.mm_encoder_tp_mode == "data" else ""
        out.append(LoadAdjustment(f"{t.name} ({', '.join(t.modalities)}{data})", t.source,
                                  first_stage_bytes=tower_bytes_per_gpu(model, t, tp=tp,
                                                                        mm_encoder_tp_mode=t.mm_encoder_tp_mode)))
        if t.deepstack_levels and max_num_batched_tokens:
            out.append(LoadAdjustment(
                f"deepstack buffers ({t.deepstack_levels} × {max_num_batched_tokens:,} tokens)",
                "qwen3_vl.py:Qwen3VLForConditionalGeneration.__init__ (deepstack_input_embeds)",
                first_stage_bytes=t.deepstack_levels * max_num_batched_tokens * model.hidden_size * elem))
    return tuple(out)


def load_adjustments(
    model: ModelSpec,
    *,
    tp: int = 1,
    arch: str | None = None,
    version: VllmVersion | None = None,
    moe_backend: MoeBackend | None = None,
    max_num_batched_tokens: int | None = None,
) -> tuple[LoadAdjustment, ...]:
    """What vLLM allocates on one GPU beyond the checkpoint's stored language-model share, one named term each.

    `arch` ("hopper", "blackwell", "ampere", ...) selects kernel layouts; None means unknown, and only
    the GPU-independent terms (rotary cache, vocabulary padding, FP8 scales, towers) apply. `moe_backend`
    overrides the MXFP4 kernel (vLLM's --moe-backend); default: `default_mxfp4_backend(arch, version)`.
    """
    out: list[LoadAdjustment] = list(tower_adjustments(model, tp=tp, max_num_batched_tokens=max_num_batched_tokens))
    rope = rope_cache_bytes(model, version)
    if rope:
        out.append(LoadAdjustment("rotary cos/sin cache", "rotary_embedding/base.py:RotaryEmbedding.__init__",
                                  every_stage_bytes=rope))
    pad_rows = _round_up(model.vocab_size, DEFAULT_VOCAB_PADDING_SIZE) - model.vocab_size
    if pad_rows:
        row = model.hidden_size * FP_BYTES.get(model.dtype, 2)
        per_rank = -(-pad_rows // tp) * row
        out.append(LoadAdjustment(
            f"vocabulary padded to a multiple of {DEFAULT_VOCAB_PADDING_SIZE}",
            "vocab_parallel_embedding.py:VocabParallelEmbedding.__init__ (pad_vocab_size)",
            first_stage_bytes=per_rank, last_stage_bytes=0 if model.tie_word_embeddings else per_rank))
    backend = moe_backend if moe_backend is not None else default_mxfp4_backend(arch, version)
    for adj in (_mxfp4_adjustment(model, tp, backend), _gptq_marlin_adjustment(model, tp, arch, version),
                _fp8_scale_adjustment(model, tp, version), _router_adjustment(model, tp),
                _kv_replica_adjustment(model, tp, version), _kv_shared_adjustment(model, tp, version),
                _per_layer_input_buffer(model, max_num_batched_tokens),
                _dsv4_adjustment(model, tp, max_num_batched_tokens)):
        if adj is not None:
            out.append(adj)
    out.extend(_mla_adjustments(model, tp, max_num_batched_tokens))
    return tuple(out)


def pp_vocab_copies_bytes(model: ModelSpec, *, tp: int, pp: int) -> list[int]:
    """Per pipeline stage, the vocabulary tables vLLM builds beyond the embedding on the first stage and the untied
    LM head on the last (what stage_stored_bytes places); all 0 at pp = 1. A class in
    Family.pp_vocab_every_stage builds the embedding on every stage and the untied LM head on every stage (a
    tied one is the embedding: tie_weights); any other class builds a tied model's embedding on the last stage
    too. Each table is the vocabulary padded to a multiple of DEFAULT_VOCAB_PADDING_SIZE split over the TP ranks
    (vocab_parallel_embedding.py:VocabParallelEmbedding), in the model dtype."""
    if pp == 1:
        return [0] * pp
    rows = -(-_round_up(model.vocab_size, DEFAULT_VOCAB_PADDING_SIZE) // tp)
    table = rows * model.hidden_size * FP_BYTES.get(model.dtype, 2)
    tied = model.tie_word_embeddings
    if not set(model.family.pp_vocab_every_stage).intersection(model.architectures):
        return [table if tied and i == pp - 1 else 0 for i in range(pp)]
    return [(table if i > 0 else 0) + (table if not tied and i < pp - 1 else 0) for i in range(pp)]


def loaded_weights_bytes_per_gpu(
    model: ModelSpec,
    *,
    tp: int = 1,
    pp: int = 1,
    arch: str | None = None,
    version: VllmVersion | None = None,
    moe_backend: MoeBackend | None = None,
    total_bytes: int | None = None,
    max_num_batched_tokens: int | None = None,
    stage: int | None = None,
) -> int:
    """What vLLM's "Model loading took X GiB" reports on the busiest GPU (or on pipeline stage `stage`).

    The stored share (`weights_bytes_per_gpu`, or `total_bytes` from safetensors metadata less the towers,
    split the same way) plus `load_adjustments` on that pipeline stage (the towers vLLM builds among them).
    """
    from kvplan.model.parallel import pp_layer_ranges

    adjustments = load_adjustments(model, tp=tp, arch=arch, version=version, moe_backend=moe_backend,
                                   max_num_batched_tokens=max_num_batched_tokens)
    if total_bytes is not None:
        total_bytes = max(0, total_bytes - checkpoint_tower_bytes(model))
    if pp == 1:
        return weights_bytes_per_gpu(model, tp=tp, total_bytes=total_bytes) + sum(a.total_bytes for a in adjustments)
    ranges = pp_layer_ranges(model.num_layers, pp)
    stored = stage_stored_bytes(model, pp, total_bytes)
    vocab = pp_vocab_copies_bytes(model, tp=tp, pp=pp)
    per_stage = []
    for i, r in enumerate(ranges):
        extra = vocab[i]
        for a in adjustments:
            extra += a.every_stage_bytes + a.layers_bytes * len(r) // max(1, model.num_layers)
            extra += (a.first_stage_bytes if i == 0 else 0) + (a.last_stage_bytes if i == len(ranges) - 1 else 0)
        per_stage.append(-(-int(stored[i]) // tp) + extra)
    return max(per_stage) if stage is None else per_stage[stage]


def _tower_notes(model: ModelSpec, from_metadata: bool) -> list[str]:
    """What the weights say about towers kvplan does not add: skipped by the limits, or not counted."""
    notes = [f"{t.name} not loaded (limits 0)" + (f" −{t.params * FP_BYTES.get(model.dtype, 2) / GiB:.2f} GiB"
                                                   if from_metadata else "")
             for t in model.towers if not t.loaded]
    if model.mm_modalities and not model.towers and not from_metadata:
        notes.append("the multimodal encoder tower is not counted (kvplan counts gemma-3/4, Mistral-3, GLM-4.xV, "
                     "Qwen2.5-VL, Qwen3-VL and Llama-4 towers)")
    return notes


def given_or_estimated_weights(model: ModelSpec, *, given: int | None, tp: int, pp: int, arch: str | None,
                               total_bytes: int | None = None) -> tuple[int, int, int]:
    """(bytes, low, high) of the weights on the busiest GPU: `given` (measured: --weights-memory, a plan's
    `measured.weights-memory`) exactly, else estimate_weights' estimate and range, on the checkpoint's stored
    bytes `total_bytes` (the Hub's safetensors metadata) when known. The one step every SGLang plan takes
    (`kvplan fit --engine sglang|both`, its sweep, `kvplan check`, `kvplan roofline --engine sglang`)."""
    if given is not None:
        return given, given, given
    term = estimate_weights(model, tp=tp, pp=pp, arch=arch, total_bytes=total_bytes)
    return term.bytes, term.low_bytes, term.high_bytes


def estimate_weights(
    model: ModelSpec,
    *,
    tp: int,
    pp: int,
    arch: str | None,
    version: VllmVersion = LATEST,
    moe_backend: MoeBackend | None = None,
    total_bytes: int | None = None,
    max_num_batched_tokens: int | None = None,
    stage: int | None = None,
) -> MemoryTerm:
    """What vLLM's "Model loading took X GiB" will report on the busiest GPU (on PP stage `stage` if given).

    The checkpoint's stored share (from `total_bytes`, the safetensors metadata, when given) plus what
    loading adds on this GPU architecture: the multimodal towers vLLM builds, kernel layouts (MXFP4 MoE,
    GPTQ on Marlin), the rotary cos/sin cache, vocabulary padding, FP8 scales (load_adjustments).
    """
    value = loaded_weights_bytes_per_gpu(model, tp=tp, pp=pp, arch=arch, version=version, moe_backend=moe_backend,
                                         total_bytes=total_bytes, max_num_batched_tokens=max_num_batched_tokens,
                                         stage=stage)
    base = ("checkpoint size from safetensors metadata" if total_bytes is not None
            else "parameters × stored bytes (quantized layers at their bits)")
    where = "busiest GPU" if stage is None or pp == 1 else f"PP stage {stage}"
    parts = [f"{a.name} {a.total_bytes / GiB:+.2f} GiB"
             for a in load_adjustments(model, tp=tp, arch=arch, version=version, moe_backend=moe_backend,
                                       max_num_batched_tokens=max_num_batched_tokens)
             if abs(a.total_bytes) >= MiB]
    parts += _tower_notes(model, total_bytes is not None)
    others: list[int] = []
    if model.quant is not None and model.quant.method == "mxfp4" and model.moe is not None:
        backend = moe_backend or default_mxfp4_backend(arch, version)
        if backend is None:
            parts.append(f"MXFP4 kernel layout unknown on {arch or 'this GPU'}: checkpoint layout assumed")
        elif moe_backend is None:
            for alt in install_dependent_mxfp4_backends(arch, version):
                others.append(loaded_weights_bytes_per_gpu(model, tp=tp, pp=pp, arch=arch, version=version,
                                                           moe_backend=alt, total_bytes=total_bytes, stage=stage))
                parts.append(f"{alt} layout ({others[-1] / GiB:.2f} GiB) if triton_kernels is installed")
    detail = f"; {', '.join(parts)}" if parts else ""
    lo, hi = WEIGHTS_RANGE
    low = min([int(value * (1 + lo))] + [int(o * (1 + lo)) for o in others])
    high = max([int(value * (1 + hi))] + [int(o * (1 + hi)) for o in others])
    return with_range(MemoryTerm("weights", value, "estimate", f"{base}, {where}{detail}"), low, high)
