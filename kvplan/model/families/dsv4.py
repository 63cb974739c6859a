"""DeepSeek-V4 (Flash, Pro): compressed sparse attention, a different cache mix on every layer.

vLLM 0.33 serves it from `vllm/models/deepseek_v4/` (nvidia/model.py:DeepseekV4DecoderLayer builds one
`DeepseekV4Attention` per layer, attention.py). transformers 5.19's `DeepseekV4Config.__post_init__` turns the
checkpoint's legacy `compress_ratios` (per layer 0, 4 or 128; the list also carries the MTP layers, which it
drops by cutting it to `num_hidden_layers`) into `layer_types` (sliding_attention, compressed_sparse_attention,
heavily_compressed_attention) and `compress_rates` ({CSA: 4, HCA: 128} by default); `DeepseekV4Attention` then
takes `compress_ratio = max(1, compress_rates.get(layer_type, 0))`:

- every layer keeps a sliding-window cache of its last `sliding_window` tokens (DeepseekV4SWACache);
- a layer with ratio 4 (CSA) or 128 (HCA) also keeps the compressed latent, one state per `ratio` tokens
  (DeepseekV4Attention.get_kv_cache_spec), and its compressor's rolling state (compressor.py:
  CompressorStateCache);
- a ratio-4 layer also has the lightning indexer: its K cache, one `index_head_dim` fp8 row plus a scale per
  state (DeepseekV4IndexerCache), and the indexer compressor's state.

The per-cache sizes are in kvplan.model.kv_cache (`dsv4_specs`); `num_hash_layers` (hash-routed MoE) and
`hc_mult` (hyper-connections) do not touch the KV cache.
"""
from __future__ import annotations

from kvplan.errors import BadConfig
from kvplan.model.architectures import model_types_for
from kvplan.model.reader import ConfigReader
from kvplan.model.spec import Dsv4Dims

# transformers/models/deepseek_v4/configuration_deepseek_v4.py: _COMPRESS_RATIO_TO_LAYER_TYPE and
# DeepseekV4Config.default_compress_rates.
_RATIO_TO_LAYER_TYPE = {0: "sliding_attention", 4: "compressed_sparse_attention", 128: "heavily_compressed_attention"}
DEFAULT_COMPRESS_RATES = {"compressed_sparse_attention": 4, "heavily_compressed_attention": 128}
# compressor.py:CompressorStateCache: `assert compress_ratio in [4, 128]`.
SERVED_RATIOS = frozenset({4, 128})
# The lightning indexer runs on the ratio-4 layers only (attention.py: `if self.compress_ratio == 4`).
INDEXER_RATIO = 4
# quant_config.py:_DEEPSEEK_V4_EXPERT_DTYPES
EXPERT_DTYPES = ("fp4", "fp8")


def is_dsv4(model_type: str) -> bool:
    """Whether vLLM builds this config as DeepSeek-V4 (registry: DeepseekV4ForCausalLM, model_type deepseek_v4: the
    model types kvplan/model/architectures/deepseek_v4.py lists for compressed attention)."""
    return model_type in model_types_for("compressed_attention")


def _layer_types(c: ConfigReader, n: int) -> list[str]:
    """transformers' DeepseekV4Config: explicit layer_types, else the legacy compress_ratios, else the V4-Pro
    default (2 HCA bootstrap layers, then CSA / HCA interleaved); cut to num_hidden_layers."""
    explicit = c.get("layer_types")
    if explicit is not None:
        if not isinstance(explicit, list) or not all(isinstance(t, str) for t in explicit):
            raise BadConfig("config.json: layer_types must list layer type names")
        types = [str(t) for t in explicit[:n]]
    elif c.get("compress_ratios") is not None:
        raw = c.get("compress_ratios")
        if not isinstance(raw, list) or not all(isinstance(r, int) and not isinstance(r, bool) for r in raw):
            raise BadConfig("config.json: compress_ratios must list whole numbers (0, 4 or 128 per layer)")
        bad = sorted({r for r in raw[:n] if r not in _RATIO_TO_LAYER_TYPE})
        if bad:  # transformers' _COMPRESS_RATIO_TO_LAYER_TYPE lookup raises KeyError
            raise BadConfig(f"config.json: compress_ratios has {bad}; DeepSeek-V4 layers are 0 (sliding window), "
                            "4 (compressed sparse) or 128 (heavily compressed)")
        types = [_RATIO_TO_LAYER_TYPE[r] for r in raw[:n]]
    else:
        types = (["heavily_compressed_attention"] * min(n, 2)
                 + ["compressed_sparse_attention" if i % 2 else "heavily_compressed_attention"
                    for i in range(max(n - 2, 0))])
    if len(types) != n:  # DeepseekV4Config.validate_layer_type
        raise BadConfig(f"config.json: `num_hidden_layers` ({n}) must equal `len(layer_types)` ({len(types)}).")
    unknown = sorted(set(types) - set(_RATIO_TO_LAYER_TYPE.values()))
    if unknown:
        raise BadConfig(f"config.json: `layer_types` entries must be one of {tuple(_RATIO_TO_LAYER_TYPE.values())} "
                        f"for DeepSeek-V4; got {unknown}.")
    return types


