"""Mixture-of-experts widths and which layers are MoE: weights and activation only, never the KV cache.

Keys per family: Mixtral `num_local_experts`, Qwen-MoE `num_experts` / `shared_expert_intermediate_size`,
DeepSeek `n_routed_experts` / `n_shared_experts` / `first_k_dense_replace` / `moe_layer_freq`, ERNIE
`moe_num_experts` (a [text, vision] list in the VL models), Llama-4 `interleave_moe_layer_step`, MiniMax
`shared_intermediate_size` (0: no shared expert). A count of 0 means "none", as in the model files.
"""
from __future__ import annotations

from kvplan.errors import BadConfig
from kvplan.model.architectures import model_types_for
from kvplan.model.families.classic import INTERMEDIATE_KEYS
from kvplan.model.reader import ConfigReader
from kvplan.model.spec import MoESpec


def moe_spec(c: ConfigReader) -> MoESpec | None:
    """The MoE MLP's dimensions, or None for a dense model (no experts, or `num_local_experts: 0`)."""
    num = c.count("num_experts", "num_local_experts", "n_routed_experts", "moe_num_experts")
    if not num or num <= 1:
        return None
    k = c.num("num_experts_per_tok", "top_k_experts", "experts_per_token", "moe_topk", "num_experts_per_token",
              what="num_experts_per_tok")
    width = c.num("moe_intermediate_size", "expert_intermediate_size", "intermediate_size",
                  what="moe_intermediate_size")
    shared = c.count("shared_expert_intermediate_size", "shared_intermediate_size")
    if shared is None:
        n_shared = c.count("n_shared_experts")
        if n_shared is not None:
            shared = n_shared * width
        elif str(c.get("model_type", "")) in model_types_for("shared_expert_dense_width"):
            # Llama-4's always-on shared expert (modeling_llama4.py); Gemma-4 MoE layers keep their dense MLP beside
            # the experts, summed into the output (vLLM 0.33 gemma4.py:Gemma4DecoderLayer builds self.mlp and, in
            # parallel, the experts).
            shared = c.num("intermediate_size")
    return MoESpec(num_experts=num, experts_per_token=k, expert_intermediate_size=width,
                   shared_intermediate_size=shared or 0)


def dense_intermediate(c: ConfigReader, fallback: int | None, moe: MoESpec | None, dense_layers: int) -> int:
    """The dense MLP width; 0 when no layer has a dense MLP (Mixtral-style `intermediate_size` is the expert
    width; pure-MoE configs state no dense width at all). `fallback`: the family's width when the config states
    none (kvplan.model.architectures: WeightRules.four_x_mlp)."""
    for key in INTERMEDIATE_KEYS:
        if c.has(key):
            if moe and key == "intermediate_size" and moe.expert_intermediate_size == c.num(key) and \
                    not c.has("moe_intermediate_size"):
                return 0
            return c.num(key)
    if fallback is not None:
        return fallback
    if moe is not None and dense_layers == 0:
        return 0
    raise BadConfig("config.json has no intermediate_size")


def moe_layer_set(c: ConfigReader, n: int, moe: MoESpec | None, types: list[str]) -> frozenset[int]:
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
    freq = c.get("moe_layer_freq")
    if isinstance(freq, list):  # MiMo-V2: one 0/1 flag per layer
        flags = c.int_list("moe_layer_freq", n)
        assert flags is not None
        return frozenset(i for i, f in enumerate(flags) if f)
    first_dense = c.num("first_k_dense_replace", default=0) if c.get("first_k_dense_replace") else 0
    first_dense = max(first_dense, c.count("num_dense_layers") or 0)  # LFM2-MoE: the first layers are dense
    step = c.num("decoder_sparse_step", "moe_layer_freq", "interleave_moe_layer_step", default=1)
    mlp_only = c.get("mlp_only_layers") or []
    if not isinstance(mlp_only, list):
        raise BadConfig("config.json: mlp_only_layers must list layer numbers")
    return frozenset(i for i in range(n) if i >= first_dense and (i + 1) % step == 0 and i not in mlp_only)
