"""SGLang 0.5.23's pipeline parallelism in the KV pool (paths relative to `sglang/srt/`). Pure: numbers in, numbers out.

Each PP stage builds the layers distributed/utils.py:get_pp_indices gives it (even split, the last `remainder`
stages one layer more; SGLANG_PP_LAYER_PARTITION, which overrides it, is not modelled), so its pool row covers
those layers only; each stage sizes its token count from its own budget, then
mem_cache/kv_cache_configurator.py:KVCacheConfigurator._apply_token_constraints all-reduces the MIN over the world
group: every stage keeps the smallest count.
"""
from __future__ import annotations


def pp_layer_ranges(num_layers: int, pp_size: int) -> list[tuple[int, int]]:
    """distributed/utils.py:get_pp_indices for every stage: [(start_layer, end_layer), …]."""
    base, remainder = divmod(num_layers, pp_size)
    out = []
    for rank in range(pp_size):
        if rank >= pp_size - remainder:
            start = rank * (base + 1) - (pp_size - remainder)
            out.append((start, start + base + 1))
        else:
            out.append((rank * base, rank * base + base))
    return out
