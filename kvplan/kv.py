"""KV-cache bytes per token and per block, per layer and per GPU, as vLLM's KVCacheSpec computes them.

Source: vllm/v1/kv_cache_interface.py (FullAttentionSpec, SlidingWindowSpec, ChunkedLocalAttentionSpec,
MLAAttentionSpec, MambaSpec) and config/model.py:ModelConfig.get_num_kv_heads (vLLM 0.33).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

CacheKind = Literal["full", "sliding_window", "chunked_local", "mla", "mamba"]

# Bytes per element of each --kv-cache-dtype (utils/torch_utils.py:STR_DTYPE_TO_TORCH_DTYPE: fp8 → uint8).
KV_DTYPE_BYTES: dict[str, int] = {
    "float32": 4,
    "bfloat16": 2,
    "float16": 2,
    "fp8": 1,
    "fp8_e4m3": 1,
    "fp8_e5m2": 1,
}
KV_CACHE_DTYPES = ("auto", "bfloat16", "float16", "fp8", "fp8_e4m3", "fp8_e5m2")


@dataclass(frozen=True)
class KVCacheSpec:
    """One layer's cache on one GPU (per rank), like vLLM's per-layer KVCacheSpec.

    Attention kinds store `num_kv_heads × (head_size + head_size_v) × dtype_bytes` per token;
    MLA stores one latent (`num_kv_heads=1`, `head_size = kv_lora_rank + qk_rope_head_dim`,
    `head_size_v = 0`); `mamba` (Mamba1/2, gated delta-net, linear attention, short conv) stores a
    fixed `state_bytes` per request instead.
    """

    layer: int  # global layer index in the model
    kind: CacheKind
    num_kv_heads: int = 0
    head_size: int = 0
    head_size_v: int = 0
    dtype_bytes: int = 2
    sliding_window: int | None = None
    attention_chunk_size: int | None = None
    state_bytes: int = 0  # mamba: Σ prod(shape) × dtype size over the state tensors (unpadded)

    @property
    def is_attention(self) -> bool:
        return self.kind != "mamba"

    @property
    def bytes_per_token(self) -> int:
        """K+V bytes one token occupies in this layer (0 for recurrent layers).

        vLLM AttentionSpec.page_size_bytes / block_size = num_kv_heads × (head_size + head_size_v) × e.
        """
        if self.kind == "mamba":
            return 0
        return self.num_kv_heads * (self.head_size + self.head_size_v) * self.dtype_bytes

    def page_size_bytes(self, block_size: int) -> int:
        """Bytes of one block of this layer, before any hybrid padding (KVCacheSpec.page_size_bytes)."""
        if self.kind == "mamba":
            return self.state_bytes
        return block_size * self.bytes_per_token
