"""Read a Hugging Face config.json (a dict) into a ModelSpec: what vLLM derives from it.

Pure: no I/O. A pipeline of reads, each in the module of the architecture family that spells it
(kvplan/model/families/): the language model's config, the layer geometry the KV cache needs, then what
only the weights need. Rules follow vLLM 0.33 (`transformers_utils/config.py:get_hf_text_config`,
`transformers_utils/model_arch_config_convertor.py`, `config/model.py`), cited per function.

KV geometry and weights are separate reads: a field only the weight estimate needs (MLP widths, expert
counts, the quantization scheme) never stops `size`; it leaves `ModelSpec.weights_unknown` saying why.
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NamedTuple

from kvplan.errors import BadConfig
from kvplan.model.architectures import Family, family_for, model_types_for
from kvplan.model.families import attention, classic, dsv4, heterogeneous, mla, moe, recurrent
from kvplan.model.families.text_config import mm_prefix_lm, text_config
from kvplan.model.families.towers import multimodal_parts
from kvplan.model.quantization import quant_spec
from kvplan.model.reader import ConfigReader, check_rope_factor, model_length, names, positive_int
from kvplan.model.spec import (
    Dsv4Dims,
    LayerKind,
    LayerSpec,
    MLADims,
    ModelSpec,
    MoESpec,
    QuantSpec,
    RecurrentState,
)
from kvplan.model.spelt import consumer_fields

# config/model.py:_get_and_verify_max_len: the keys that may bound the context length.
_MAX_LEN_KEYS = (
    "max_position_embeddings", "n_positions", "max_seq_len", "seq_length", "model_max_length",
    "max_target_positions", "max_sequence_length", "max_seq_length", "seq_len",
)
# Rope types whose `factor` is already reflected in max_position_embeddings (same function).
_ROPE_TYPES_NOT_SCALING_LEN = frozenset({"su", "longrope", "llama3", "yarn", "deepseek_yarn",
                                        "deepseek_llama_scaling", "mrope", "default", "proportional"})
_DEFAULT_MAX_LEN = 2048  # same function: "if none is found, default to 2048"

_TORCH_DTYPES = {"bfloat16": "bfloat16", "float16": "float16", "half": "float16", "float32": "float32",
                 "float": "float32", "fp16": "float16", "bf16": "bfloat16"}



_RECURRENT_TYPES = frozenset({"mamba", "linear_attention", "mamba2", "mamba1"})
_ATTENTION_TYPES = frozenset({"full_attention", "attention", "global", "hybrid"})
_SLIDING_TYPES = frozenset({"sliding_attention", "local", "sliding"})


# Keys transformers loads as nested PretrainedConfig objects (quantization_config, a plain dict, is not one).
_NESTED_CONFIGS = frozenset({"text_config", "vision_config", "audio_config", "thinker_config", "talker_config",
                             "llm_config", "language_config"})


class ConfigOverrides(dict[str, Any]):
    """Overrides that apply themselves by an engine's own rules (`apply_to`), not vLLM's: SGLang's
    --json-model-override-args (kvplan/sglang/model_override.py). Kept whole where overrides are copied."""

    def apply_to(self, config: Mapping[str, Any]) -> dict[str, Any]:
        """The config with these overrides applied."""
        raise NotImplementedError

    def __repr__(self) -> str:  # distinct from a plain dict's: a model cache keyed by repr tells the rules apart
        return f"{type(self).__name__}({dict.__repr__(self)})"

    def __bool__(self) -> bool:  # applied even when empty: the engine's config reader may differ without them
        return True


def apply_hf_overrides(config: Mapping[str, Any], overrides: Mapping[str, Any]) -> dict[str, Any]:
    """vLLM's `--hf-overrides` (config/model.py:ModelConfig._apply_dict_overrides): a key naming a nested
    config (`text_config`, `vision_config` …) is updated key by key; any other key, dicts such as
    `rope_scaling` included, is replaced whole. A ConfigOverrides applies itself."""
    if isinstance(overrides, ConfigOverrides):
        return overrides.apply_to(config)
    if not isinstance(overrides, Mapping):
        raise BadConfig("--hf-overrides must be a JSON object")
    out = dict(config)
    for key, value in overrides.items():
        current = out.get(key)
        if key in _NESTED_CONFIGS and isinstance(current, Mapping) and isinstance(value, Mapping):
            out[key] = apply_hf_overrides(current, value)
        else:
            out[key] = value
    return out


NESTED_CONFIGS = _NESTED_CONFIGS


def parse_config(
    config: Mapping[str, Any],
    *,
    name: str = "model",
    quant_config: Mapping[str, Any] | None = None,
    hf_overrides: Mapping[str, Any] | None = None,
) -> ModelSpec:
    """Turn a config.json dict (and hf_quant_config.json, if any) into a ModelSpec.

    Never guesses silently: a structure kvplan does not understand raises BadConfig naming it (with the
    architectures the config declares, so a caller can first say whether vLLM serves them).
    """
    if not isinstance(config, Mapping):
        raise BadConfig("config.json must hold a JSON object")
    if hf_overrides:
        config = apply_hf_overrides(config, hf_overrides)
    try:
        return _parse(config, name, quant_config)
    except BadConfig as exc:
        raw = config.get("architectures")
        exc.architectures = tuple(str(a) for a in raw[:16]) if isinstance(raw, list) else ()
        raise


def _parse(config: Mapping[str, Any], name: str, quant_config: Mapping[str, Any] | None) -> ModelSpec:
    """parse_config's stages: the language model's config, layer geometry, then the weights-only part."""
    top = config
    data, model_type, defaults_note = text_config(config)
    if not model_type and not top.get("architectures"):
        # transformers' AutoConfig (and so vLLM) needs one of them: "Unrecognized model … Should have a
        # `model_type` key in its config.json" (e.g. mamba_ssm's native Mamba-2 configs).
        raise BadConfig("config.json has no model_type and no architectures: transformers' AutoConfig (and so vLLM) "
                        "refuses it (\"Unrecognized model … Should have a `model_type` key in its config.json\")")
    c = ConfigReader(data, top)
    # vLLM resolves the model class from the top-level config's architectures (hf_config.architectures).
    architectures = names(top.get("architectures"), "config.json: architectures")
    family = family_for(architectures, model_type)
    num_layers = c.num(*classic.LAYER_KEYS, what="num_hidden_layers")
    hidden = c.num(*classic.HIDDEN_KEYS, what="hidden_size")
    types = attention.layer_pattern(c, family, num_layers)
    has_attention = any(t not in _RECURRENT_TYPES | {"conv", "mlp", "moe"} for t in types)
    # Pure state-space models (Mamba, Falcon-Mamba) have no attention heads at all.
    heads = c.num(*classic.HEAD_KEYS, what="num_attention_heads") if has_attention else c.num(
        *classic.HEAD_KEYS, default=1)
    blocks = heterogeneous.block_configs(c, num_layers)
    kv_heads = (heterogeneous.total_kv_heads(blocks, heads) if blocks is not None
                else classic.total_kv_heads(c, family, heads))
    if heads % kv_heads:
        raise BadConfig(f"config.json: num_attention_heads ({heads}) is not a multiple of the KV heads ({kv_heads})")
    mla.refuse_unmodelled(c, model_type)
    v4 = dsv4.dsv4_dims(c, model_type, num_layers)
    mla_dims = mla.mla_dims(c, model_type)
    plain_mha = mla.deepseek_mha(c, model_type)
    if plain_mha:  # DeepseekAttention: self.head_dim = hidden_size // self.total_num_heads
        head_size = hidden // heads
    else:
        head_size = _head_size(c, hidden, heads) if has_attention else 0
    dtype = _model_dtype(data, top)
    max_len, max_len_src = _max_model_len(data, model_type)
    weights = _weights_part(c, top, family, hidden, num_layers, types, quant_config, blocks)
    geometry = _Geometry(heads, kv_heads, head_size, mla_dims, dtype, mla.indexer_head_size(c, mla_dims), plain_mha,
                         v4)
    layers, notes = _layers(c, model_type, types, geometry, weights.moe_layers, blocks)
    tie = top.get("tie_word_embeddings", data.get("tie_word_embeddings"))
    modalities, towers = multimodal_parts(top, hidden)
    return ModelSpec(
        name=name,
        model_type=model_type,
        architectures=architectures,
        dtype=dtype,
        hidden_size=hidden,
        num_layers=num_layers,
        num_attention_heads=heads,
        num_kv_heads=1 if mla_dims or v4 else kv_heads,
        head_size=head_size if not mla_dims else mla_dims.kv_lora_rank + mla_dims.qk_rope_head_dim,
        vocab_size=c.num(*classic.VOCAB_KEYS, what="vocab_size"),
        intermediate_size=weights.intermediate,
        max_model_len=max_len,
        layers=layers,
        tie_word_embeddings=bool(tie if tie is not None else family.tied_by_default),
        gated_mlp=family.weights.gated_mlp,
        moe=weights.moe,
        mla=mla_dims,
        dsv4=v4,
        quant=weights.quant,
        max_model_len_source=max_len_src,
        notes=tuple(notes),
        config_notes=(defaults_note,) if defaults_note else (),
        weights_unknown=weights.unknown,
        config_model_type=str(top.get("model_type") or "")[:128],
        config_dtype=_config_dtype(data, top),
        mm_prefix_lm=mm_prefix_lm(top, data),
        custom_code=_custom_code(top),
        quant_method=_declared_quant_method(top.get("quantization_config") or c.get("quantization_config")),
        checkpoint_kv_quant_algo=_checkpoint_kv_quant_algo(top.get("quantization_config") or
                                                           c.get("quantization_config"), quant_config),
        unnamed_text_model_type=_unnamed_text_model_type(top),
        mm_modalities=modalities,
        towers=towers,
        **consumer_fields(data, top, family, model_type, str(top.get("model_type") or "")[:128]),
    )


def _checkpoint_kv_quant_algo(qc: object, hf_quant: Mapping[str, Any] | None) -> str:
    """hf_quant_config.json's kv_cache_quant_algo (upper case, at most 32 characters) when config.json has no
    quantization_config; "" otherwise."""
    inner = hf_quant.get("quantization") if qc is None and isinstance(hf_quant, Mapping) else None
    algo = inner.get("kv_cache_quant_algo") if isinstance(inner, Mapping) else None
    return algo.upper()[:32] if isinstance(algo, str) else ""


def _unnamed_text_model_type(top: Mapping[str, Any]) -> str:
    """text_config's model_type when the nested config names no architectures (vLLM must then find a class
    for it by model_type alone)."""
    text = top.get("text_config")
    if not isinstance(text, Mapping) or text.get("architectures") or not isinstance(text.get("model_type"), str):
        return ""
    return str(text["model_type"])[:128]


def _custom_code(top: Mapping[str, Any]) -> bool:
    """Whether config.json points at the repository's own code (`auto_map` AutoConfig / AutoModel*)."""
    auto_map = top.get("auto_map")
    return isinstance(auto_map, Mapping) and any(str(k).startswith(("AutoConfig", "AutoModel")) for k in auto_map)