def _compress_rates(c: ConfigReader) -> dict[str, int]:
    """DeepseekV4Config.compress_rates, with the legacy compress_rate_csa / compress_rate_hca folded in."""
    rates = dict(DEFAULT_COMPRESS_RATES)
    given = c.get("compress_rates")
    if given is not None:
        if not isinstance(given, dict) or not all(isinstance(v, int) and not isinstance(v, bool)
                                                  for v in given.values()):
            raise BadConfig("config.json: compress_rates must map layer types to whole numbers")
        rates = {str(k): int(v) for k, v in given.items()}
    for key, layer_type in (("compress_rate_csa", "compressed_sparse_attention"),
                            ("compress_rate_hca", "heavily_compressed_attention")):
        if c.get(key) is not None:
            rates[layer_type] = c.num(key)
    return rates


def dsv4_dims(c: ConfigReader, model_type: str, num_layers: int) -> Dsv4Dims | None:
    """DeepSeek-V4's cache geometry, or None for another model."""
    if not is_dsv4(model_type):
        return None
    rates = _compress_rates(c)
    ratios = tuple(max(1, rates.get(t, 0)) for t in _layer_types(c, num_layers))
    bad = sorted({r for r in ratios if r != 1 and r not in SERVED_RATIOS})
    if bad:  # compressor.py:CompressorStateCache asserts the ratio
        raise BadConfig(f"config.json: DeepSeek-V4 compress ratio {bad[0]} is not served by vLLM (its compressor "
                        "state cache takes 4 or 128)")
    return Dsv4Dims(
        head_dim=c.num("head_dim", default=512),
        rope_head_dim=c.num("qk_rope_head_dim", default=64),
        index_head_dim=c.num("index_head_dim", default=128),
        index_topk=c.num("index_topk", default=512),
        sliding_window=c.num("sliding_window", default=128),
        ratios=ratios,
        q_lora_rank=c.num("q_lora_rank", default=1024),
        o_lora_rank=c.num("o_lora_rank", default=1024),
        o_groups=c.num("o_groups", default=8),
        index_n_heads=c.num("index_n_heads", default=64),
        fp4_experts=_expert_dtype(c) == "fp4",
        hc_mult=c.num("hc_mult", default=4),
        num_hash_layers=_count(c.get("num_hash_layers"), num_layers),
        # an absent compress_rope_theta is read as differing (two caches: the larger weights)
        separate_compress_rope=c.get("compress_rope_theta") is None
        or c.get("compress_rope_theta") != c.get("rope_theta", 10000.0),
    )


def _count(value: object, num_layers: int) -> int:
    """A layer count as written (bool, negative, or not a whole number: 0), at most the model's layers."""
    if isinstance(value, bool) or not isinstance(value, int):
        return 0
    return min(max(value, 0), num_layers)


def _expert_dtype(c: ConfigReader) -> str:
    """quant_config.py:DeepseekV4FP8Config.expert_dtype: "fp4" (the default) or "fp8"; anything else vLLM refuses."""
    value = c.get("expert_dtype", "fp4")
    if value not in EXPERT_DTYPES:
        raise BadConfig(f"config.json: Unsupported DeepSeek V4 expert_dtype={value!r}; "
                        f"expected one of {EXPERT_DTYPES}.")
    return str(value)
