"""Read a Hugging Face config.json (a dict) into a ModelSpec: what vLLM derives from it.

Pure: no I/O. Rules follow vLLM 0.33 (`transformers_utils/config.py:get_hf_text_config`,
`transformers_utils/model_arch_config_convertor.py`, `config/model.py`), cited per function.
"""
from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from kvplan.errors import BadConfig

LayerKind = Literal["full", "sliding_window", "chunked_local", "mla", "mamba", "kv_shared", "mlp_only"]
# kv_shared: reuses another layer's KV (YOCO, Gemma-3n/4 num_kv_shared_layers): no cache of its own.
# mlp_only: a layer without a token mixer (Nemotron-H "-" / "E"): no cache.
RecurrentVariant = Literal["mamba1", "mamba2", "gdn", "short_conv", "linear_attention"]


@dataclass(frozen=True)
class RecurrentState:
    """Dimensions of a recurrent (state-space / linear-attention) layer's per-request state.

    The state tensor shapes per TP rank are computed in `kvplan.model.kv_cache.recurrent_state_shapes`
    (vLLM model_executor/layers/mamba/mamba_utils.py:MambaStateShapeCalculator).
    """

    variant: RecurrentVariant
    conv_kernel: int = 0
    # mamba1: d_inner, d_state. mamba2: d_inner, n_groups, d_state, num_heads, head_dim.
    # gdn: num_k_heads, num_v_heads, head_k_dim, head_v_dim.
    intermediate_size: int = 0
    state_size: int = 0
    n_groups: int = 0
    num_heads: int = 0
    head_dim: int = 0
    num_k_heads: int = 0
    num_v_heads: int = 0
    head_k_dim: int = 0
    head_v_dim: int = 0
    conv_dtype: str = "bfloat16"
    ssm_dtype: str = "bfloat16"


@dataclass(frozen=True)
class LayerSpec:
    """One decoder layer as the KV cache sees it (totals across TP; kv.py splits per rank)."""

    index: int
    kind: LayerKind
    num_kv_heads: int = 0
    head_size: int = 0
    head_size_v: int = 0
    sliding_window: int | None = None
    attention_chunk_size: int | None = None
    state: RecurrentState | None = None
    num_attention_heads: int = 0  # query heads (attention FLOPs)
    moe: bool = False  # this layer's MLP is a mixture of experts


@dataclass(frozen=True)
class MoESpec:
    """Mixture-of-experts MLP dimensions."""

    num_experts: int
    experts_per_token: int
    expert_intermediate_size: int
    shared_intermediate_size: int = 0  # total width of the always-on shared expert(s)
    router_bias: bool = False


@dataclass(frozen=True)
class MLADims:
    """Multi-head latent attention projections (DeepSeek-V2/V3)."""

    kv_lora_rank: int
    qk_rope_head_dim: int
    qk_nope_head_dim: int
    v_head_dim: int
    q_lora_rank: int | None


@dataclass(frozen=True)
class QuantSpec:
    """Weight quantization declared by the checkpoint (quantization_config / hf_quant_config.json)."""

    method: str  # fp8, gptq, awq, modelopt_fp8, modelopt_fp4 (nvfp4), mxfp4, compressed-tensors, bitsandbytes
    weight_bits: float  # stored bits per quantized weight, scales excluded
    group_size: int | None = None
    kv_cache_dtype: str | None = None  # KV scheme the checkpoint declares (vLLM uses it under `auto`)
    excluded: tuple[str, ...] = ()  # module name patterns kept unquantized


@dataclass(frozen=True)
class ModelSpec:
    """What kvplan needs from a model's config.json, resolved the way vLLM resolves it."""

    name: str
    model_type: str
    architectures: tuple[str, ...]
    dtype: str  # bfloat16 | float16 | float32: the model dtype (`auto` KV dtype)
    hidden_size: int
    num_layers: int
    num_attention_heads: int
    num_kv_heads: int  # total KV heads of the full-attention layers
    head_size: int
    vocab_size: int
    intermediate_size: int  # dense MLP width (0 if every layer is MoE)
    max_model_len: int  # derived as config/model.py:_get_and_verify_max_len
    layers: tuple[LayerSpec, ...]
    tie_word_embeddings: bool = False
    gated_mlp: bool = True  # SwiGLU-style: gate, up, down (3 matrices) vs up, down (2)
    moe: MoESpec | None = None
    mla: MLADims | None = None
    quant: QuantSpec | None = None
    max_model_len_source: str = ""
    notes: tuple[str, ...] = ()
    raw: Mapping[str, Any] = field(default_factory=dict, repr=False, compare=False)


