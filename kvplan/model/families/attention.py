"""Which token mixer each decoder layer has, from whichever key the family uses (vLLM `config/model.py`
and each model file): `layer_types` (transformers' convention), Nemotron-H `hybrid_override_pattern`,
Jamba/Zamba2 `layers_block_type`, Bamba `attn_layer_indices`, MiniMax `attn_type_list`, RecurrentGemma
`block_types`, MiMo-V2
`hybrid_layer_pattern`, Qwen3-Next `full_attention_interval`, and the sliding-window layouts of
Gemma-2/3, gpt-oss and Qwen2 (`max_window_layers`).

Names returned: full_attention, sliding_attention, linear_attention / mamba (recurrent), conv (short
convolution), mlp / moe (no token mixer), recurrent (RecurrentGemma's RG-LRU block, not sized).
"""
from __future__ import annotations

from kvplan.errors import BadConfig
from kvplan.model.architectures import Family
from kvplan.model.reader import ConfigReader, positive_int

_NEMOTRON_CODES = {"M": "mamba", "*": "full_attention", "-": "mlp", "E": "moe"}


def sliding_window(c: ConfigReader) -> int | None:
    """ModelConfig.get_sliding_window: 0 means none; Qwen2-style use_sliding_window=false disables it."""
    if c.get("use_sliding_window") is False:
        return None
    w = c.get("sliding_window")
    if w is None or w == 0:
        return None
    return positive_int(w, "sliding_window")


def _listed(c: ConfigReader, key: str, n: int) -> list[str] | None:
    v = c.get(key)
    if v is None:
        return None
    if not isinstance(v, list):
        raise BadConfig(f"config.json: {key} must list {n} entries")
    if len(v) != n:  # transformers' PreTrainedConfig.validate_layer_type refuses the config (so does vLLM)
        raise BadConfig(f"config.json: `num_hidden_layers` ({n}) must be equal to the number of `{key}` ({len(v)})")
    return [str(x) for x in v]


def _explicit_pattern(c: ConfigReader, n: int, family: Family) -> list[str] | None:
    """A per-layer pattern the config spells out, under any of the families' keys."""
    lt = _listed(c, "layer_types", n)
    if lt is not None:
        return lt
    pattern = c.get("hybrid_override_pattern")
    if pattern is not None:  # Nemotron-H: M = Mamba2, * = attention, - = MLP, E = MoE
        if not isinstance(pattern, str) or len(pattern) != n:
            raise BadConfig(f"config.json: hybrid_override_pattern must have {n} characters")
        bad = set(pattern) - set(_NEMOTRON_CODES)
        if bad:
            raise BadConfig(f"config.json: hybrid_override_pattern has unknown layer codes {sorted(bad)}")
        return [_NEMOTRON_CODES[ch] for ch in pattern]
    lbt = _listed(c, "layers_block_type", n)  # Jamba / Zamba2
    if lbt is not None:
        return lbt
    indices = c.get("attn_layer_indices")
    if indices is not None:  # Bamba / granite-4.0-h style: attention at these indices, Mamba elsewhere
        if not isinstance(indices, list) or not all(isinstance(i, int) and 0 <= i < n for i in indices):
            raise BadConfig(f"config.json: attn_layer_indices must list layer numbers below {n}")
        return ["full_attention" if i in set(indices) else "mamba" for i in range(n)]
    atl = c.int_list("attn_type_list", n) if c.has("attn_type_list") else None
    if atl is not None:  # MiniMax: 1 = softmax attention, 0 = lightning (linear) attention
        return ["full_attention" if x == 1 else "linear_attention" for x in atl]
    hlp = c.int_list("hybrid_layer_pattern", n) if c.has("hybrid_layer_pattern") else None
    if hlp is not None:  # MiMo-V2 (mimo_v2.py: is_swa = hybrid_layer_pattern[i] == 1)
        return ["sliding_attention" if x == 1 else "full_attention" for x in hlp]
    if family.default_block_types:  # RecurrentGemmaConfig.layers_block_type: (block_types * 100)[:n]
        blocks = c.get("block_types", list(family.default_block_types))
        if not isinstance(blocks, (list, tuple)) or not blocks:
            raise BadConfig("config.json: block_types must list block kinds")
        return [str(blocks[i % len(blocks)]) for i in range(n)]
    if c.has("full_attention_interval"):  # Qwen3-Next: every k-th layer is full attention
        k = c.num("full_attention_interval")
        return ["full_attention" if (i + 1) % k == 0 else "linear_attention" for i in range(n)]
    return None


def layer_pattern(c: ConfigReader, family: Family, n: int) -> list[str]:
    """Per-layer token-mixer type for `n` decoder layers (the family's layout where the config spells none:
    kvplan.model.architectures.base.SlidingLayout)."""
    explicit = _explicit_pattern(c, n, family)
    if explicit is not None:
        return explicit
    if family.pure_ssm:
        return ["mamba"] * n
    window = sliding_window(c)
    if window is None:
        return ["full_attention"] * n
    if family.sliding_layout == "every_nth" or c.has("sliding_window_pattern"):
        p = c.num("sliding_window_pattern", default=6)
        # transformers Gemma3: sliding unless (i + 1) % pattern == 0.
        return ["full_attention" if (i + 1) % p == 0 else "sliding_attention" for i in range(n)]
    if family.sliding_layout == "alternate":
        # transformers Gemma2 and vLLM gpt_oss.py: even layers use the sliding window.
        return ["sliding_attention" if i % 2 == 0 else "full_attention" for i in range(n)]
    if family.sliding_layout == "max_window_layers" and c.has("max_window_layers"):
        mwl = c.get("max_window_layers")
        if isinstance(mwl, bool) or not isinstance(mwl, int) or mwl < 0:
            raise BadConfig(f"config.json: max_window_layers must be a whole number ≥ 0, got {mwl!r}")
        return ["sliding_attention" if i >= mwl else "full_attention" for i in range(n)]
    # engine/arg_utils.py: a model-wide sliding_window applies to every layer.
    return ["sliding_attention"] * n