def _declared_quant_method(qc: Any) -> str | None:
    """quant_method as vLLM normalizes it (model_arch_config_convertor.py:_normalize_quantization_config:
    lower-cased, compressed_tensors → compressed-tensors); "" or absent: no quantization."""
    if not isinstance(qc, Mapping) or not isinstance(qc.get("quant_method"), str):
        return None
    method = qc["quant_method"].lower().replace("compressed_tensors", "compressed-tensors")
    return method[:64] or None


# _Geometry and _WeightsPart are NamedTuples: internal records, built at start-up, where a frozen dataclass class
# costs five times as much to create (kvplan size).
class _Geometry(NamedTuple):
    """What every attention layer shares (heads, head size, MLA, model dtype)."""

    heads: int
    kv_heads: int
    head_size: int
    mla: MLADims | None
    dtype: str
    indexer_head_size: int
    deepseek_mha: bool = False  # DeepseekAttention: V as wide as K, whatever v_head_dim says
    v4: Dsv4Dims | None = None  # DeepSeek-V4's compressed sparse attention


class _WeightsPart(NamedTuple):
    """What only the weight estimate needs; `unknown` says why it could not be read."""

    intermediate: int = 0
    moe: MoESpec | None = None
    quant: QuantSpec | None = None
    moe_layers: frozenset[int] = frozenset()
    unknown: str | None = None


