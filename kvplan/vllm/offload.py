"""vLLM 0.33's `--kv-offloading-size` / `--kv-offloading-backend`: the CPU tier of KV offloading.

config/vllm.py:_post_init_kv_transfer_config turns `--kv-offloading-size GiB` into a KV connector:
`native` (the default) is the OffloadingConnector with `cpu_bytes_to_use = GiB × 2**30` (the total over the
TP ranks); `lmcache` is LMCacheMPConnector, whose CPU store is sized by the LMCache server itself, so the size
is not passed on. Both support the hybrid KV cache manager, so the GPU plan is unchanged
(tests/fixtures/oracle-cuda/extra/*-offload).

The native CPU tier (v1/kv_offload/cpu/spec.py:CPUOffloadingSpec, distributed/kv_transfer/kv_connector/v1/
offloading/config.py): one chunk is `blocks_per_chunk` (1) GPU blocks of every layer of every worker —
`worker_kv_bytes_per_block` is the GPU KV tensor's bytes over its block count — stored once when the layout
is replicated (an MLA model at TP > 1 with no other parallelism: every rank holds the same latent), else
once per worker; rounded up to the page size (mmap.PAGESIZE, 4,096 on x86-64); `num_chunks =
cpu_bytes_to_use // that`. A chunk holds `block_size × dcp` tokens of a request.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from kvplan.errors import InvalidParameter
from kvplan.vllm.engine_args import OFFLOADING_BACKENDS  # the table owns vLLM's choices

if TYPE_CHECKING:
    from kvplan.model.spec import ModelSpec
    from kvplan.vllm.settings import ServeSettings

HOST_PAGE_BYTES = 4096  # SharedOffloadRegion.BLOCK_SIZE_ALIGNMENT = mmap.PAGESIZE (x86-64 Linux)
GiB = 1 << 30


@dataclass(frozen=True)
class CpuTier:
    """The CPU tier one engine (one DP replica) gets."""

    backend: str  # "native" | "lmcache"
    connector: str  # vLLM's KV connector class
    cpu_bytes: int
    chunk_bytes: int | None  # one chunk over all workers, page-aligned; None: not known (lmcache)
    num_chunks: int | None
    tokens: int | None  # tokens the CPU tier holds; None: sized by the LMCache server


def cpu_tier(size_gib: float, backend: str, *, bytes_per_block: int, block_size: int, world_size: int,
             replicated: bool, context_parallel: int = 1) -> CpuTier:
    """The CPU tier for `--kv-offloading-size size_gib` (see the module docstring)."""
    if backend not in OFFLOADING_BACKENDS:
        raise InvalidParameter(f"--kv-offloading-backend must be one of {', '.join(OFFLOADING_BACKENDS)}, "
                               f"got {backend!r}")
    if not size_gib > 0 or size_gib > 1 << 20:
        raise InvalidParameter(f"--kv-offloading-size must be a positive number of GiB (at most 1,048,576), "
                               f"got {size_gib}")
    cpu_bytes = int(size_gib * GiB)
    if backend == "lmcache":
        return CpuTier(backend, "LMCacheMPConnector", cpu_bytes, None, None, None)
    copies = 1 if replicated else world_size
    raw = bytes_per_block * copies
    chunk = -(-raw // HOST_PAGE_BYTES) * HOST_PAGE_BYTES
    chunks = cpu_bytes // chunk if chunk else 0
    return CpuTier(backend, "OffloadingConnector", cpu_bytes, chunk, chunks, chunks * block_size * context_parallel)


def replicated_layout(*, mla: bool, tp: int, pp: int, dcp: int) -> bool:
    """offloading/config.py: replicated_layout — an MLA model (its latent is the same on every TP rank), TP > 1,
    nothing but TP; assumed on one node with the mp executor (vLLM's default there)."""
    return mla and tp > 1 and pp == 1 and dcp == 1


def deployment_tier(model: ModelSpec, s: ServeSettings, *, bytes_per_block: int, block_size: int) -> CpuTier:
    """The CPU tier of a planned deployment (`s.kv_offloading_size` set): one engine's, i.e. one DP replica's."""
    cache, par = s.cache_config, s.parallel_config
    assert cache.kv_offloading_size is not None
    tp, pp, dcp = par.tensor_parallel_size, par.pipeline_parallel_size, par.decode_context_parallel_size
    return cpu_tier(cache.kv_offloading_size, cache.kv_offloading_backend, bytes_per_block=bytes_per_block,
                    block_size=block_size, world_size=tp * pp,
                    replicated=replicated_layout(mla=model.mla is not None, tp=tp, pp=pp, dcp=dcp),
                    context_parallel=dcp)


def tier_note(tier: CpuTier, data_parallel_size: int = 1) -> str:
    """The fit note for a CPU tier."""
    size = f"{tier.cpu_bytes / GiB:,.4g} GiB of CPU memory"
    if tier.tokens is None:
        return (f"KV offloading (lmcache, {tier.connector}): the CPU store is sized by the LMCache server, not "
                f"by --kv-offloading-size ({size} is not passed on); the GPU plan is unchanged.")
    per = " per data-parallel replica" if data_parallel_size > 1 else ""
    return (f"KV offloading ({tier.connector}, {size}{per}): {tier.num_chunks:,} chunks of "
            f"{tier.chunk_bytes:,} bytes hold {tier.tokens:,} tokens in the CPU tier; the GPU plan is unchanged.")
