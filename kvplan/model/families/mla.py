"""Multi-head latent attention (DeepSeek-V2/V3, Kimi, GLM-5 …) and DeepSeek sparse attention's indexer.

MLA keeps one latent of kv_lora_rank + qk_rope_head_dim per token per layer, whole on every TP rank
(v1/kv_cache_interface.py:MLAAttentionSpec). DSA models (DeepSeek-V3.2, GLM-5: `index_topk` in the config)
also keep an indexer K cache on every layer: `deepseek_v2.py:DeepseekV32IndexerCache`, head size
index_head_dim + index_head_dim / 128 × 4 (fp8 values with one fp32 scale per 128), uint8.
"""
from __future__ import annotations

from kvplan.errors import BadConfig
from kvplan.model.architectures import model_types_for
from kvplan.model.reader import ConfigReader
from kvplan.model.spec import MLADims

# deepseek_v2.py:Indexer: `quant_block_size = 128`, one fp32 (4-byte) scale per block of the fp8 key.
INDEXER_QUANT_BLOCK = 128
INDEXER_SCALE_BYTES = 4




def deepseek_mha(c: ConfigReader, model_type: str) -> bool:
    """Whether vLLM builds this DeepSeek-family model's attention as plain MHA (DeepseekAttention, "Normal MHA
    implementation used by Deepseek v1"): models/deepseek_v2.py:DeepseekV2DecoderLayer, since vLLM 0.11.1
    (DeepSeek-OCR), `use_mha = config.model_type == "deepseek" or all(dim == 0 for dim in (qk_nope_head_dim,
    qk_rope_head_dim))`, each read with `getattr(config, …, 0)`. DeepseekAttention's head size is
    hidden_size // num_attention_heads, K and V alike, with num_key_value_heads KV heads (v_head_dim unused)."""
    if model_type not in model_types_for("deepseek_decoder"):
        return False
    return model_type in model_types_for("deepseek_v1_mha") or all(
        not c.get(k, 0) for k in ("qk_nope_head_dim", "qk_rope_head_dim"))


def mla_dims(c: ConfigReader, model_type: str) -> MLADims | None:
    """MLA projections, or None for a model whose attention is not MLA (DeepseekAttention: see deepseek_mha). The
    MLA model types are is_deepseek_mla's, listed by kvplan/model/architectures/deepseek.py."""
    if model_type not in model_types_for("deepseek_mla") or not c.has("kv_lora_rank") or deepseek_mha(c, model_type):
        return None
    return MLADims(
        kv_lora_rank=c.num("kv_lora_rank"),
        qk_rope_head_dim=c.num("qk_rope_head_dim"),
        qk_nope_head_dim=c.num("qk_nope_head_dim"),
        v_head_dim=c.num("v_head_dim"),
        q_lora_rank=c.opt_int("q_lora_rank"),
        # deepseek_v2.py:Indexer reads config.index_n_heads / index_head_dim; the defaults are transformers'
        # DeepseekV32Config's (64 heads of 128), as indexer_head_size's.
        index_n_heads=c.num("index_n_heads", default=64) if c.has("index_topk") else 0,
        index_head_dim=c.num("index_head_dim", default=128) if c.has("index_topk") else 0,
    )


def indexer_head_size(c: ConfigReader, mla: MLADims | None) -> int:
    """Bytes per token of one layer's DSA indexer cache (uint8 elements), 0 without sparse attention."""
    if mla is None or not c.has("index_topk"):
        return 0
    d = c.num("index_head_dim", default=128)
    return d + d // INDEXER_QUANT_BLOCK * INDEXER_SCALE_BYTES


def refuse_unmodelled(c: ConfigReader, model_type: str) -> None:
    """Attention variants of this family kvplan cannot size yet: an error naming them, never a silent guess."""
    # DeepSeek-V4 itself (its family's compressed_attention): families/dsv4.py
    if c.has("compress_ratios") and model_type not in model_types_for("compressed_attention"):
        raise BadConfig(f"config.json: {model_type or 'this model'}'s compressed attention (compress_ratios, "
                        "index_topk, sliding_window per layer) is not modelled by kvplan yet; its KV cache "
                        "cannot be sized from this config")