def _weights_part(c: ConfigReader, top: Mapping[str, Any], family: Family, hidden: int, n: int,
                  types: list[str], quant_config: Mapping[str, Any] | None,
                  blocks: object) -> _WeightsPart:
    """MoE widths, dense MLP width and quantization; a field kvplan cannot read becomes `unknown`, not an
    error, since the KV cache does not depend on it."""
    try:
        quant = quant_spec(top.get("quantization_config") or c.get("quantization_config"), quant_config)
    except BadConfig as exc:
        return _WeightsPart(unknown=str(exc))
    if blocks is not None:
        return _WeightsPart(quant=quant, unknown="per-layer MLP widths (block_configs) are not counted by kvplan's "
                                                 "analytic estimate")
    try:
        moe_spec = moe.moe_spec(c)
        moe_layers = moe.moe_layer_set(c, n, moe_spec, types)
        intermediate = moe.dense_intermediate(c, 4 * hidden if family.weights.four_x_mlp else None, moe_spec,
                                              n - len(moe_layers))
    except BadConfig as exc:
        return _WeightsPart(quant=quant, unknown=str(exc))
    return _WeightsPart(intermediate, moe_spec, quant, moe_layers)


def _head_size(c: ConfigReader, hidden: int, heads: int) -> int:
    """ModelArchConfigConvertorBase.get_head_size: head_dim, hidden_size_per_head, else hidden // heads."""
    hd = c.get("head_dim")
    if hd is not None:  # vLLM takes head_dim whenever it is set: 0 or -128 is an error, not replaced
        return positive_int(hd, "head_dim")
    for key in ("hidden_size_per_head", "attention_head_dim", "kv_channels"):
        if c.has(key):
            return c.num(key)
    if hidden % heads:
        raise BadConfig(f"config.json: hidden_size ({hidden}) is not divisible by num_attention_heads ({heads}) "
                        "and there is no head_dim")
    return hidden // heads


