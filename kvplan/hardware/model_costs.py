"""What a model costs per step on one GPU: the bytes it reads and the FLOPs it does (issue 23: apart from the
roofs and times in roofline.py).

From a ModelSpec under TP / DP / EP: the weights a step reads (MoE: only the experts its tokens are expected to
hit; MLA's down-projections whole on every TP rank), the KV cache and recurrent state it reads and writes
(sliding windows and chunked-local attention capped, MLA's latent), linear and attention FLOPs, and the
collectives' payloads. No GPU figure enters here but the FLOP/s table that picks the tensor-core dtype; the
times these costs take on a GPU are roofline.py's. Pure: numbers in, frozen dataclasses out.
"""
from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from kvplan.errors import InvalidParameter
from kvplan.model.spec import LayerSpec, ModelSpec

if TYPE_CHECKING:
    from kvplan.model.kv_cache import KVCacheSpec
    from kvplan.model.weights import ParamCount

# --- constants (each with its source) -------------------------------------------------------------

FLOPS_PER_MAC = 2  # one multiply + one add per weight per token: 2·P·n FLOPs for n tokens
ATTENTION_MATMULS = 2  # QKᵀ and softmax(QKᵀ)·V, each 2·heads·head_dim FLOPs per (query, key) pair
# Megatron-style TP (Shoeybi et al. 2019, §3; vLLM RowParallelLinear): one all-reduce after the
# attention output projection and one after the MLP/MoE down projection, per layer.
ALL_REDUCES_PER_LAYER = 2
ACTIVATION_BYTES = 2  # hidden states are all-reduced in the model dtype (bf16/fp16)
# A recurrent (Mamba / linear-attention) layer reads its per-request state and writes it back
# every step (vLLM mamba selective_state_update loads and stores the state in place).
STATE_TRAFFIC_FACTOR = 2
# Quantization methods whose matmuls run on FP8 tensor cores (W8A8) when the GPU has them
# (vLLM quantization/fp8.py, modelopt.py ModelOptFp8Config, fbgemm_fp8.py, ptpc_fp8.py).
# ModelOpt W4A8-AWQ keeps FP8 activations, so its matmuls also run at the FP8 rate.
_FP8_COMPUTE_METHODS = frozenset(
    {"fp8", "modelopt_fp8", "fbgemm_fp8", "ptpc_fp8", "modelopt", "modelopt_w4a8_awq"}
)
# NVFP4 checkpoints run W4A4 on FP4 tensor cores (Blackwell); elsewhere vLLM falls back to a
# weight-only kernel (Marlin W4A16) that computes in 16 bits (quantization/modelopt.py).
_FP4_COMPUTE_METHODS = frozenset({"modelopt_fp4", "nvfp4"})
_MODEL_DTYPE_BYTES = {"bfloat16": 2, "float16": 2, "float32": 4}  # unquantized weights, as stored


# --- per-GPU sizes ----------------------------------------------------------------------------


