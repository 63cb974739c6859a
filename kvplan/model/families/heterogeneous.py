"""Heterogeneous blocks: DeciLM / Llama-Nemotron-Super (`nemotron-nas`), whose `block_configs` give each
layer its own attention (KV heads = num_attention_heads // n_heads_in_group, or no attention at all:
`no_op`) and its own MLP width (`ffn_mult`). vLLM `model_executor/models/nemotron_nas.py`
(DeciLMDecoderLayer) and `config/model.py:get_total_num_kv_heads` (the first layer with attention).
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from kvplan.errors import BadConfig
from kvplan.model.reader import ConfigReader, positive_int


def block_configs(c: ConfigReader, n: int) -> Sequence[Mapping[str, Any]] | None:
    """The per-layer block configs, or None for a homogeneous model."""
    blocks = c.get("block_configs")
    if blocks is None:
        return None
    if not isinstance(blocks, list) or len(blocks) != n or not all(
            isinstance(b, Mapping) and isinstance(b.get("attention"), Mapping) for b in blocks):
        raise BadConfig(f"config.json: block_configs must list {n} objects with an attention entry")
    return blocks


def layer_kv_heads(blocks: Sequence[Mapping[str, Any]], heads: int) -> list[int | None]:
    """KV heads of each layer; None where the attention is a no-op (no KV cache)."""
    out: list[int | None] = []
    for i, b in enumerate(blocks):
        attn = b["attention"]
        if attn.get("no_op") or attn.get("replace_with_linear"):
            out.append(None)
            continue
        group = positive_int(attn.get("n_heads_in_group"), f"block_configs[{i}].attention.n_heads_in_group")
        if heads % group:
            raise BadConfig(f"config.json: block_configs[{i}]: n_heads_in_group {group} does not divide {heads} heads")
        out.append(heads // group)
    return out


def total_kv_heads(blocks: Sequence[Mapping[str, Any]], heads: int) -> int:
    """vLLM's model-wide KV-head count for nemotron-nas: the first layer that has attention."""
    return next((h for h in layer_kv_heads(blocks, heads) if h is not None), heads)
