"""Key dialects of the classic decoder families (GPT-2, OPT, Falcon, ChatGLM, XGLM, CodeGen, GPT-J, NeoX,
Bloom …): their names for layers, heads and widths. What each family is (gating, tying, 4 × hidden MLPs, its
KV-head rule) lives in kvplan/model/architectures/.

KV heads follow vLLM `transformers_utils/model_arch_config_convertor.py:get_total_num_kv_heads` with its
Falcon and ChatGLM overrides.
"""
from __future__ import annotations

from kvplan.model.architectures import Family
from kvplan.model.reader import ConfigReader

# Key aliases, in vLLM's order (transformers_utils/config.py:CONFIG_FIELD_ALIASES and each family's config).
LAYER_KEYS = ("num_hidden_layers", "n_layer", "num_layers", "n_layers")
HIDDEN_KEYS = ("hidden_size", "n_embd", "d_model", "model_dim")
HEAD_KEYS = ("num_attention_heads", "n_head", "n_heads", "num_heads", "attention_heads")  # XGLM: attention_heads
VOCAB_KEYS = ("vocab_size", "padded_vocab_size", "n_vocab")
KV_HEAD_KEYS = ("n_head_kv", "num_kv_heads", "num_key_value_heads", "multi_query_group_num", "num_attention_groups")
# Dense MLP width keys (Llama-4 intermediate_size_mlp, Falcon/ChatGLM ffn_hidden_size, GPT-2 n_inner, OPT ffn_dim).
INTERMEDIATE_KEYS = ("intermediate_size_mlp", "ffn_hidden_size", "intermediate_size", "n_inner", "ffn_dim")

def total_kv_heads(c: ConfigReader, family: Family, heads: int) -> int:
    """KV heads of the attention layers (get_total_num_kv_heads), by the family's rule (Family.kv_heads): Falcon's
    new_decoder_architecture / multi_query, ChatGLM's multi_query_attention, GPT-BigCode's multi_query, else the
    first KV-head key, else MHA."""
    if family.kv_heads == "falcon":
        if c.get("new_decoder_architecture"):
            return c.num("n_head_kv", "num_kv_heads", default=heads)
        return 1 if c.get("multi_query", True) else heads
    if family.kv_heads == "chatglm" and not c.get("multi_query_attention", False):
        return heads
    if family.kv_heads == "multi_query":  # GPTBigCodeConfig.multi_query (default True): one KV head
        return 1 if c.get("multi_query", True) else heads
    kv = c.opt_int(*KV_HEAD_KEYS)
    return kv if kv is not None else heads