def _config_dtype(data: Mapping[str, Any], top: Mapping[str, Any]) -> str:
    """The checkpoint's torch_dtype as a dtype name ("" when absent; _model_dtype has validated it)."""
    raw = data.get("torch_dtype") or data.get("dtype") or top.get("torch_dtype") or top.get("dtype")
    return _TORCH_DTYPES.get(str(raw).replace("torch.", ""), "") if raw is not None else ""


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


def _max_model_len(data: Mapping[str, Any], model_type: str) -> tuple[int, str]:
    """config/model.py:_get_and_verify_max_len: the smallest bounding key, times the rope factor."""
    check_rope_factor(data)
    found: list[tuple[float, str]] = []
    for key in _MAX_LEN_KEYS:
        v = data.get(key)
        if isinstance(v, (int, float)) and not isinstance(v, bool) and 0 < v:
            found.append((v, key))
    model_max = next((v for v, k in found if k == "model_max_length"), None)
    if model_max is not None:
        length, src = model_max, "model_max_length"
    elif found:
        length, src = min(found)
    else:
        return _DEFAULT_MAX_LEN, "vLLM default (no length key in config.json)"
    length = model_length(length, src)  # only the key vLLM takes is bounded: it keeps the smallest
    rope = data.get("rope_scaling")
    if isinstance(rope, Mapping) and model_type not in model_types_for("max_len_already_scaled"):
        rtype = str(rope.get("rope_type") or rope.get("type") or "default")
        factor = rope.get("factor")
        if rtype not in _ROPE_TYPES_NOT_SCALING_LEN and isinstance(factor, (int, float)) and \
                not isinstance(factor, bool) and factor > 1:  # ∞ reaches model_length, which refuses it
            src += f" × rope factor {factor:g} ({rtype})"
            length = model_length(length * factor, src)
    return length, src


def _layers(
    c: ConfigReader, model_type: str, types: list[str], g: _Geometry, moe_layers: frozenset[int],
    blocks: object,
) -> tuple[tuple[LayerSpec, ...], list[str]]:
    """One LayerSpec per decoder layer, from its token-mixer type."""
    n = len(types)
    notes: list[str] = []
    shared_kv = c.num("num_kv_shared_layers", default=0) if c.get("num_kv_shared_layers") else 0
    per_layer_kv = heterogeneous.layer_kv_heads(blocks, g.heads) if isinstance(blocks, list) else None
    states: dict[str, RecurrentState] = {}
    out: list[LayerSpec] = []
    for i, t in enumerate(types):
        is_moe = i in moe_layers
        if i >= n - shared_kv:
            out.append(LayerSpec(i, "kv_shared", num_attention_heads=g.heads, moe=is_moe))
        elif t in _RECURRENT_TYPES or t == "conv":
            kind = "conv" if t == "conv" else "mamba"
            if kind not in states:
                states[kind] = recurrent.recurrent_state(c, model_type, g.dtype, kind)
            out.append(LayerSpec(i, "mamba", state=states[kind], moe=is_moe))
        elif t in {"mlp", "moe"} or (per_layer_kv is not None and per_layer_kv[i] is None):
            out.append(LayerSpec(i, "mlp_only", moe=t == "moe" or is_moe))
        else:
            kv = per_layer_kv[i] if per_layer_kv is not None else None
            out.append(_attention_layer(c, model_type, i, t, g, is_moe, kv))
    if shared_kv:
        notes.append(f"the last {shared_kv} layers reuse earlier layers' KV (num_kv_shared_layers): no cache")
    return tuple(out), notes


