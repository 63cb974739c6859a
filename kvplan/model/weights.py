"""Weights: an analytic parameter count from config.json, the bytes the checkpoint stores, and the
bytes vLLM holds once it has loaded them.

Used when the Hub's safetensors metadata is not available. Parameter shapes follow the Hugging Face
modeling files of each family (modeling_llama.py, modeling_mixtral.py, modeling_deepseek_v3.py …); where a
family departs from the Llama shape (biases, norms, sinks, routers, which layers carry an MLP), its module in
kvplan/model/architectures/ says so (`ModelSpec.family.weights`).
Pinned against published parameter counts in tests/test_weights.py.

Stored bytes (`weights_bytes`, `weights_bytes_per_gpu`) are what the checkpoint holds and what a decode
step reads. Loaded bytes (`loaded_weights_bytes_per_gpu`) are what vLLM's "Model loading took X GiB"
reports: the checkpoint re-laid out for the kernels vLLM picks on the GPU, plus buffers the model
builds at init (see "Loaded bytes" below).
"""
from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import NamedTuple

from kvplan.model.spec import LayerSpec, ModelSpec, MoESpec, RecurrentState

FP_BYTES = {"bfloat16": 2, "float16": 2, "float32": 4}  # bytes per element of a float dtype (weights, activations)


@dataclass(frozen=True)
class ParamCount:
    """Parameters by role. `active` is what one token touches (k routed experts of each MoE layer)."""

    total: int
    embedding: int
    lm_head: int
    attention: int  # attention / token-mixer projections (incl. recurrent layers), norms excluded
    mlp: int  # dense MLPs + shared experts + routers
    routed_experts: int  # all routed experts of all MoE layers
    params_per_expert: int  # one routed expert of one MoE layer
    moe_layers: int
    norms: int
    active: int


def _attention_params(model: ModelSpec, layer: LayerSpec) -> int:
    h, rules = model.hidden_size, model.family.weights
    if layer.kind == "mamba":
        assert layer.state is not None
        return _recurrent_params(h, layer.state)
    if layer.kind in ("mlp_only",):
        return 0
    heads = model.num_attention_heads
    if layer.compress_ratio and model.dsv4 is not None:
        return _dsv4_attention_params(model, layer)
    if layer.kind == "mla" and model.mla is not None:
        m = model.mla
        qk = m.qk_nope_head_dim + m.qk_rope_head_dim
        q = h * heads * qk if m.q_lora_rank is None else h * m.q_lora_rank + m.q_lora_rank + m.q_lora_rank * heads * qk
        kv_a = h * (m.kv_lora_rank + m.qk_rope_head_dim) + m.kv_lora_rank  # + kv_a_layernorm
        kv_b = m.kv_lora_rank * heads * (m.qk_nope_head_dim + m.v_head_dim)
        return q + kv_a + kv_b + heads * m.v_head_dim * h + dsa_indexer_params(model)
    # a KV-shared layer: q and o, and the k/v original checkpoints still ship (vLLM drops them)
    hd, kvh = attention_geometry(model, layer)
    q, kv, o = h * heads * hd, h * kvh * hd, heads * hd * h
    n = q + 2 * kv + o
    if rules.attention_bias != "none":
        n += heads * hd + 2 * kvh * hd + (h if rules.attention_bias == "all" else 0)
    if rules.qk_norm:
        n += 2 * hd
    if rules.attention_sinks:
        n += heads  # one per head
    return n


def attention_geometry(model: ModelSpec, layer: LayerSpec) -> tuple[int, int]:
    """(head size, KV heads) of an attention layer's projections: the layer's own (the model's where it names
    none), a KV-shared layer's from kv_shared_geometry."""
    if layer.kind == "kv_shared":
        return kv_shared_geometry(model, layer)
    return layer.head_size or model.head_size, layer.num_kv_heads or model.num_kv_heads


