"""Typed, bounded reads from a config.json dict: aliases, defaults and one-line errors naming the key."""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kvplan.errors import BadConfig

# The largest value kvplan accepts for each count, far above every real model so that none is refused, and
# low enough that a typo or a hostile file cannot make kvplan loop for minutes or print 300-digit numbers.
# Largest seen in the 222 corpus configs (tests/fixtures/corpus) and the bound's headroom over it:
MAX_LAYERS = 10_000  # 126 (Llama-3.1-405B): ~80×; per-layer work is linear in it
MAX_MODEL_LEN = 2**28  # 268,435,456 tokens; 10,485,760 (Llama-4-Scout): ~25×, after any rope factor
MAX_WIDTH = 2**21  # hidden, intermediate, head and latent widths: 2,097,152; 53,248 (Llama-3.1-405B): ~40×
MAX_HEADS = 2**16  # attention / KV heads: 65,536; 128 (DeepSeek-V3): 512×
MAX_EXPERTS = 2**16  # routed experts: 65,536; 512 (Qwen3.5-397B): 128×
MAX_VOCAB = 2**24  # 16,777,216; 262,144 (Gemma): 64×
MAX_OTHER = 2**40  # any other whole number (no model dimension is larger)
_BOUNDS: dict[str, tuple[int, str]] = {
    **dict.fromkeys(("num_hidden_layers", "n_layer", "num_layers", "n_layers"), (MAX_LAYERS, "layers")),
    **dict.fromkeys(("hidden_size", "n_embd", "d_model", "model_dim", "intermediate_size", "moe_intermediate_size",
                     "expert_intermediate_size", "shared_expert_intermediate_size", "head_dim",
                     "hidden_size_per_head", "attention_head_dim", "kv_channels", "kv_lora_rank", "q_lora_rank",
                     "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim", "global_head_dim"),
                    (MAX_WIDTH, "a width")),
    **dict.fromkeys(("num_attention_heads", "n_head", "n_heads", "num_heads", "attention_heads", "n_head_kv",
                     "num_kv_heads", "num_key_value_heads", "multi_query_group_num", "num_attention_groups"),
                    (MAX_HEADS, "heads")),
    **dict.fromkeys(("num_experts", "n_routed_experts", "num_local_experts", "moe_num_experts",
                     "num_experts_per_tok", "n_shared_experts"), (MAX_EXPERTS, "experts")),
    **dict.fromkeys(("vocab_size", "padded_vocab_size", "n_vocab"), (MAX_VOCAB, "a vocabulary")),
}


def _bound(key: str) -> tuple[int, str]:
    return _BOUNDS.get(key, (MAX_OTHER, "a model dimension"))


def positive_int(value: Any, key: str) -> int:
    """A whole number in [1, the key's bound] (`_BOUNDS`: far above every real model; else 2**40)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value != value:
        raise BadConfig(f"config.json: {key} must be a positive integer, got {value!r}")
    if isinstance(value, float) and (not value.is_integer()):
        raise BadConfig(f"config.json: {key} must be a whole number, got {value!r}")
    if value <= 0:
        raise BadConfig(f"config.json: {key} must be a positive integer, got {value!r}")
    limit, what = _bound(key)
    if value > limit:
        raise BadConfig(f"config.json: {key} is {value:.4g}, more than kvplan accepts for {what} "
                        f"(at most {limit:,}; the largest real models are far below)")
    return int(value)


def check_rope_factor(data: Mapping[str, Any]) -> None:
    """A rope `factor` whose positions (original_max_position_embeddings, else max_position_embeddings, times
    the factor: what vLLM's rotary cache and YaRN cover) exceed MAX_MODEL_LEN is an error naming both."""
    rope = data.get("rope_scaling") or data.get("rope_parameters")
    if isinstance(rope, Mapping) and isinstance(rope.get("full_attention"), Mapping):
        rope = rope["full_attention"]  # per-layer-type rope parameters (transformers v5 style)
    if not isinstance(rope, Mapping):
        return
    factor = rope.get("factor")
    if isinstance(factor, bool) or not isinstance(factor, (int, float)) or not factor > 1:
        return
    for key in ("original_max_position_embeddings", "max_position_embeddings", "seq_length"):
        base = rope.get(key, data.get(key))
        if isinstance(base, (int, float)) and not isinstance(base, bool) and base > 0:
            model_length(base * factor, f"{key} × rope factor {factor:g}")
            return


def model_length(length: float, source: str) -> int:
    """A context length in tokens (a config key, maybe times a rope factor), at most MAX_MODEL_LEN."""
    if not length <= MAX_MODEL_LEN:  # also ∞ and NaN
        raise BadConfig(f"config.json: {source} gives {length:.4g} tokens, more than kvplan accepts for a "
                        f"context length (at most {MAX_MODEL_LEN:,}; the longest real model has 10,485,760)")
    return int(length)


def quant_number(value: Any, key: str, *, maximum: float) -> float:
    """A positive, finite number from a quantization config (bits per weight), at most `maximum`."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value <= maximum:
        raise BadConfig(f"quantization config: {key} must be a positive number, got {value!r}")
    return float(value)


def quant_group(value: Any, key: str) -> int | None:
    """A group size: a positive whole number; None, 0 or negative (GPTQ's -1: per channel) mean none."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value != value or (
            isinstance(value, float) and not value.is_integer()) or value > 2**40:
        raise BadConfig(f"quantization config: {key} must be a whole number, got {value!r}")
    return int(value) if value > 0 else None


def names(value: Any, what: str) -> tuple[str, ...]:
    """A list of names (architectures, module patterns), or one name."""
    if not value:
        return ()
    if isinstance(value, str):
        return (value,)
    if not isinstance(value, list):
        raise BadConfig(f"{what} must list names, got {type(value).__name__}")
    return tuple(str(x) for x in value)


class ConfigReader:
    """Typed reads from the text config (`d`) and the top-level config (`top`), with aliases and defaults."""

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
                return positive_int(v, k)
        if default is not None:
            return default
        raise BadConfig(f"config.json has no {what or ' / '.join(keys)}")

    def opt_int(self, *keys: str) -> int | None:
        for k in keys:
            v = self.d.get(k)
            if v is not None:
                return positive_int(v, k)
        return None



    def count(self, *keys: str) -> int | None:
        """A count where 0 (or null) means "none": `shared_intermediate_size: 0`, `num_local_experts: 0`."""
        for k in keys:
            v = self.d.get(k)
            if v is None:
                continue
            if isinstance(v, list):  # per-layer lists (ERNIE-4.5-VL's [text, vision] experts): the text entry
                v = v[0] if v else 0
            if v == 0:
                return 0
            return positive_int(v, k)
        return None

    def int_list(self, key: str, n: int) -> list[int] | None:
        """A per-layer list of whole numbers, exactly `n` long."""
        v = self.d.get(key)
        if v is None:
            return None
        if not isinstance(v, list) or len(v) != n or not all(
                isinstance(x, int) and not isinstance(x, bool) for x in v):
            raise BadConfig(f"config.json: {key} must list {n} whole numbers")
        return [int(x) for x in v]