def dsv4_layer(i: int, d: Dsv4Dims, heads: int, is_moe: bool) -> LayerSpec:
    """A DeepSeek-V4 layer: its sliding window, its compress ratio and, on ratio-4 layers, the indexer's K row
    (index_head_dim fp8 values and one fp32 scale per 128, as DeepSeek-V3.2's; attention.py:DeepseekV4Indexer)."""
    ratio = d.ratios[i]
    indexer = (d.index_head_dim + d.index_head_dim // mla.INDEXER_QUANT_BLOCK * mla.INDEXER_SCALE_BYTES
               if ratio == dsv4.INDEXER_RATIO else 0)
    return LayerSpec(i, "mla", num_kv_heads=1, head_size=d.head_dim, head_size_v=0, sliding_window=d.sliding_window,
                     num_attention_heads=heads, moe=is_moe, indexer_head_size=indexer, compress_ratio=ratio)


def _attention_layer(c: ConfigReader, model_type: str, i: int, t: str, g: _Geometry, is_moe: bool,
                     layer_kv: int | None) -> LayerSpec:
    """An attention layer: MLA, full (Gemma-4 global heads, Llama-4 chunked-local RoPE layers), or sliding."""
    if g.v4 is not None:
        return dsv4_layer(i, g.v4, g.heads, is_moe)
    if g.mla is not None:
        m = g.mla
        return LayerSpec(i, "mla", num_kv_heads=1, head_size=m.kv_lora_rank + m.qk_rope_head_dim, head_size_v=0,
                         num_attention_heads=g.heads, moe=is_moe, indexer_head_size=g.indexer_head_size)
    n = c.num(*classic.LAYER_KEYS, what="num_hidden_layers")
    if t in _ATTENTION_TYPES:
        h, d = layer_kv or g.kv_heads, g.head_size
        dv = d if g.deepseek_mha else (c.opt_int("v_head_dim") or d)  # MiMo-V2: V heads narrower than K
        global_kv, global_hd = c.opt_int("num_global_key_value_heads"), c.opt_int("global_head_dim")
        if global_kv or global_hd:  # Gemma-4: global layers have their own KV heads and head size
            h, d = global_kv or g.kv_heads, global_hd or g.head_size
            dv = d
        chunk = c.opt_int("attention_chunk_size")
        kind: LayerKind = "full"
        if chunk and model_type in model_types_for("chunked_local_attention"):
            # vLLM llama4.py: RoPE layers (no_rope_layers[i] == 1) use chunked local attention;
            # transformers' default makes every 4th layer NoPE (global).
            no_rope = c.get("no_rope_layers")
            uses_rope = no_rope[i] if isinstance(no_rope, list) and len(no_rope) == n else int((i + 1) % 4 != 0)
            kind = "chunked_local" if uses_rope else "full"
        return LayerSpec(i, kind, num_kv_heads=h, head_size=d, head_size_v=dv,
                         attention_chunk_size=chunk if kind == "chunked_local" else None,
                         num_attention_heads=g.heads, moe=is_moe)
    if t in _SLIDING_TYPES:
        window = attention.sliding_window(c)
        if window is None:
            raise BadConfig("config.json: layer_types has sliding_attention layers but no sliding_window")
        # MiMo-V2: sliding layers have their own heads (swa_num_key_value_heads, swa_head_dim, swa_v_head_dim).
        h = c.opt_int("swa_num_key_value_heads") or g.kv_heads
        d = c.opt_int("swa_head_dim") or g.head_size
        dv = c.opt_int("swa_v_head_dim") or d
        return LayerSpec(i, "sliding_window", num_kv_heads=h, head_size=d, head_size_v=dv, sliding_window=window,
                         num_attention_heads=c.opt_int("swa_num_attention_heads") or g.heads, moe=is_moe)
    exc = BadConfig(f"config.json: layer type {t!r} (layer {i}) is not understood by kvplan")
    if t == "recurrent":  # RecurrentGemma's RG-LRU block: no attention module
        exc.layer_without_attention = i
    raise exc