def kv_shared_geometry(model: ModelSpec, layer: LayerSpec) -> tuple[int, int]:
    """(head size, KV heads) of a KV-shared layer's projections: those of the non-shared layers of its type.

    vLLM 0.33 models/gemma4.py:Gemma4DecoderLayer sizes every layer's attention from its layer type
    (config.per_layer_config[layer_idx]: head_dim, num_key_value_heads; 0.20-0.29 gemma4_layer_config alike), the
    shared ones too: Gemma-4-E2B's shared full-attention layers have 512-wide heads like the other full layers,
    not head_dim 256. The type comes from `layer_types`; without it (Gemma-3n: one head size), the model's."""
    types = model.facts.layer_type_names
    if types is not None and layer.index < len(types):
        for other in reversed(model.layers[:layer.index]):
            if other.kind != "kv_shared" and other.index < len(types) and types[other.index] == types[layer.index]:
                return other.head_size or model.head_size, other.num_kv_heads or model.num_kv_heads
    return model.head_size, model.num_kv_heads


def mlp_width(model: ModelSpec, layer: LayerSpec) -> int:
    """A dense layer's MLP width: intermediate_size, twice that in a KV-shared layer of a config with
    use_double_wide_mlp (vLLM 0.20-0.33 models/gemma4.py:Gemma4DecoderLayer.__init__: layer_intermediate_size =
    intermediate_size × 2 for layer_idx ≥ first_kv_shared_layer_idx; Gemma-4-E2B's last 20 layers, 12,288)."""
    wide = model.facts.double_wide_mlp and layer.kind == "kv_shared"
    return model.intermediate_size * (2 if wide else 1)


def dsa_indexer_params(model: ModelSpec) -> int:
    """Parameters of one layer's DeepSeek-sparse-attention indexer (DeepSeek-V3.2, GLM-5), 0 without one.

    vLLM 0.19 models/deepseek_v2.py:Indexer: wq_b (q_lora_rank → index_n_heads·index_head_dim), wk (hidden →
    index_head_dim), k_norm (LayerNorm: weight and bias) and weights_proj (hidden → index_n_heads); the
    checkpoint stores the same four (GLM-5.1-FP8's modules_to_not_convert names its k_norm and the projection)."""
    m = model.mla
    if m is None or not m.index_n_heads or m.q_lora_rank is None:
        return 0
    h, n, d = model.hidden_size, m.index_n_heads, m.index_head_dim
    return m.q_lora_rank * n * d + h * d + 2 * d + h * n


def _dsv4_compressor_params(h: int, ratio: int, head_dim: int) -> int:
    """compressor.py:DeepseekCompressor: ape (ratio × coff·d), fused_wkv_wgate (h → 2·coff·d), norm (d)."""
    coff = 2 if ratio == 4 else 1
    return ratio * coff * head_dim + h * 2 * coff * head_dim + head_dim


