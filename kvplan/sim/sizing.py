"""How big the simulated pool is: given in blocks, in tokens, or taken from a `fit` result."""
from __future__ import annotations

from typing import Protocol

from kvplan.errors import InvalidParameter


def num_gpu_blocks_from(*, num_gpu_blocks: int | None, kv_tokens: int | None, block_size: int) -> int:
    """vLLM's num_gpu_blocks (null block included) from `--num-gpu-blocks` or `--kv-tokens`.

    `--kv-tokens` is the figure of vLLM's start-up log line "GPU KV cache size: N tokens", which is
    num_gpu_blocks × block_size for a model with one KV-cache group (`kv_cache_utils.py`), so
    21,520 tokens at block size 16 are 1,345 blocks (1,344 usable).
    """
    if block_size < 1:
        raise InvalidParameter(f"block-size must be ≥ 1, got {block_size}")
    if (num_gpu_blocks is None) == (kv_tokens is None):
        raise InvalidParameter("give the pool size as exactly one of --num-gpu-blocks or --kv-tokens",
                               hint="vLLM logs it at start-up: 'GPU KV cache size: N tokens'")
    blocks = num_gpu_blocks if num_gpu_blocks is not None else (kv_tokens or 0) // block_size
    if blocks < 2:
        raise InvalidParameter(f"the pool needs at least 2 blocks (block 0 is the null block), got {blocks}")
    return blocks


class FitLike(Protocol):
    """What the simulators need from a `kvplan fit` result (written by the fit module)."""

    @property
    def num_gpu_blocks(self) -> int:
        """vLLM's num_gpu_blocks, null block included."""
        ...


def pool_from_fit(report: FitLike) -> int:
    """The pool size of a `fit` result (model + GPU + settings), for `--model/--gpu` on the simulate commands."""
    blocks = int(report.num_gpu_blocks)
    if blocks < 2:
        raise InvalidParameter(f"the fitted KV cache has {blocks} blocks: nothing to simulate",
                               hint="the model does not fit with these settings; see `kvplan fit`")
    return blocks