# ---------------------------------------------------------------------------------------------
# Parsing
# ---------------------------------------------------------------------------------------------

# transformers' Gemma3TextConfig defaults: the multimodal gemma-3 configs omit these keys and vLLM reads
# them through transformers (transformers/models/gemma3/configuration_gemma3.py).
_GEMMA3_TEXT_DEFAULTS: dict[str, Any] = {
    "vocab_size": 262_208,
    "hidden_size": 2304,
    "intermediate_size": 9216,
    "num_hidden_layers": 26,
    "num_attention_heads": 8,
    "num_key_value_heads": 4,
    "head_dim": 256,
    "max_position_embeddings": 131_072,
    "sliding_window": 4096,
    "sliding_window_pattern": 6,
    "tie_word_embeddings": True,
}
# transformers' Gemma2Config defaults (configuration_gemma2.py).
_GEMMA2_DEFAULTS: dict[str, Any] = {
    "vocab_size": 256_000,
    "head_dim": 256,
    "max_position_embeddings": 8192,
    "sliding_window": 4096,
    "tie_word_embeddings": True,
}
_DEFAULTS_BY_TYPE: dict[str, dict[str, Any]] = {
    "gemma3_text": _GEMMA3_TEXT_DEFAULTS,
    "gemma3": _GEMMA3_TEXT_DEFAULTS,
    "gemma2": _GEMMA2_DEFAULTS,
}

# Model types whose attention is MLA when kv_lora_rank is set
# (transformers_utils/model_arch_config_convertor.py: is_deepseek_mla).
_MLA_MODEL_TYPES = frozenset(
    {"deepseek_v2", "deepseek_v3", "deepseek_v32", "deepseek_mtp", "kimi_k2", "kimi_linear", "glm_moe_dsa",
     "longcat_flash", "pangu_ultra_moe", "mistral_large_3"}
)

# config/model.py:_get_and_verify_max_len: the keys that may bound the context length.
_MAX_LEN_KEYS = (
    "max_position_embeddings", "n_positions", "max_seq_len", "seq_length", "model_max_length",
    "max_target_positions", "max_sequence_length", "max_seq_length", "seq_len",
)
# Rope types whose `factor` is already reflected in max_position_embeddings (same function).
_ROPE_TYPES_NOT_SCALING_LEN = frozenset({"su", "longrope", "llama3", "yarn", "deepseek_yarn",
                                        "deepseek_llama_scaling", "mrope", "default", "proportional"})
_DEFAULT_MAX_LEN = 2048  # same function: "if none is found, default to 2048"

# KV-head keys in vLLM's order (transformers_utils/config.py:CONFIG_FIELD_ALIASES / get_total_num_kv_heads).
_KV_HEAD_KEYS = ("n_head_kv", "num_kv_heads", "num_key_value_heads", "multi_query_group_num", "num_attention_groups")

_TORCH_DTYPES = {"bfloat16": "bfloat16", "float16": "float16", "half": "float16", "float32": "float32",
                 "float": "float32", "fp16": "float16", "bf16": "bfloat16"}


def _ints_positive(value: Any, key: str) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value != value:
        raise BadConfig(f"config.json: {key} must be a positive integer, got {value!r}")
    if isinstance(value, float) and (not value.is_integer()):
        raise BadConfig(f"config.json: {key} must be a whole number, got {value!r}")
    if value <= 0 or value > 2**40:
        raise BadConfig(f"config.json: {key} must be a positive integer, got {value!r}")
    return int(value)


def _quant_number(value: Any, key: str, *, maximum: float) -> float:
    """A positive, finite number from a quantization config (bits per weight), at most `maximum`."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value <= maximum:
        raise BadConfig(f"quantization config: {key} must be a positive number, got {value!r}")
    return float(value)


def _quant_group(value: Any, key: str) -> int | None:
    """A group size: a positive whole number; None, 0 or negative (GPTQ's -1: per channel) mean none."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value != value or (
            isinstance(value, float) and not value.is_integer()) or value > 2**40:
        raise BadConfig(f"quantization config: {key} must be a whole number, got {value!r}")
    return int(value) if value > 0 else None