def _dsv4_attention_params(model: ModelSpec, layer: LayerSpec) -> int:
    """models/deepseek_v4/attention.py:DeepseekV4Attention: fused_wqa_wkv (h → q_lora + d), q_norm, kv_norm, wq_b
    (q_lora → heads·d), wo_a (grouped: heads·d/groups → groups·o_lora), wo_b (groups·o_lora → h), the attention
    sink; a compressor on ratio 4 / 128 layers; on ratio 4 the indexer (wq_b q_lora → heads_i·d_i, weights_proj
    h → heads_i, its own compressor). The hyper-connection mixers (hc_mult) are left out: ~1 M per layer."""
    d4 = model.dsv4
    assert d4 is not None
    h, heads, d = model.hidden_size, model.num_attention_heads, d4.head_dim
    n = h * (d4.q_lora_rank + d) + d4.q_lora_rank + d + d4.q_lora_rank * heads * d
    n += (heads * d // d4.o_groups) * d4.o_groups * d4.o_lora_rank + d4.o_groups * d4.o_lora_rank * h + heads
    if layer.compress_ratio > 1:
        n += _dsv4_compressor_params(h, layer.compress_ratio, d)
    if layer.compress_ratio == 4:
        n += d4.q_lora_rank * d4.index_n_heads * d4.index_head_dim + h * d4.index_n_heads
        n += _dsv4_compressor_params(h, 4, d4.index_head_dim)
    return n


def _recurrent_params(h: int, s: RecurrentState) -> int:
    k = s.conv_kernel
    if s.variant == "gdn":  # Qwen3-Next GatedDeltaNet
        key, val = s.num_k_heads * s.head_k_dim, s.num_v_heads * s.head_v_dim
        in_proj = h * (2 * key + 2 * val) + h * 2 * s.num_v_heads  # in_proj_qkvz + in_proj_ba
        conv = (2 * key + val) * k
        return in_proj + conv + 2 * s.num_v_heads + s.head_v_dim + val * h  # dt_bias, A_log, norm, out_proj
    if s.variant == "mamba2":
        d, g, n = s.intermediate_size, s.n_groups, s.state_size
        conv_dim = d + 2 * g * n
        in_proj = h * (2 * d + 2 * g * n + s.num_heads)
        return in_proj + conv_dim * k + conv_dim + 3 * s.num_heads + d + d * h  # conv w+b, dt/A/D, norm, out
    if s.variant == "short_conv":  # LFM2 ShortConv (lfm2.py): in_proj h → 3·d, depthwise conv d·k, out_proj d → h
        return 3 * s.intermediate_size * h + s.intermediate_size * k + s.intermediate_size * h
    if s.variant != "mamba1":
        from kvplan.errors import BadConfig

        raise BadConfig(f"the parameters of {s.variant} layers are not counted by kvplan's analytic estimate")
    d, n = s.intermediate_size, s.state_size  # mamba1 (Jamba, Mamba, Falcon-Mamba)
    dt_rank = -(-h // 16)
    return h * 2 * d + d * k + d + d * (dt_rank + 2 * n) + dt_rank * d + d + d * n + d + d * h


def _mlp_params(model: ModelSpec, width: int) -> int:
    h = model.hidden_size
    n = (3 if model.gated_mlp else 2) * h * width
    if model.family.weights.mlp_bias:
        n += width + h
    return n


class _LayerParams(NamedTuple):
    attention: int
    mlp: int  # dense MLP, or the MoE block's router and shared experts
    routed: int  # the MoE block's routed experts
    norms: int

    @property
    def total(self) -> int:
        return self.attention + self.mlp + self.routed + self.norms


def _layer_params(model: ModelSpec, layer: LayerSpec) -> _LayerParams:
    """One decoder layer's parameters by role (count_parameters sums them; stage_stored_bytes splits by them)."""
    h, rules, moe = model.hidden_size, model.family.weights, model.moe
    norm_size = 2 * h if rules.layernorm_bias else h
    attention = _attention_params(model, layer)
    # Falcon's parallel attention/MLP block shares one input norm (modeling_falcon.py).
    norms = norm_size if layer.kind == "mlp_only" or model.facts.parallel_attn else 2 * norm_size
    if layer.kind == "mlp_only" and not layer.moe:
        # one norm for a lone MLP block (Nemotron-H)
        return _LayerParams(attention, _mlp_params(model, model.intermediate_size), 0, norms - norm_size)
    if layer.kind == "mlp_only":
        norms -= norm_size
    if moe is not None and layer.moe:
        per_expert, router, extra_norms = _moe_block(model, moe)
        shared = _mlp_params(model, moe.shared_intermediate_size) if moe.shared_intermediate_size else 0
        if moe.shared_intermediate_size and rules.shared_expert_gate:
            shared += h  # shared_expert_gate
        return _LayerParams(attention, router + shared, moe.num_experts * per_expert, norms + extra_norms)
    if not rules.mixer_layers_have_mlp:
        return _LayerParams(attention, 0, 0, norms)  # Nemotron-H: attention and Mamba layers have no MLP
    if (layer.kind != "mamba" or rules.recurrent_layers_have_mlp) and model.intermediate_size:
        return _LayerParams(attention, _mlp_params(model, mlp_width(model, layer)), 0, norms)
    return _LayerParams(attention, 0, 0, norms)


def count_parameters(model: ModelSpec) -> ParamCount:
    """Analytic parameter count from the config (embeddings, attention incl. MLA, dense and MoE MLPs with
    shared experts and routers, recurrent layers, norms, tied or separate LM head).

    Raises BadConfig when the config lacks what the count needs (`ModelSpec.weights_unknown`)."""
    if model.weights_unknown:
        from kvplan.errors import BadConfig

        raise BadConfig(model.weights_unknown)
    h, v, rules = model.hidden_size, model.vocab_size, model.family.weights
    embedding = v * h
    if rules.learned_positions is not None:  # learned absolute positions: max positions (+ OPT's offset) rows
        embedding += (model.max_model_len + rules.learned_positions) * h
    lm_head = 0 if model.tie_word_embeddings else v * h
    layers = [_layer_params(model, layer) for layer in model.layers]
    attention = sum(x.attention for x in layers)
    mlp = sum(x.mlp for x in layers)
    routed = sum(x.routed for x in layers)
    moe_layers = sum(1 for x in layers if x.routed)
    per_expert = _moe_block(model, model.moe)[0] if moe_layers and model.moe is not None else 0
    norms = sum(x.norms for x in layers) + (2 * h if rules.layernorm_bias else h)  # + the final norm
    ple_embedding, ple_mlp, ple_norms = _per_layer_inputs(model)
    embedding, mlp, norms = embedding + ple_embedding, mlp + ple_mlp, norms + ple_norms
    total = embedding + lm_head + attention + mlp + routed + norms
    moe = model.moe
    active = total - routed + (moe.experts_per_token * per_expert * moe_layers if moe else 0)
    return ParamCount(total=total, embedding=embedding, lm_head=lm_head, attention=attention, mlp=mlp,
                      routed_experts=routed, params_per_expert=per_expert, moe_layers=moe_layers, norms=norms,
                      active=active)


def _moe_block(model: ModelSpec, moe: MoESpec) -> tuple[int, int, int]:
    """One MoE layer's parameters per routed expert, its router, and the block's extra norms: expert and router
    biases (gpt-oss, modeling_gpt_oss.py), Gemma-4's router scales and three RMSNorms (gemma4.py:Gemma4Router)."""
    h, rules = model.hidden_size, model.family.weights
    per_expert = _mlp_params(model, moe.expert_intermediate_size)
    if rules.expert_bias:
        per_expert += 2 * moe.expert_intermediate_size + h
    router = h * moe.num_experts + (moe.num_experts if rules.router_bias else 0)
    extra_norms = 0
    if rules.router_scales:  # scale (h), per_expert_scale (E); the MoE block's three extra RMSNorms
        router += h + moe.num_experts
        extra_norms = 3 * h
    return per_expert, router, extra_norms


def _per_layer_inputs(model: ModelSpec) -> tuple[int, int, int]:
    """Gemma-3n / Gemma-4 "E" models' per-layer embeddings (vLLM 0.33 model_executor/models/gemma4.py:
    Gemma4Model.__init__, gemma3n.py alike) as (embedding, MLP, norm) parameters: embed_tokens_per_layer,
    vocab_size_per_layer_input × (hidden_size_per_layer_input × num_hidden_layers), a projection hidden → that
    width and its norm; in every layer a gate (hidden → ple), a projection back (ple → hidden) and a norm."""
    ple, h = model.facts.per_layer_input_size, model.hidden_size
    if ple <= 0:
        return 0, 0, 0
    total_ple = ple * model.num_layers
    embedding = (model.facts.per_layer_input_vocab or model.vocab_size) * total_ple + h * total_ple + ple
    return embedding, model.num_layers * 2 * h * ple, model.num_layers * h


def per_layer_inputs_bytes(model: ModelSpec, num_tokens: int) -> int:
    """One [num_tokens, num_hidden_layers, hidden_size_per_layer_input] tensor of per-layer inputs in the model dtype
    (Gemma-3n / Gemma-4 "E"; 0 for every other model): the shape of the wrapper's per_layer_embeddings buffer and of
    the projected per-layer inputs the forward carries (vllm.memory.weights, vllm.memory.activation)."""
    return num_tokens * model.num_layers * model.facts.per_layer_input_size * FP_BYTES.get(model.dtype, 2)


def quantized_bits_per_weight(model: ModelSpec) -> float:
    """Stored bits per quantized weight, scales included.

    GPTQ/AWQ: an fp16 scale and a packed zero point per group (bits + (16 + bits) / group_size);
    NVFP4: an FP8 scale per 16 weights (4 + 8/16); MXFP4: an 8-bit scale per 32 (4 + 8/32);
    compressed-tensors by group: a 16-bit scale per group (4 + 16/32 for Kimi-K2.5);
    FP8: per-tensor or 128×128-block scales, negligible (8).
    """
    q = model.quant
    if q is None:
        return 8.0 * FP_BYTES.get(model.dtype, 2)
    if q.method in {"gptq", "awq"} and q.group_size:
        return q.weight_bits + (16 + q.weight_bits) / q.group_size
    if q.method == "modelopt_fp4":
        return 4.0 + 8.0 / (q.group_size or 16)
    if q.method == "mxfp4":
        return 4.0 + 8.0 / 32
    if q.method == "compressed-tensors" and q.weight_bits < 8 and q.group_size and q.group_size > 0:
        # pack-quantized INT4/INT8 by group (compressed_tensors_wNa16.py:create_weights, the WNA16 MoE
        # method alike): weight_packed plus a weight_scale per group in the model dtype (bf16); a
        # symmetric scheme (Kimi-K2.5: 4 bits, group 32 → 4.5 bits) has no zero point.
        return q.weight_bits + 8.0 * FP_BYTES.get(model.dtype, 2) / q.group_size
    return q.weight_bits


def _expert_bias_params(model: ModelSpec, p: ParamCount) -> int:
    """Expert biases (gpt-oss: 2·I + hidden per expert): stored in bf16 next to the MXFP4 blocks."""
    if not model.family.weights.expert_bias or model.moe is None:
        return 0
    return p.moe_layers * model.moe.num_experts * (2 * model.moe.expert_intermediate_size + model.hidden_size)


def stored_weights_bytes(model: ModelSpec, params: ParamCount | None = None) -> int:
    """Stored bytes of the weights: quantized linear layers at their bits, the rest in the model dtype.

    Embeddings, LM head, norms and routers stay unquantized (as GPTQ/AWQ/ModelOpt/MXFP4 checkpoints
    keep them); MXFP4 (gpt-oss) also keeps attention and the expert biases unquantized (its
    modules_to_not_convert; `*_proj_bias` tensors are bf16 in the checkpoint).
    """
    p = params or count_parameters(model)
    full = FP_BYTES.get(model.dtype, 2)
    if model.quant is None:
        return p.total * full + dsv4_fp32_and_table_bytes(model)
    bits = quantized_bits_per_weight(model)
    quantized = p.routed_experts + p.attention + p.mlp
    if model.quant.method == "mxfp4":
        quantized = p.routed_experts - _expert_bias_params(model, p)
    if model.quant.method == "compressed-tensors":
        quantized -= ignored_linear_params(model)
    keep = p.total - quantized
    if _dsv4_fp4_experts(model):  # FP8 linears, MXFP4 routed experts; some linears and the mixers unquantized
        unquantized = dsv4_unquantized_params(model)
        return int(keep * full + (p.attention + p.mlp - unquantized) * bits / 8 + unquantized * full
                   + p.routed_experts * MXFP4_BITS / 8 + dsv4_fp32_and_table_bytes(model))
    return int(keep * full + quantized * bits / 8)


# Bounds on a checkpoint's ignore list (read from config.json): entries and characters per pattern.
_MAX_IGNORE_ENTRIES, _MAX_PATTERN_CHARS = 4096, 256


def _ignore_matcher(entries: tuple[str, ...]) -> tuple[frozenset[str], tuple[re.Pattern[str], ...]]:
    names, patterns = set(), []
    for entry in entries[:_MAX_IGNORE_ENTRIES]:
        if entry.startswith("re:") and len(entry) <= _MAX_PATTERN_CHARS:
            try:
                patterns.append(re.compile(entry[3:]))
            except re.error:
                continue  # vLLM would fail on it; kvplan counts the layer as quantized
        else:
            names.add(entry)
    return frozenset(names), tuple(patterns)


def ignored_linear_params(model: ModelSpec) -> int:
    """Parameters of the attention, shared-expert and dense-MLP linears a compressed-tensors checkpoint leaves
    unquantized through its `ignore` list (Kimi-K2.5: "re:.*self_attn.*", "re:.*shared_experts.*",
    "re:.*mlp\\.(gate|up|gate_up|down)_proj.*": only the routed experts are INT4).

    vLLM 0.19.1 quantization/compressed_tensors/utils.py:_is_equal_or_regex_match: an entry matches a module's
    name exactly, or with "re:" by re.match. Each group is probed by one module of each layer,
    model.layers.{i}.self_attn.o_proj, .mlp.shared_experts.down_proj and .mlp.down_proj."""
    q = model.quant
    if q is None or not q.excluded:
        return 0
    names, patterns = _ignore_matcher(q.excluded)

    def ignored(name: str) -> bool:
        return name in names or any(p.match(name) for p in patterns)

    moe, total = model.moe, 0
    for i, layer in enumerate(model.layers):
        prefix = f"model.layers.{i}."
        if layer.kind not in ("mamba", "mlp_only") and ignored(prefix + "self_attn.o_proj"):
            total += _attention_params(model, layer)
        if moe is not None and layer.moe:
            if moe.shared_intermediate_size and ignored(prefix + "mlp.shared_experts.down_proj"):
                total += _mlp_params(model, moe.shared_intermediate_size)
        elif model.intermediate_size and ignored(prefix + "mlp.down_proj"):
            total += _mlp_params(model, model.intermediate_size)
    return total


def dsv4_unquantized_params(model: ModelSpec) -> int:
    """DeepSeek-V4 linears vLLM builds with quant_config=None (model dtype) in an FP8 checkpoint:
    each compressor's fused_wkv_wgate (h → 2·coff·d, compressor.py:DeepseekCompressor), the indexer's
    weights_proj (h → index heads, attention.py:DeepseekV4Indexer) and the MoE router (h → experts,
    fused_moe/router/gate_linear.py:GateLinear passes quant_config=None). vLLM 0.22–0.33."""
    d4, h = model.dsv4, model.hidden_size
    if d4 is None:
        return 0
    n = 0
    for layer in model.layers:
        if layer.compress_ratio > 1:
            n += h * 2 * (2 if layer.compress_ratio == 4 else 1) * d4.head_dim
        if layer.compress_ratio == 4:  # the indexer: weights_proj and its own (overlapping) compressor
            n += h * d4.index_n_heads + h * 2 * 2 * d4.index_head_dim
        if model.moe is not None and layer.moe:
            n += h * model.moe.num_experts
    return n


def dsv4_fp32_and_table_bytes(model: ModelSpec) -> int:
    """DeepSeek-V4 tensors outside the parameter count: the fp32 hyper-connection mixers of every decoder
    layer (nvidia/model.py:DeepseekV4DecoderLayer: hc_attn/ffn_fn (mix, hc_mult·h), _base (mix), _scale (3),
    mix = (2 + hc_mult)·hc_mult) and of the head (DeepseekV4Model: hc_head_fn (hc_mult, hc_mult·h), _base,
    _scale), and the hash-routed layers' int32 (vocab, top-k) table (DeepseekV4MoE: gate.tid2eid)."""
    d4, h = model.dsv4, model.hidden_size
    if d4 is None:
        return 0
    m = d4.hc_mult
    mix, hc_dim = (2 + m) * m, m * h
    per_layer = 2 * (mix * hc_dim + mix + 3)
    head = m * hc_dim + m + 1
    tables = 0
    if model.moe is not None:
        tables = d4.num_hash_layers * model.vocab_size * model.moe.experts_per_token
    return (model.num_layers * per_layer + head) * 4 + tables * 4


# MXFP4: 4-bit values and one 8-bit (e8m0) scale per 32 (quantized_bits_per_weight).
MXFP4_BITS = 4.0 + 8.0 / 32


def _dsv4_fp4_experts(model: ModelSpec) -> bool:
    """DeepSeek-V4 with expert_dtype fp4 (Flash, Pro): vLLM's DeepseekV4FP8Config loads the routed experts with
    Mxfp4MoEMethod, every other linear as FP8 blocks (quant_config.py)."""
    return model.dsv4 is not None and model.dsv4.fp4_experts and model.quant is not None


def mtp_module_stored_bytes(model: ModelSpec) -> int:
    """Stored bytes of one MTP module as vLLM 0.33 builds it (deepseek_mtp.py:DeepSeekMultiTokenPredictorLayer;
    Qwen3-Next, GLM-4.5 and MiMo alike): a decoder layer like the model's last full-attention (or MLA) layer,
    its enorm / hnorm and the shared head's norm, and eh_proj (2·hidden → hidden, the model dtype). Its
    embedding and LM head are the target's (spec_decode/eagle/utils.py:load_eagle_model shares them). vLLM
    skips these weights unless MTP speculation is on. An estimate: no log measures them."""
    layer = next((x for x in reversed(model.layers) if x.kind in ("full", "mla")), model.layers[-1])
    one = replace(model, layers=(layer,), num_layers=1)
    if one.dsv4 is not None:  # the MTP layer routes by score, not by a hash table (only the first layers do)
        one = replace(one, dsv4=replace(one.dsv4, num_hash_layers=0))
    p = count_parameters(one)
    full = FP_BYTES.get(model.dtype, 2)
    h = model.hidden_size
    block = stored_weights_bytes(one, p) - (p.embedding + p.lm_head) * full
    return int(block + (2 * h * h + 3 * h) * full)


def routed_expert_bytes(model: ModelSpec) -> int:
    """Stored bytes of all routed experts (quantized at the checkpoint's bits): what expert parallelism splits."""
    p = count_parameters(model)
    bits = quantized_bits_per_weight(model) if model.quant is not None else 8.0 * FP_BYTES.get(model.dtype, 2)
    if _dsv4_fp4_experts(model):
        bits = MXFP4_BITS
    return int((p.routed_experts - _expert_bias_params(model, p)) * bits / 8)


def expert_parallel_bytes_saved(model: ModelSpec, *, tp: int, ep: int) -> int:
    """Bytes per GPU expert parallelism saves: the routed experts over `ep` ranks instead of their TP share
    on every rank (vLLM layers/fused_moe/layer.py: ep_size = tp × dp and the expert_map). Experts that do not
    divide evenly go one each to the first ranks (vLLM 0.19.1 layer.py:determine_expert_map: base_experts + 1
    while ep_rank < remainder): the busiest rank holds ceil(E / ep)."""
    experts = routed_expert_bytes(model)
    e = model.moe.num_experts if model.moe is not None else 0
    if e <= 0 or e % ep == 0:
        return experts // tp - experts // ep
    return experts // tp - experts * -(-e // ep) // e


def weights_bytes_per_gpu(model: ModelSpec, *, tp: int = 1, pp: int = 1, total_bytes: int | None = None) -> int:
    """Weights on the busiest GPU: the largest pipeline stage's share, split evenly over TP ranks.

    Approximation: norms and replicated KV projections (tp > KV heads) are counted as sharded.
    """
    if pp == 1:
        total = total_bytes if total_bytes is not None else stored_weights_bytes(model)
        return -(-total // tp)
    return int(-(-max(stage_stored_bytes(model, pp, total_bytes)) // tp))


def stage_stored_bytes(model: ModelSpec, pp: int, total_bytes: int | None) -> list[float]:
    """Stored bytes of each pipeline stage: its own layers' parameters (a DeepSeek stage holding the dense
    first_k_dense layers is lighter than one of MoE layers), the embedding on the first, the LM head on the
    last, all scaled by the model's average bytes per parameter (vllm/distributed/utils.py:get_pp_indices
    places the layers)."""
    from kvplan.model.parallel import pp_layer_ranges

    p = count_parameters(model)
    total = total_bytes if total_bytes is not None else stored_weights_bytes(model, p)
    ranges = pp_layer_ranges(model.num_layers, pp)
    layer_params: list[float] = [_layer_params(model, layer).total for layer in model.layers]
    rest = p.total - p.embedding - p.lm_head - sum(layer_params)  # final norm, per-layer-input MLPs
    if len(layer_params) != model.num_layers:  # no per-layer description: an even split
        layer_params = [(p.total - p.embedding - p.lm_head) / max(1, model.num_layers)] * model.num_layers
        rest = 0
    scale = total / p.total
    return [(sum(layer_params[j] for j in r) + rest * len(r) / max(1, model.num_layers)
             + (p.embedding if i == 0 else 0) + (p.lm_head if i == len(ranges) - 1 else 0)) * scale
            for i, r in enumerate(ranges)]


# kvplan's tolerance: a checkpoint's stored bytes and the analytic count differ by what the count leaves
# out (multimodal towers, MTP layers, quantization scales), rarely by half; 2× apart means one is wrong.
METADATA_TOLERANCE = 2.0


def metadata_disagreement(model: ModelSpec, metadata_bytes: int) -> str | None:
    """A note when the Hub's safetensors total and the config's analytic stored bytes (stored_weights_bytes)
    are more than METADATA_TOLERANCE× apart; None when they agree or the config cannot be counted."""
    from kvplan.errors import BadConfig

    try:
        analytic = stored_weights_bytes(model)
    except BadConfig:
        return None
    if analytic <= 0 or metadata_bytes <= 0:
        return None
    ratio = metadata_bytes / analytic
    if 1 / METADATA_TOLERANCE <= ratio <= METADATA_TOLERANCE:
        return None
    return (f"the Hub's safetensors metadata holds {metadata_bytes / 2**30:,.2f} GiB of weights, the config's "
            f"analytic count {analytic / 2**30:,.2f} GiB ({ratio:.2f}×, more than {METADATA_TOLERANCE:g}× apart); "
            "the metadata (the checkpoint as stored) is used")