@dataclass(frozen=True)
class AttentionLayerCost:
    """One attention layer on one GPU: what a query reads and computes per key it attends to.

    `kv_bytes_per_token` is per rank (kv.py KVCacheSpec.bytes_per_token). Head dims are the ones the
    kernels multiply: for MLA, decode runs on the absorbed latent (QK over kv_lora_rank + rope, AV
    over kv_lora_rank) and prefill on up-projected heads (qk_nope + rope, v_head_dim)
    (DeepSeek-V2 paper §2.1.3; vLLM mla_attention.py forward_mqa / forward_mha).
    """

    layer: int
    kv_bytes_per_token: int
    num_q_heads: int  # per rank
    qk_head_dim: int
    v_head_dim: int
    prefill_qk_head_dim: int
    prefill_v_head_dim: int
    sliding_window: int | None = None
    attention_chunk_size: int | None = None
    stores_kv: bool = True  # False for KV-sharing layers: they read another layer's cache

    def attended(self, position: int) -> int:
        """Keys the query at 1-based `position` attends to (itself included)."""
        if position <= 0:
            return 0
        if self.sliding_window is not None:
            return min(position, self.sliding_window)
        if self.attention_chunk_size is not None:
            return (position - 1) % self.attention_chunk_size + 1
        return position

    def decode_keys(self, context: int) -> int:
        """Keys a decode query at context `context` reads: full context, or capped at the window.

        Chunked-local attention is capped at the chunk (the worst case: the query at the end of a
        chunk; across requests at random offsets the mean is about half a chunk).
        """
        if self.sliding_window is not None:
            return min(context, self.sliding_window)
        if self.attention_chunk_size is not None:
            return min(context, self.attention_chunk_size)
        return context

    def cached_keys(self, prefix: int) -> int:
        """Cached keys of a `prefix`-token history that the next chunk of queries can still see."""
        if self.sliding_window is not None:
            return min(prefix, self.sliding_window)
        if self.attention_chunk_size is not None:
            return prefix % self.attention_chunk_size
        return prefix

    def causal_pairs(self, n: int) -> int:
        """Σ_{i=1..n} attended(i): (query, key) pairs of causal attention over the first n tokens.

        Full: n(n+1)/2. Window W: W(W+1)/2 + (n−W)·W once n > W. Chunk c: per full chunk c(c+1)/2.
        """
        if n <= 0:
            return 0
        if self.sliding_window is not None:
            w = self.sliding_window
            return n * (n + 1) // 2 if n <= w else w * (w + 1) // 2 + (n - w) * w
        if self.attention_chunk_size is not None:
            c = self.attention_chunk_size
            full, rest = divmod(n, c)
            return full * (c * (c + 1) // 2) + rest * (rest + 1) // 2
        return n * (n + 1) // 2


@dataclass(frozen=True)
class ModelCosts:
    """Per-GPU sizes of a model that a step's bytes and FLOPs are built from.

    Bytes read per step = `weight_bytes − unread_weight_bytes − (E − E_hit(n)) × expert_bytes ×
    num_moe_layers`. `unread_weight_bytes` is the input-embedding table when it is not tied to the
    LM head (a lookup reads n rows, not the table). FLOPs = 2 × `matmul_params_per_token` × n plus
    attention.
    """

    name: str
    weight_bytes: int  # stored weights on this GPU (quantization included)
    matmul_params_per_token: int  # on this GPU: dense + k routed + shared experts + LM head
    hidden_size: int
    num_layers: int
    tp: int = 1
    unread_weight_bytes: int = 0
    num_moe_layers: int = 0
    num_experts: int = 0
    experts_per_token: int = 0
    expert_bytes: int = 0  # one routed expert of one MoE layer, on this GPU
    ep: int = 1  # expert-parallel ranks (--enable-expert-parallel: TP × DP): each holds E ÷ ep experts, whole
    dp: int = 1  # data-parallel ranks, each its own requests, whose tokens every MoE layer serves under EP
    attention: tuple[AttentionLayerCost, ...] = ()
    state_bytes_per_request: int = 0  # recurrent state on this GPU, all layers
    lm_head_params: int = 0  # vocab × hidden ÷ tp: the LM head's share of matmul_params_per_token
    compute_dtype: str = "bf16"
    compute_dtype_reason: str = "model dtype"
    notes: tuple[str, ...] = field(default=(), compare=False)

    def __post_init__(self) -> None:
        if self.num_moe_layers and not 0 < self.experts_per_token <= self.num_experts:
            raise InvalidParameter(
                f"{self.name}: experts_per_token must be in 1..num_experts, "
                f"got {self.experts_per_token} of {self.num_experts}"
            )

    @property
    def kv_bytes_per_token(self) -> int:
        """KV bytes one token adds on this GPU, summed over the attention layers that store KV."""
        return sum(a.kv_bytes_per_token for a in self.attention if a.stores_kv)

    @property
    def is_moe(self) -> bool:
        return self.num_moe_layers > 0

    @property
    def local_experts(self) -> int:
        """Routed experts of one MoE layer on this GPU (all of them, TP-split, without EP)."""
        return -(-self.num_experts // self.ep)

    def moe_tokens(self, num_tokens: int) -> int:
        """Tokens one MoE layer of this GPU serves when this rank steps `num_tokens`: under EP with DP every
        rank's (the DP ranks step together, layers/fused_moe: the all-gather before the experts)."""
        return num_tokens * (self.dp if self.ep > 1 else 1)


def expected_experts_hit(num_experts: int, experts_per_token: int, num_tokens: int) -> float:
    """Expected distinct experts of one MoE layer that `num_tokens` tokens route to.

    E × (1 − (1 − k/E)^n): each token picks k of E experts; a given expert is among them with
    probability k/E; tokens are independent. Assumes uniform, independent routing (the load-balancing
    objective of Switch Transformer, Fedus et al. 2021 §2.2, pushes towards it). Real routing is
    skewed and correlated within a sequence, so real steps touch somewhat fewer experts. n=1 → k;
    n → ∞ → E.
    """
    if num_experts <= 0 or num_tokens <= 0:
        return 0.0
    return num_experts * (1.0 - (1.0 - experts_per_token / num_experts) ** num_tokens)


def weight_bytes_read(costs: ModelCosts, num_tokens: int) -> int:
    """Weight bytes a step over `num_tokens` tokens reads: all dense weights, the experts it hits.

    Under EP this GPU holds `local_experts` of the E; each is hit with the probability any expert is
    (expected_experts_hit ÷ E) by the tokens its MoE layers serve (`moe_tokens`).
    """
    read = costs.weight_bytes - costs.unread_weight_bytes
    if costs.is_moe:
        n = costs.moe_tokens(num_tokens)
        hit = expected_experts_hit(costs.num_experts, costs.experts_per_token, n) / costs.num_experts
        missed = costs.local_experts * (1.0 - hit)
        read -= round(missed * costs.expert_bytes * costs.num_moe_layers)
    return max(read, 0)


@dataclass(frozen=True)
class StepCost:
    """Bytes and FLOPs of one engine step on one GPU."""

    num_tokens: int
    weight_bytes: int
    kv_bytes: int  # KV read (history) + written (new tokens)
    state_bytes: int  # recurrent state read + written
    linear_flops: int
    attention_flops: int
    allreduce_bytes: int  # payload of all the step's all-reduces (0 without TP)
    layers: int = 0  # transformer layers the step runs (each a group of kernels)
    moe_layers: int = 0
    all_reduces: int = 0  # collectives: TP all-reduces, and under EP with DP the MoE all-gathers/reduce-scatters
    gather_bytes: int = 0  # what this GPU receives in the EP all-gathers and sends in the reduce-scatters
    decode_reqs: int = 0  # decode requests among the step's tokens (one query each)

    @property
    def bytes(self) -> int:
        """All HBM traffic the model counts."""
        return self.weight_bytes + self.kv_bytes + self.state_bytes

    @property
    def flops(self) -> int:
        return self.linear_flops + self.attention_flops

    @property
    def arithmetic_intensity(self) -> float:
        """FLOP per byte moved (starting document §1)."""
        return self.flops / self.bytes if self.bytes else math.inf


def step_cost(
    costs: ModelCosts,
    *,
    decode_reqs: int = 0,
    decode_context: int = 0,
    prefill_tokens: int = 0,
    prefill_prefix: int = 0,
    queries_per_request: int = 1,
) -> StepCost:
    """Bytes and FLOPs of a step with `decode_reqs` decodes at `decode_context` and one prefill chunk.

    Decode: each request's query reads its context's KV (capped per layer at the window/chunk) and
    does 2·heads·(d_qk + d_v) FLOPs per key. Prefill chunk of `prefill_tokens` after
    `prefill_prefix` cached tokens: the cached KV is read once (FlashAttention tiles reuse it across
    the chunk's queries) and each query attends to the prefix plus the causal part of the chunk.
    Every new token's K/V is written. Linear FLOPs: 2 × params × tokens. `queries_per_request` > 1 is a
    speculative verify step: each decode request's k + 1 queries read its KV once (one attention kernel over
    the request's blocks) and each attends to the whole context.
    """
    if min(decode_reqs, decode_context, prefill_tokens, prefill_prefix) < 0 or queries_per_request < 1:
        raise InvalidParameter("batch, context and token counts must be ≥ 0")
    n = decode_reqs * queries_per_request + prefill_tokens
    kv = 0
    attn_flops = 0
    for a in costs.attention:
        dec_keys = a.decode_keys(decode_context)
        kv += decode_reqs * dec_keys * a.kv_bytes_per_token
        attn_flops += (
            decode_reqs * queries_per_request * dec_keys * ATTENTION_MATMULS * a.num_q_heads
            * (a.qk_head_dim + a.v_head_dim)
        )
        if prefill_tokens:
            kv += a.cached_keys(prefill_prefix) * a.kv_bytes_per_token
            pairs = a.causal_pairs(prefill_prefix + prefill_tokens) - a.causal_pairs(prefill_prefix)
            attn_flops += (
                pairs * ATTENTION_MATMULS * a.num_q_heads * (a.prefill_qk_head_dim + a.prefill_v_head_dim)
            )
        if a.stores_kv:
            kv += n * a.kv_bytes_per_token  # write the new tokens' K/V
    requests = decode_reqs + (1 if prefill_tokens else 0)
    state = requests * costs.state_bytes_per_request * STATE_TRAFFIC_FACTOR
    all_reduces, gathers = collectives(costs) if n else (0, 0)
    allreduce = all_reduces * n * costs.hidden_size * ACTIVATION_BYTES
    # allgather_reducescatter (vLLM's default all2all_backend, config/parallel.py): each MoE layer gathers every
    # DP rank's hidden states and scatters the sums back; this GPU moves (ep − 1)/ep of them each way.
    gather = round(gathers * costs.moe_tokens(n) * costs.hidden_size * ACTIVATION_BYTES * (costs.ep - 1) / costs.ep)
    return StepCost(
        num_tokens=n,
        weight_bytes=weight_bytes_read(costs, n) if n else 0,
        kv_bytes=kv,
        state_bytes=state,
        linear_flops=FLOPS_PER_MAC * costs.matmul_params_per_token * n,
        attention_flops=attn_flops,
        allreduce_bytes=allreduce,
        layers=costs.num_layers if n else 0,
        moe_layers=costs.num_moe_layers if n else 0,
        all_reduces=all_reduces + gathers,
        gather_bytes=gather,
        decode_reqs=decode_reqs,
    )


# The LM head is read as 16-bit (estimate): vLLM's fp8.py quantizes LinearBase layers, not ParallelLMHead; ModelOpt
# checkpoints list lm_head in exclude_modules (modelopt.py is_layer_excluded); float32 checkpoints run 16-bit.
LM_HEAD_BYTES_PER_PARAM = 2


def one_layer_draft(costs: ModelCosts, layers: int = 1) -> ModelCosts:
    """An MTP / EAGLE draft as `layers` decoder layers of the target's shapes and the target's LM head (estimate).

    vLLM's MTP drafts (model_executor/models/deepseek_mtp.py) and EAGLE heads (llama_eagle.py) are one decoder
    layer each, with the target's hidden size, sharing its embedding and LM head. Here a layer weighs the target's
    mean layer (its weights less the LM head, over its layers) and attends like its first attention layer.
    """
    lm_head_bytes = costs.lm_head_params * LM_HEAD_BYTES_PER_PARAM
    body = max(costs.weight_bytes - costs.unread_weight_bytes - lm_head_bytes, 0)
    share = layers / max(costs.num_layers, 1)
    return dataclasses.replace(
        costs, name=costs.name + " (draft)", weight_bytes=round(body * share) + lm_head_bytes, unread_weight_bytes=0,
        matmul_params_per_token=round((costs.matmul_params_per_token - costs.lm_head_params) * share)
        + costs.lm_head_params,
        num_layers=layers, num_moe_layers=min(layers, costs.num_moe_layers),
        attention=costs.attention[:layers], state_bytes_per_request=0, notes=())


def collectives(costs: ModelCosts) -> tuple[int, int]:
    """(TP all-reduces, EP all-gathers + reduce-scatters) of one step.

    Megatron-style TP: one all-reduce after attention and one after each MLP / MoE block. Under EP with DP
    the MoE block's all-reduce becomes an all-gather before the experts and a reduce-scatter after them
    (fused_moe's allgather_reducescatter); with EP inside the TP group alone it stays an all-reduce.
    """
    gathered = costs.ep > 1 and costs.dp > 1
    moe_ar = 0 if gathered else costs.num_moe_layers
    all_reduces = (costs.num_layers + (costs.num_layers - costs.num_moe_layers) + moe_ar) if costs.tp > 1 else 0
    return all_reduces, (2 * costs.num_moe_layers if gathered else 0)


def select_compute_dtype(model: ModelSpec, gpu_flops: Mapping[str, float]) -> tuple[str, str]:
    """The tensor-core dtype the model's matmuls run in on this GPU, and why.

    16-bit by default (the model dtype; vLLM's `dtype=auto` downcasts float32 checkpoints to 16 bits,
    config/model.py, logging "Downcasting torch.float32 to …"). FP8 checkpoints (W8A8) use the FP8
    peak when the GPU lists one; NVFP4 uses FP4 when listed. Weight-only schemes (GPTQ, AWQ,
    bitsandbytes, MXFP4, NVFP4/FP8 without the tensor cores) dequantize to 16 bits, so their FLOPs
    run at the 16-bit peak.
    """
    base = "fp16" if model.dtype == "float16" and "fp16" in gpu_flops else "bf16"
    q = model.quant
    if q is None:
        return base, "model dtype " + model.dtype
    method = q.method.lower()
    ct = q.w8a8 if method == "compressed-tensors" else None
    if ct == "int" and "int8" in gpu_flops:
        return "int8", f"{q.method} INT8 weights and activations (W8A8) on INT8 tensor cores"
    fp8 = method in _FP8_COMPUTE_METHODS or ct == "float"
    if fp8:
        if "fp8" in gpu_flops:
            return "fp8", f"{q.method} weights (W8A8) on FP8 tensor cores"
        return base, f"{q.method} weights but no FP8 tensor cores: weight-only, {base} compute"
    if method in _FP4_COMPUTE_METHODS:
        if "fp4" in gpu_flops:
            return "fp4", f"{q.method} weights (W4A4) on FP4 tensor cores"
        return base, f"{q.method} weights but no FP4 tensor cores: weight-only (Marlin), {base} compute"
    return base, f"{q.method} is weight-only: {base} compute"


def _attention_layer_cost(model: ModelSpec, layer: LayerSpec, spec: KVCacheSpec | None, tp: int,
                          dtype_bytes: int) -> AttentionLayerCost:
    """One attention layer's KV read per token and head dims per GPU (MLA: latent for decode, full for prefill)."""
    q_heads = max(1, (layer.num_attention_heads or model.num_attention_heads) // tp)
    head, head_v = layer.head_size, layer.head_size_v or layer.head_size
    if layer.kind == "kv_shared":  # attends over an earlier layer's cache: reads it, stores none
        head = head_v = model.head_size
        kv_bpt = max(1, model.num_kv_heads // tp) * 2 * model.head_size * dtype_bytes
    else:
        kv_bpt = spec.bytes_per_token if spec is not None else 0
    if layer.kind == "mla" and model.mla is not None:
        m = model.mla
        dims = (m.kv_lora_rank + m.qk_rope_head_dim, m.kv_lora_rank,
                m.qk_nope_head_dim + m.qk_rope_head_dim, m.v_head_dim)
    else:
        dims = (head, head_v, head, head_v)
    return AttentionLayerCost(
        layer=layer.index, kv_bytes_per_token=kv_bpt, num_q_heads=q_heads,
        qk_head_dim=dims[0], v_head_dim=dims[1], prefill_qk_head_dim=dims[2], prefill_v_head_dim=dims[3],
        sliding_window=layer.sliding_window, attention_chunk_size=layer.attention_chunk_size,
        stores_kv=layer.kind != "kv_shared",
    )


def _layer_costs(model: ModelSpec, specs: Sequence[KVCacheSpec], tp: int,
                 full_bytes: int) -> tuple[tuple[AttentionLayerCost, ...], int]:
    """The cost of every attention layer, and the recurrent state bytes per request (Mamba/GDN layers)."""
    by_layer = {s.layer: s for s in specs}
    attention: list[AttentionLayerCost] = []
    state = 0
    dtype_bytes = specs[0].dtype_bytes if specs else full_bytes
    for layer in model.layers:
        spec = by_layer.get(layer.index)
        if layer.kind == "mlp_only":
            continue
        if layer.kind == "mamba":
            state += spec.state_bytes if spec is not None else 0
            continue
        attention.append(_attention_layer_cost(model, layer, spec, tp, dtype_bytes))
    return tuple(attention), state


def mla_replicated_params(model: ModelSpec) -> int:
    """Parameters of the MLA down-projections, which every TP rank holds whole (all MLA layers together).

    vLLM model_executor/models/deepseek_v2.py, DeepseekV2MLAAttention.__init__: with a q_lora_rank the
    fused_qkv_a_proj (hidden × (q_lora_rank + kv_lora_rank + qk_rope_head_dim)) is built with
    disable_tp=True; without one the kv_a_proj_with_mqa (hidden × (kv_lora_rank + qk_rope_head_dim)) is a
    ReplicatedLinear. The up-projections (q_b_proj, kv_b_proj) and o_proj are column/row parallel.
    """
    m = model.mla
    if m is None:
        return 0
    per_layer = model.hidden_size * ((m.q_lora_rank or 0) + m.kv_lora_rank + m.qk_rope_head_dim)
    return per_layer * sum(1 for layer in model.layers if layer.kind == "mla")


def _weights_on_gpu(model: ModelSpec, params: ParamCount, *, tp: int, ep: int,
                    weights_bytes: int | None) -> tuple[int, int]:
    """(stored weight bytes on one GPU, replicated MLA parameters it holds beyond its even 1/tp share).

    The even TP split (weights_bytes_per_gpu), less the experts EP puts elsewhere, plus the (tp − 1)/tp share of
    MLA's down-projections that the split left out, at the model's mean stored bytes per parameter.
    """
    from kvplan.model.weights import expert_parallel_bytes_saved, stored_weights_bytes, weights_bytes_per_gpu

    total_bytes = weights_bytes if weights_bytes is not None else stored_weights_bytes(model, params)
    per_gpu = weights_bytes_per_gpu(model, tp=tp, pp=1, total_bytes=total_bytes)
    if ep > 1:
        per_gpu -= expert_parallel_bytes_saved(model, tp=tp, ep=ep)
    replicated = mla_replicated_params(model) * (tp - 1) // tp
    per_gpu += round(replicated * total_bytes / params.total) if params.total else 0
    return per_gpu, replicated


def model_costs(
    model: ModelSpec,
    *,
    tp: int = 1,
    kv_cache_dtype: str = "auto",
    gpu_flops: Mapping[str, float] | None = None,
    weights_bytes: int | None = None,
    dp: int = 1,
    expert_parallel: bool = False,
) -> ModelCosts:
    """Per-GPU costs of `model` under tensor parallelism `tp` (no pipeline parallelism), on one of `dp`
    data-parallel ranks (each its own requests and KV cache).

    `expert_parallel` (vLLM --enable-expert-parallel): the routed experts are spread whole over the
    TP × DP ranks (layers/fused_moe/layer.py: ep_size = tp × dp), so each GPU holds E ÷ (tp × dp) of
    them and its MoE layers serve every DP rank's tokens.

    Parameters by role come from count_parameters, KV per layer from kv.kv_cache_specs.
    `weights_bytes`: stored bytes of the whole model when known (safetensors metadata), else the
    analytic weights_bytes. Matmul parameters per token = attention + dense MLP + routers +
    shared + k routed experts + the LM head (vocab × hidden, tied or not); embeddings and norms
    do no matmul. Everything is split 1/tp (vLLM column/row/vocab-parallel layers) but MLA's
    down-projections, which each rank holds, reads and multiplies whole (mla_replicated_params); norms
    (a few kB) are counted as split.
    `gpu_flops` (dtype → FLOP/s) picks the compute dtype (select_compute_dtype).
    """
    from kvplan.model.kv_cache import kv_cache_specs
    from kvplan.model.weights import count_parameters, quantized_bits_per_weight

    if dp < 1:
        raise InvalidParameter(f"data-parallel-size must be ≥ 1, got {dp}")

    specs = kv_cache_specs(model, tp=tp, pp=1, kv_cache_dtype=kv_cache_dtype)[0]
    params = count_parameters(model)
    moe = model.moe
    ep = tp * dp if expert_parallel and moe is not None else 1
    per_gpu, replicated = _weights_on_gpu(model, params, tp=tp, ep=ep, weights_bytes=weights_bytes)
    full_bytes = _MODEL_DTYPE_BYTES.get(model.dtype, 2)
    lm_head = model.vocab_size * model.hidden_size
    matmul = params.active - params.embedding - params.norms - params.lm_head + lm_head
    # An untied input embedding is looked up (n rows), not streamed: it is not read per step.
    unread = 0 if model.tie_word_embeddings else params.embedding * full_bytes // tp
    # weights_bytes keeps routed experts at the quantized width whenever a scheme is declared.
    expert_bits = quantized_bits_per_weight(model) if model.quant else 8.0 * full_bytes
    expert_bytes = round(params.params_per_expert * expert_bits / 8 / (1 if ep > 1 else tp))
    dtype, reason = select_compute_dtype(model, gpu_flops or {})
    attention, state = _layer_costs(model, specs, tp, full_bytes)
    notes: list[str] = []
    if any(layer.kind == "kv_shared" for layer in model.layers):
        notes.append("KV-sharing layers are costed as full attention over the shared cache")
    return ModelCosts(
        name=model.name,
        weight_bytes=per_gpu,
        matmul_params_per_token=matmul // tp + replicated,
        lm_head_params=lm_head // tp,
        hidden_size=model.hidden_size,
        num_layers=model.num_layers,
        tp=tp,
        unread_weight_bytes=unread,
        num_moe_layers=params.moe_layers if moe is not None else 0,
        num_experts=moe.num_experts if moe is not None else 0,
        experts_per_token=moe.experts_per_token if moe is not None else 0,
        expert_bytes=expert_bytes if moe is not None else 0,
        ep=ep,
        dp=dp,
        attention=attention,
        state_bytes_per_request=state,
        compute_dtype=dtype,
        compute_dtype_reason=reason,
        notes=tuple(notes),
    )


def batch_prefill_cost(costs: ModelCosts, batch: int, prompt: int) -> StepCost:
    """One step that prefills `batch` prompts of `prompt` tokens together (no cached prefix).

    The weights are read once for all `batch × prompt` tokens; KV, state, FLOPs and all-reduce payload
    are one prompt's times `batch` (each prompt attends causally to itself only).
    """
    if batch < 1 or prompt < 1:
        raise InvalidParameter("batch and prompt must be ≥ 1")
    one = step_cost(costs, prefill_tokens=prompt)
    return dataclasses.replace(
        one, num_tokens=batch * prompt, weight_bytes=weight_bytes_read(costs, batch * prompt),
        kv_bytes=batch * one.kv_bytes, state_bytes=batch * one.state_bytes, linear_flops=batch * one.linear_flops,
        attention_flops=batch * one.attention_flops, allreduce_bytes=batch * one.allreduce_bytes,
    )