def _names(value: Any, what: str) -> tuple[str, ...]:
    """A list of names (architectures, module patterns), or one name."""
    if not value:
        return ()
    if isinstance(value, str):
        return (value,)
    if not isinstance(value, list):
        raise BadConfig(f"{what} must list names, got {type(value).__name__}")
    return tuple(str(x) for x in value)


_MAX_WEIGHT_BITS = 64.0  # no stored weight format is wider than float64


class _Cfg:
    """Typed reads from the text config with aliases, defaults and clear errors."""

    def __init__(self, data: Mapping[str, Any], top: Mapping[str, Any]) -> None:
        self.d = data
        self.top = top

    def has(self, key: str) -> bool:
        return self.d.get(key) is not None

    def get(self, key: str, default: Any = None) -> Any:
        v = self.d.get(key)
        return default if v is None else v

    def num(self, *keys: str, default: int | None = None, what: str | None = None) -> int:
        for k in keys:
            v = self.d.get(k)
            if v is not None:
                return _ints_positive(v, k)
        if default is not None:
            return default
        raise BadConfig(f"config.json has no {what or ' / '.join(keys)}")

    def opt_int(self, *keys: str) -> int | None:
        for k in keys:
            v = self.d.get(k)
            if v is not None:
                return _ints_positive(v, k)
        return None


def parse_config(
    config: Mapping[str, Any],
    *,
    name: str = "model",
    quant_config: Mapping[str, Any] | None = None,
) -> ModelSpec:
    """Turn a config.json dict (and hf_quant_config.json, if any) into a ModelSpec.

    Never guesses silently: a structure kvplan does not understand raises BadConfig naming it.
    """
    if not isinstance(config, Mapping):
        raise BadConfig("config.json must hold a JSON object")
    top = config
    text = config.get("text_config")
    if text is not None and not isinstance(text, Mapping):
        raise BadConfig("config.json: text_config must be an object")
    # transformers_utils/config.py:get_hf_text_config: the text sub-config of multimodal models.
    data: dict[str, Any] = dict(text) if text else dict(config)
    model_type = str(data.get("model_type") or top.get("model_type") or "")
    for k, v in _DEFAULTS_BY_TYPE.get(model_type, {}).items():
        data.setdefault(k, v)
        if data[k] is None:
            data[k] = v
    c = _Cfg(data, top)
    architectures = _names(top.get("architectures") or data.get("architectures"), "config.json: architectures")

    num_layers = c.num("num_hidden_layers", "n_layer", "num_layers", "n_layers", what="num_hidden_layers")
    hidden = c.num("hidden_size", "n_embd", "d_model", "model_dim", what="hidden_size")
    heads = c.num("num_attention_heads", "n_head", "n_heads", "num_heads", what="num_attention_heads")
    kv_heads = _total_kv_heads(c, model_type, heads)
    if heads % kv_heads:
        raise BadConfig(f"config.json: num_attention_heads ({heads}) is not a multiple of the KV heads ({kv_heads})")
    mla = _mla_dims(c, model_type)
    head_size = _head_size(c, hidden, heads)
    vocab = c.num("vocab_size", "padded_vocab_size", "n_vocab", what="vocab_size")
    dtype = _model_dtype(data, top)
    moe = _moe(c)
    intermediate = _dense_intermediate(c, model_type, hidden, moe)
    max_len, max_len_src = _max_model_len(data, model_type)
    layers, notes = _layers(c, model_type, num_layers, heads, kv_heads, head_size, mla, dtype, moe)
    tie = top.get("tie_word_embeddings", data.get("tie_word_embeddings"))
    if tie is None:
        # transformers' config defaults for these families tie the LM head to the embeddings.
        tie = model_type in {"gpt2", "opt", "gemma", "gemma2", "gemma3", "gemma3_text", "cohere"}
    gated = model_type not in {"gpt2", "opt", "falcon", "RefinedWeb", "RefinedWebModel", "gpt_bigcode",
                               "gptj", "gpt_neox", "bloom", "phi", "starcoder2"}
    if model_type == "nemotron_h":
        gated = False  # relu² MLP: up and down only (modeling_nemotron_h.py)
    quant = _quant(top.get("quantization_config") or data.get("quantization_config"), quant_config)
    return ModelSpec(
        name=name,
        model_type=model_type,
        architectures=architectures,
        dtype=dtype,
        hidden_size=hidden,
        num_layers=num_layers,
        num_attention_heads=heads,
        num_kv_heads=1 if mla else kv_heads,
        head_size=head_size if not mla else mla.kv_lora_rank + mla.qk_rope_head_dim,
        vocab_size=vocab,
        intermediate_size=intermediate,
        max_model_len=max_len,
        layers=layers,
        tie_word_embeddings=bool(tie),
        gated_mlp=gated,
        moe=moe,
        mla=mla,
        quant=quant,
        max_model_len_source=max_len_src,
        notes=tuple(notes),
        raw=data,
    )


def _total_kv_heads(c: _Cfg, model_type: str, heads: int) -> int:
    """vLLM ModelArchConfigConvertorBase.get_total_num_kv_heads, with its Falcon override."""
    if model_type in {"falcon", "RefinedWeb", "RefinedWebModel"}:
        # Falcon: new_decoder_architecture → n_head_kv; multi_query → 1; else MHA.
        if c.get("new_decoder_architecture"):
            return c.num("n_head_kv", "num_kv_heads", default=heads)
        return 1 if c.get("multi_query", True) else heads
    if model_type == "chatglm" and not c.get("multi_query_attention", False):
        return heads
    kv = c.opt_int(*_KV_HEAD_KEYS)
    return kv if kv is not None else heads


def _head_size(c: _Cfg, hidden: int, heads: int) -> int:
    """ModelArchConfigConvertorBase.get_head_size: head_dim, hidden_size_per_head, else hidden // heads."""
    hd = c.get("head_dim")
    if isinstance(hd, (int, float)) and not isinstance(hd, bool) and hd > 0:
        return _ints_positive(hd, "head_dim")
    for key in ("hidden_size_per_head", "attention_head_dim", "kv_channels"):
        if c.has(key):
            return c.num(key)
    if hidden % heads:
        raise BadConfig(f"config.json: hidden_size ({hidden}) is not divisible by num_attention_heads ({heads}) "
                        "and there is no head_dim")
    return hidden // heads


def _mla_dims(c: _Cfg, model_type: str) -> MLADims | None:
    """MLA: one latent of kv_lora_rank + qk_rope_head_dim per token per layer (MLAAttentionSpec)."""
    if model_type not in _MLA_MODEL_TYPES or not c.has("kv_lora_rank"):
        return None
    return MLADims(
        kv_lora_rank=c.num("kv_lora_rank"),
        qk_rope_head_dim=c.num("qk_rope_head_dim"),
        qk_nope_head_dim=c.num("qk_nope_head_dim"),
        v_head_dim=c.num("v_head_dim"),
        q_lora_rank=c.opt_int("q_lora_rank"),
    )


def _model_dtype(data: Mapping[str, Any], top: Mapping[str, Any]) -> str:
    """The dtype vLLM runs with under --dtype auto (config/model.py:_resolve_auto_dtype).

    A float32 (or absent) config dtype is served as bfloat16 on GPUs that support it.
    """
    raw = data.get("torch_dtype") or data.get("dtype") or top.get("torch_dtype") or top.get("dtype")
    if raw is None:
        return "bfloat16"
    name = str(raw).replace("torch.", "")
    if name not in _TORCH_DTYPES:
        raise BadConfig(f"config.json: unknown torch_dtype {raw!r}")
    dt = _TORCH_DTYPES[name]
    return "bfloat16" if dt == "float32" else dt


def _moe(c: _Cfg) -> MoESpec | None:
    num = c.opt_int("num_experts", "num_local_experts", "n_routed_experts", "moe_num_experts")
    if not num or num <= 1:
        return None
    k = c.num("num_experts_per_tok", "top_k_experts", "experts_per_token", "moe_topk", "num_experts_per_token",
              what="num_experts_per_tok")
    width = c.num("moe_intermediate_size", "expert_intermediate_size", "intermediate_size",
                  what="moe_intermediate_size")
    shared = 0
    if c.has("shared_expert_intermediate_size"):
        shared = c.num("shared_expert_intermediate_size")
    elif c.has("n_shared_experts"):
        shared = c.num("n_shared_experts") * width
    elif c.has("shared_intermediate_size"):
        shared = c.num("shared_intermediate_size")
    elif str(c.get("model_type", "")).startswith("llama4"):
        shared = c.num("intermediate_size")  # Llama-4: one always-on shared expert (modeling_llama4.py)
    return MoESpec(num_experts=num, experts_per_token=k, expert_intermediate_size=width,
                   shared_intermediate_size=shared)


def _dense_intermediate(c: _Cfg, model_type: str, hidden: int, moe: MoESpec | None) -> int:
    for key in ("intermediate_size_mlp", "ffn_hidden_size", "intermediate_size", "n_inner", "ffn_dim"):
        if c.has(key):
            if moe and key == "intermediate_size" and moe.expert_intermediate_size == c.num(key) and \
                    not c.has("moe_intermediate_size"):
                return 0  # Mixtral-style: intermediate_size is the expert width, no dense MLP
            return c.num(key)
    if model_type in {"gpt2", "falcon", "RefinedWeb", "RefinedWebModel"}:
        return 4 * hidden  # GPT-2 n_inner=None and Falcon: 4 × hidden (modeling_gpt2.py, modeling_falcon.py)
    raise BadConfig("config.json has no intermediate_size")


def _max_model_len(data: Mapping[str, Any], model_type: str) -> tuple[int, str]:
    """config/model.py:_get_and_verify_max_len: the smallest bounding key, times the rope factor."""
    found: list[tuple[int, str]] = []
    for key in _MAX_LEN_KEYS:
        v = data.get(key)
        if isinstance(v, (int, float)) and not isinstance(v, bool) and 0 < v < math.inf:
            found.append((int(v), key))
    model_max = next((v for v, k in found if k == "model_max_length"), None)
    if model_max is not None:
        length, src = model_max, "model_max_length"
    elif found:
        length, src = min(found)
    else:
        return _DEFAULT_MAX_LEN, "vLLM default (no length key in config.json)"
    rope = data.get("rope_scaling")
    if isinstance(rope, Mapping) and "gemma3" not in model_type:
        rtype = str(rope.get("rope_type") or rope.get("type") or "default")
        factor = rope.get("factor")
        if rtype not in _ROPE_TYPES_NOT_SCALING_LEN and isinstance(factor, (int, float)) and \
                not isinstance(factor, bool) and 1 < factor < math.inf:
            length = int(length * factor)
            src += f" × rope factor {factor:g} ({rtype})"
    return length, src


def _layer_pattern(c: _Cfg, model_type: str, n: int) -> list[str]:
    """Per-layer token-mixer type, from whichever key this model family uses (config/model.py)."""
    lt = c.get("layer_types")
    if lt is not None:
        if not isinstance(lt, list) or len(lt) != n:
            raise BadConfig(f"config.json: layer_types must list {n} entries")
        return [str(x) for x in lt]
    pattern = c.get("hybrid_override_pattern")
    if pattern is not None:  # Nemotron-H: M = Mamba2, * = attention, - = MLP, E = MoE
        if not isinstance(pattern, str) or len(pattern) != n:
            raise BadConfig(f"config.json: hybrid_override_pattern must have {n} characters")
        names = {"M": "mamba", "*": "full_attention", "-": "mlp", "E": "moe"}
        bad = set(pattern) - set(names)
        if bad:
            raise BadConfig(f"config.json: hybrid_override_pattern has unknown layer codes {sorted(bad)}")
        return [names[ch] for ch in pattern]
    lbt = c.get("layers_block_type")
    if lbt is not None:  # Jamba / Zamba2
        if not isinstance(lbt, list) or len(lbt) != n:
            raise BadConfig(f"config.json: layers_block_type must list {n} entries")
        return [str(x) for x in lbt]
    if c.has("attn_type_list"):  # MiniMax: 1 = softmax attention, 0 = lightning (linear) attention
        atl = c.get("attn_type_list")
        if not isinstance(atl, list) or len(atl) != n:
            raise BadConfig(f"config.json: attn_type_list must list {n} entries")
        return ["full_attention" if x == 1 else "linear_attention" for x in atl]
    if c.has("full_attention_interval"):  # Qwen3-Next: every k-th layer is full attention
        k = c.num("full_attention_interval")
        return ["full_attention" if (i + 1) % k == 0 else "linear_attention" for i in range(n)]
    if model_type in {"mamba", "mamba2", "falcon_mamba"}:
        return ["mamba"] * n
    window = _sliding_window(c)
    if window is None:
        return ["full_attention"] * n
    if model_type in {"gemma3", "gemma3_text"} or c.has("sliding_window_pattern"):
        p = c.num("sliding_window_pattern", default=6)
        # transformers Gemma3: sliding unless (i + 1) % pattern == 0.
        return ["full_attention" if (i + 1) % p == 0 else "sliding_attention" for i in range(n)]
    if model_type == "gemma2":
        return ["sliding_attention" if i % 2 == 0 else "full_attention" for i in range(n)]
    if model_type == "gpt_oss":
        # vLLM gpt_oss.py: even layers use the sliding window.
        return ["sliding_attention" if i % 2 == 0 else "full_attention" for i in range(n)]
    if model_type in {"qwen2", "qwen2_moe", "qwen3", "qwen3_moe"} and c.has("max_window_layers"):
        mwl = c.get("max_window_layers")
        if isinstance(mwl, bool) or not isinstance(mwl, int) or mwl < 0:
            raise BadConfig(f"config.json: max_window_layers must be a whole number ≥ 0, got {mwl!r}")
        return ["sliding_attention" if i >= mwl else "full_attention" for i in range(n)]
    # engine/arg_utils.py: a model-wide sliding_window applies to every layer.
    return ["sliding_attention"] * n


def _sliding_window(c: _Cfg) -> int | None:
    """ModelConfig.get_sliding_window: 0 means none; Qwen2-style use_sliding_window=false disables it."""
    if c.get("use_sliding_window") is False:
        return None
    w = c.get("sliding_window")
    if w is None or w == 0:
        return None
    return _ints_positive(w, "sliding_window")


def _layers(
    c: _Cfg, model_type: str, n: int, heads: int, kv_heads: int, head_size: int,
    mla: MLADims | None, dtype: str, moe: MoESpec | None,
) -> tuple[tuple[LayerSpec, ...], list[str]]:
    notes: list[str] = []
    types = _layer_pattern(c, model_type, n)
    window = _sliding_window(c)
    chunk = c.opt_int("attention_chunk_size")
    no_rope = c.get("no_rope_layers")
    global_kv = c.opt_int("num_global_key_value_heads")
    global_hd = c.opt_int("global_head_dim")
    shared_kv = c.num("num_kv_shared_layers", default=0) if c.get("num_kv_shared_layers") else 0
    moe_layers = _moe_layer_set(c, n, moe, types)
    state = _recurrent_state(c, model_type, dtype) if any(
        t in {"mamba", "linear_attention", "mamba2", "mamba1"} for t in types) else None
    out: list[LayerSpec] = []
    for i, t in enumerate(types):
        is_moe = i in moe_layers
        if i >= n - shared_kv:
            out.append(LayerSpec(i, "kv_shared", num_attention_heads=heads, moe=is_moe))
            continue
        if t in {"mamba", "linear_attention", "mamba2", "mamba1"}:
            assert state is not None
            out.append(LayerSpec(i, "mamba", state=state, moe=is_moe))
        elif t in {"mlp", "moe"}:
            out.append(LayerSpec(i, "mlp_only", moe=t == "moe"))
        elif mla is not None:
            out.append(LayerSpec(i, "mla", num_kv_heads=1, head_size=mla.kv_lora_rank + mla.qk_rope_head_dim,
                                 head_size_v=0, num_attention_heads=heads, moe=is_moe))
        elif t in {"full_attention", "attention", "global", "hybrid"}:
            h, d = kv_heads, head_size
            if global_kv or global_hd:  # Gemma-4: global layers have their own KV heads and head size
                h, d = global_kv or kv_heads, global_hd or head_size
            kind: LayerKind = "full"
            if chunk and model_type.startswith("llama4"):
                # vLLM llama4.py: RoPE layers (no_rope_layers[i] == 1) use chunked local attention;
                # transformers' default makes every 4th layer NoPE (global).
                uses_rope = (no_rope[i] if isinstance(no_rope, list) and len(no_rope) == n
                             else int((i + 1) % 4 != 0))
                kind = "chunked_local" if uses_rope else "full"
            out.append(LayerSpec(i, kind, num_kv_heads=h, head_size=d, head_size_v=d,
                                 attention_chunk_size=chunk if kind == "chunked_local" else None,
                                 num_attention_heads=heads, moe=is_moe))
        elif t in {"sliding_attention", "local", "sliding"}:
            if window is None:
                raise BadConfig("config.json: layer_types has sliding_attention layers but no sliding_window")
            out.append(LayerSpec(i, "sliding_window", num_kv_heads=kv_heads, head_size=head_size,
                                 head_size_v=head_size, sliding_window=window, num_attention_heads=heads,
                                 moe=is_moe))
        else:
            raise BadConfig(f"config.json: layer type {t!r} (layer {i}) is not understood by kvplan")
    if shared_kv:
        notes.append(f"the last {shared_kv} layers reuse earlier layers' KV (num_kv_shared_layers): no cache")
    return tuple(out), notes


def _moe_layer_set(c: _Cfg, n: int, moe: MoESpec | None, types: list[str]) -> frozenset[int]:
    """Which layers have an MoE MLP (DeepSeek first_k_dense_replace, Qwen decoder_sparse_step, Llama-4 …)."""
    if moe is None:
        return frozenset()
    if types and any(t in {"mlp", "moe"} for t in types):
        return frozenset(i for i, t in enumerate(types) if t == "moe")
    if isinstance(c.get("moe_layers"), list):
        listed = c.get("moe_layers")
        if not all(isinstance(x, int) and not isinstance(x, bool) for x in listed):
            raise BadConfig("config.json: moe_layers must list layer numbers")
        return frozenset(x for x in listed if 0 <= x < n)
    first_dense = c.num("first_k_dense_replace", default=0) if c.get("first_k_dense_replace") else 0
    step = c.num("decoder_sparse_step", "moe_layer_freq", "interleave_moe_layer_step", default=1)
    mlp_only = c.get("mlp_only_layers") or []
    if not isinstance(mlp_only, list):
        raise BadConfig("config.json: mlp_only_layers must list layer numbers")
    return frozenset(i for i in range(n) if i >= first_dense and (i + 1) % step == 0 and i not in mlp_only)


def _recurrent_state(c: _Cfg, model_type: str, dtype: str) -> RecurrentState:
    """Per-request state dimensions of linear-attention / Mamba layers (MambaStateShapeCalculator inputs)."""
    if model_type.startswith("qwen3_next") or model_type.startswith("qwen3_5") or c.has("linear_num_value_heads"):
        return RecurrentState(
            variant="gdn",
            conv_kernel=c.num("linear_conv_kernel_dim"),
            num_k_heads=c.num("linear_num_key_heads"),
            num_v_heads=c.num("linear_num_value_heads"),
            head_k_dim=c.num("linear_key_head_dim"),
            head_v_dim=c.num("linear_value_head_dim"),
            conv_dtype=dtype,
            ssm_dtype=dtype,
        )
    hidden = c.num("hidden_size", "d_model")
    if model_type == "nemotron_h":
        heads, hd = c.num("mamba_num_heads"), c.num("mamba_head_dim")
        # vLLM models/config.py NemotronH: the SSM state is kept in float32 (mamba_ssm_cache_dtype).
        return RecurrentState(variant="mamba2", conv_kernel=c.num("conv_kernel"), intermediate_size=heads * hd,
                              state_size=c.num("ssm_state_size"), n_groups=c.num("n_groups"), num_heads=heads,
                              head_dim=hd, conv_dtype=dtype, ssm_dtype="float32")
    if c.has("mamba_n_heads") or c.has("mamba_d_head"):  # Granite-4.0-H / Bamba / FalconH1-style Mamba2
        expand = c.num("mamba_expand", default=2)
        heads, hd = c.num("mamba_n_heads"), c.num("mamba_d_head")
        return RecurrentState(variant="mamba2", conv_kernel=c.num("mamba_d_conv"),
                              intermediate_size=expand * hidden, state_size=c.num("mamba_d_state"),
                              n_groups=c.num("mamba_n_groups", default=1), num_heads=heads, head_dim=hd,
                              conv_dtype=dtype, ssm_dtype=dtype)
    if c.has("mamba_d_state") or c.has("mamba_expand"):  # Jamba: Mamba1
        return RecurrentState(variant="mamba1", conv_kernel=c.num("mamba_d_conv"),
                              intermediate_size=c.num("mamba_expand") * hidden,
                              state_size=c.num("mamba_d_state"), conv_dtype=dtype, ssm_dtype=dtype)
    raise BadConfig(f"config.json: recurrent layers of model type {model_type!r} are not understood by kvplan "
                    "(no Mamba / linear-attention dimensions found)")


def _quant(qc: Any, hf_quant: Mapping[str, Any] | None) -> QuantSpec | None:
    """Weight quantization and any declared KV scheme (vLLM resolve_kv_cache_dtype_string)."""
    if hf_quant is not None and isinstance(hf_quant.get("quantization"), Mapping):
        q = hf_quant["quantization"]
        algo = str(q.get("quant_algo") or "").upper()
        kv_algo = str(q.get("kv_cache_quant_algo") or "").upper()
        bits = {"FP8": 8.0, "NVFP4": 4.0, "W4A8_AWQ": 4.0, "W4A16_AWQ": 4.0, "MXFP4": 4.0}.get(algo)
        if bits is None:
            raise BadConfig(f"hf_quant_config.json: quant_algo {algo!r} is not understood by kvplan")
        return QuantSpec(method="modelopt_fp4" if algo == "NVFP4" else "modelopt_" + algo.lower(),
                         weight_bits=bits, group_size=_quant_group(q.get("group_size"), "group_size"),
                         kv_cache_dtype="fp8" if kv_algo == "FP8" else None,
                         excluded=_names(q.get("exclude_modules"), "hf_quant_config.json: exclude_modules"))
    if qc is None:
        return None
    if not isinstance(qc, Mapping):
        raise BadConfig("config.json: quantization_config must be an object")
    method = str(qc.get("quant_method") or "").lower()
    kv_scheme = qc.get("kv_cache_scheme")
    kv: str | None = "fp8" if isinstance(kv_scheme, Mapping) and kv_scheme.get("type") == "float" and \
        kv_scheme.get("num_bits") == 8 else None
    excluded = _names(qc.get("modules_to_not_convert") or qc.get("ignore"),
                      "config.json: quantization_config.modules_to_not_convert")
    if method == "fp8" or method == "fbgemm_fp8":
        return QuantSpec("fp8", 8.0, kv_cache_dtype=kv, excluded=excluded)
    if method in {"gptq", "awq", "gptq_marlin", "awq_marlin"}:
        bits = qc.get("bits", qc.get("w_bit", 4))
        gs = qc.get("group_size", qc.get("q_group_size", 128))
        return QuantSpec(method.split("_")[0], _quant_number(bits, "bits", maximum=_MAX_WEIGHT_BITS),
                         group_size=_quant_group(gs, "group_size"), kv_cache_dtype=kv, excluded=excluded)
    if method == "mxfp4":
        return QuantSpec("mxfp4", 4.0, group_size=32, excluded=excluded)  # OCP MX: 32-element blocks
    if method == "bitsandbytes":
        return QuantSpec("bitsandbytes", 4.0 if qc.get("load_in_4bit") else 8.0, group_size=64, excluded=excluded)
    if method == "compressed-tensors":
        bits, gs = 8.0, None
        groups = qc.get("config_groups")
        if isinstance(groups, Mapping):
            for g in groups.values():
                w = g.get("weights") if isinstance(g, Mapping) else None
                if isinstance(w, Mapping) and w.get("num_bits"):
                    bits = _quant_number(w["num_bits"], "num_bits", maximum=_MAX_WEIGHT_BITS)
                    gs = _quant_group(w.get("group_size"), "group_size")
                    break
        return QuantSpec("compressed-tensors", bits, group_size=gs, kv_cache_dtype=kv, excluded=excluded)
    if method in {"modelopt", "modelopt_fp4"}:
        algo = str(qc.get("quant_algo") or "FP8").upper()
        return QuantSpec("modelopt_fp4" if "FP4" in algo else "modelopt_fp8", 4.0 if "FP4" in algo else 8.0,
                         group_size=_quant_group(qc.get("group_size"), "group_size"),
                         kv_cache_dtype="fp8" if str(qc.get("kv_cache_quant_algo") or "").upper() == "FP8" else None,
                         excluded=excluded)
    raise BadConfig(f"config.json: quantization method {method!r} is not understood by kvplan")
