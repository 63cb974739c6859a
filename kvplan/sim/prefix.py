"""Prefix-cache simulator: requests served one at a time through vLLM's block pool.

This is the starting document's §10 "block LRU model" made exact with vLLM's own rules (kvplan's
reference §7): chained block hashes, only full blocks cached, hits capped at `num_tokens − 1` in whole
blocks (`KVCacheManager.get_computed_blocks`: `max_cache_hit_length = request.num_tokens − 1`), free queue
evicting from the front, a finished request's blocks returned tail-first, the null block reserved.
One request at a time (as in the document's experiment, "requests sent one by one") means allocation in
chunks or per decode step pops the same blocks as one allocation, so each request is handled in one go.

An optional second tier models CPU offloading (LMCache, vLLM's OffloadingConnector): an LRU of
`chunk_tokens`-token chunks of every prompt; a request loads from it the chunk-aligned prefix beyond its
GPU hit. The GPU pool is unaffected (loaded tokens land in freshly allocated blocks, as recomputed ones do).
"""
from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from kvplan.errors import InvalidParameter
from kvplan.sim.block_pool import BlockHash, SequentialPool, check_block_size, check_pool_size, private_key
from kvplan.sim.workloads import PrefixWorkload, check_workload_blocks

if TYPE_CHECKING:
    from kvplan.sim.sizing import FittedPool

# The starting document §9 (Qwen2.5-1.5B-Instruct on one 8 GB laptop GPU, vLLM 0.29 + LMCache 0.5.5):
# "loading 4,864 tokens per document from the CPU took about 8 to 9 ms [...] while recomputing the same
# tokens from scratch took about 560 ms". Per-1,000-token rates below are derived from these figures.
DOC_OFFLOAD_TOKENS = 4_864
DOC_CPU_LOAD_MS = 8.5  # midpoint of "about 8 to 9 ms"
DOC_RECOMPUTE_MS = 560.0
DEFAULT_LOAD_MS_PER_KTOK = DOC_CPU_LOAD_MS / DOC_OFFLOAD_TOKENS * 1000  # ≈ 1.75 ms per 1,000 tokens
DEFAULT_RECOMPUTE_MS_PER_KTOK = DOC_RECOMPUTE_MS / DOC_OFFLOAD_TOKENS * 1000  # ≈ 115 ms per 1,000 tokens
LMCACHE_CHUNK_TOKENS = 256
"""LMCache's default `chunk_size`; the document's 4,864 loaded tokens are 19 such chunks of a ~5,000-token
document (the partial last chunk is not loaded)."""

HASH_FUNCTION = "CPython hash() of (parent, block tokens, extra keys) tuples of ints (vLLM: sha256 of pickle)"


@dataclass(frozen=True)
class OffloadSettings:
    """The CPU tier (0 tokens: none) and the figures that turn tokens into prefill milliseconds."""

    cpu_offload_tokens: int = 0
    chunk_tokens: int = LMCACHE_CHUNK_TOKENS
    load_ms_per_ktok: float = DEFAULT_LOAD_MS_PER_KTOK
    recompute_ms_per_ktok: float = DEFAULT_RECOMPUTE_MS_PER_KTOK


@dataclass(frozen=True)
class PassStats:
    """Counters of one pass (phase). Tokens: `query_tokens = hit_tokens + miss_tokens` and
    `miss_tokens = cold_miss_tokens + evicted_miss_tokens + uncacheable_tokens`.

    * cold: full blocks read for the first time;
    * evicted: full blocks read before but no longer reachable (evicted, or behind an evicted block);
    * uncacheable: the partial last block and the last block a full hit must recompute.
    `prefill_ms*` are estimates from the offload settings' per-1,000-token figures.
    """

    name: str
    requests: int
    query_tokens: int
    hit_tokens: int
    miss_tokens: int
    hit_rate: float
    cold_miss_tokens: int
    evicted_miss_tokens: int
    uncacheable_tokens: int
    evicted_blocks: int
    cpu_hit_tokens: int
    prefill_ms: float
    prefill_ms_with_offload: float
    reason: str


@dataclass(frozen=True)
class PoolWhatIf:
    """Hits per pass with another pool size."""

    num_gpu_blocks: int
    kv_tokens: int
    hit_tokens: tuple[int, ...]
    total_hit_tokens: int


@dataclass(frozen=True)
class PrefixReport:
    """Result of `simulate_prefix`. `no_eviction` is the smallest pool that never evicts a cached block
    (so every reuse hits) and what it would hit; `what_if` holds the pool sizes asked for."""

    scenario: str
    description: str
    block_size: int
    num_gpu_blocks: int
    usable_blocks: int
    kv_tokens: int
    distinct_blocks: int
    passes: tuple[PassStats, ...]
    total: PassStats
    no_eviction: PoolWhatIf | None
    what_if: tuple[PoolWhatIf, ...]
    offload: OffloadSettings
    hash_function: str = HASH_FUNCTION
    deployment: FittedPool | None = None  # what --model/--gpu took from `kvplan fit` (None: the pool given)


class CpuTier:
    """An LRU of prompt chunks in CPU memory; a chunk is keyed by the chained hash of its last block."""

    def __init__(self, capacity_tokens: int, chunk_tokens: int, block_size: int) -> None:
        if chunk_tokens < block_size or chunk_tokens % block_size:
            raise InvalidParameter(f"offload chunk ({chunk_tokens} tokens) must be a multiple of the block size "
                                   f"({block_size})")
        self.capacity_chunks = capacity_tokens // chunk_tokens
        self.chunk_tokens = chunk_tokens
        self.blocks_per_chunk = chunk_tokens // block_size
        self._lru: OrderedDict[BlockHash, None] = OrderedDict()

    def lookup(self, keys: Sequence[BlockHash], num_prompt_tokens: int) -> int:
        """Tokens of the longest chunk-aligned prompt prefix held, capped like GPU hits at prompt − 1."""
        bpc, lru = self.blocks_per_chunk, self._lru
        n = 0
        for j in range((num_prompt_tokens - 1) // self.chunk_tokens):
            k = keys[(j + 1) * bpc - 1]
            if k not in lru:
                break
            lru.move_to_end(k)
            n += 1
        return n * self.chunk_tokens

    def store(self, keys: Sequence[BlockHash], num_prompt_tokens: int) -> None:
        """Save every full chunk of the prompt (LMCache stores prefill KV), evicting the least recent."""
        if not self.capacity_chunks:
            return
        bpc, lru = self.blocks_per_chunk, self._lru
        for j in range(num_prompt_tokens // self.chunk_tokens):
            k = keys[(j + 1) * bpc - 1]
            if k in lru:
                lru.move_to_end(k)
            else:
                lru[k] = None
        while len(lru) > self.capacity_chunks:
            lru.popitem(last=False)


# per-phase counter slots
_REQ, _QUERY, _HIT, _COLD, _EVICTED, _UNCACHEABLE, _EVICTIONS, _CPU = range(8)


@dataclass
class _Run:
    counters: list[list[int]]
    peak_blocks: int
    distinct_so_far: list[int] = field(default_factory=list)


def request_blocks(num_prompt_tokens: int, num_output_tokens: int, block_size: int) -> int:
    """Blocks a request holds at its end: KV of `prompt + output − 1` tokens (the last token is never fed back)."""
    return -(-(num_prompt_tokens + num_output_tokens - 1) // block_size)


def _run(workload: PrefixWorkload, num_gpu_blocks: int, bs: int, cpu: CpuTier | None, classify: bool,
         check: bool = False) -> _Run:
    # With classify, the pool keeps every hash ever cached: the blocks read so far, which tells cold misses
    # (never read) from evicted ones. SequentialPool is BlockPool for one request at a time (with check,
    # it serves every request through a BlockPool too and compares, checking that one's invariants).
    pool = SequentialPool(num_gpu_blocks, track_known=classify, check=check)
    usable = pool.usable_blocks
    counters = [[0] * 8 for _ in workload.phase_names]
    distinct = [0] * len(workload.phase_names)
    serve = pool.serve
    for r in workload.requests:
        p = r.num_prompt_tokens
        computed = p + r.num_output_tokens - 1
        total_blocks = -(-computed // bs)
        if total_blocks > usable:
            raise InvalidParameter(
                f"a request of {computed:,} tokens needs {total_blocks:,} blocks but the pool has {usable:,} usable",
                hint="vLLM would refuse to start with a max_model_len this long; give a larger pool")
        full = computed // bs
        hashes = r.block_hashes
        keys: Sequence[BlockHash] = hashes
        if len(hashes) < full:
            keys = [*hashes, *(private_key(r.uid, i) for i in range(len(hashes), full))]
        cap = (p - 1) // bs  # max_cache_hit_length = num_tokens − 1, whole blocks
        evictions = pool.num_evictions
        g, cold = serve(keys, full, cap, total_blocks)  # hits, then the request's blocks freed tail-first
        c = counters[r.phase]
        c[_REQ] += 1
        c[_QUERY] += p
        c[_HIT] += g * bs
        c[_EVICTIONS] += pool.num_evictions - evictions
        if cpu is not None:
            c[_CPU] += max(0, cpu.lookup(keys, p) - g * bs)
            cpu.store(keys, p)
        if classify:
            c[_UNCACHEABLE] += p - cap * bs
            c[_COLD] += cold * bs
            c[_EVICTED] += (cap - g - cold) * bs
            distinct[r.phase] = pool.known_hashes()
    return _Run(counters, pool.max_in_use, distinct)


def _reason(name: str, c: list[int], bs: int, usable: int, distinct: int) -> str:
    hit_b, evicted_b, cold_b = c[_HIT] // bs, c[_EVICTED] // bs, c[_COLD] // bs
    if c[_REQ] == 0:
        return "no requests"
    if hit_b + evicted_b == 0:
        if cold_b == 0:
            return "nothing to cache: every prompt is shorter than one block plus one token"
        return "every block is read for the first time (cold misses): nothing to reuse yet"
    if evicted_b == 0:
        return f"every reused block was still cached ({hit_b:,} blocks hit)"
    over = f"{distinct:,} distinct blocks have been read, {distinct / usable:.1f}× the {usable:,} usable blocks"
    if hit_b == 0:
        return (f"every reused block had been evicted before it was read again: {over}, and LRU evicts the least "
                "recently used first, so re-reading in the order of the last reading misses every block "
                "(cyclic access defeats LRU)")
    return (f"{hit_b:,} blocks hit (the most recently used ones survive LRU); {evicted_b:,} reused blocks had been "
            f"evicted: {over}")


def _stats(name: str, c: list[int], bs: int, usable: int, distinct: int, off: OffloadSettings) -> PassStats:
    miss = c[_QUERY] - c[_HIT]
    cpu = c[_CPU]
    return PassStats(
        name=name, requests=c[_REQ], query_tokens=c[_QUERY], hit_tokens=c[_HIT], miss_tokens=miss,
        hit_rate=c[_HIT] / c[_QUERY] if c[_QUERY] else 0.0, cold_miss_tokens=c[_COLD],
        evicted_miss_tokens=c[_EVICTED], uncacheable_tokens=c[_UNCACHEABLE], evicted_blocks=c[_EVICTIONS],
        cpu_hit_tokens=cpu, prefill_ms=miss * off.recompute_ms_per_ktok / 1000,
        prefill_ms_with_offload=((miss - cpu) * off.recompute_ms_per_ktok + cpu * off.load_ms_per_ktok) / 1000,
        reason=_reason(name, c, bs, usable, distinct),
    )


def simulate_prefix(workload: PrefixWorkload, *, num_gpu_blocks: int, block_size: int,
                    offload: OffloadSettings | None = None, what_if_blocks: Sequence[int] = (),
                    find_no_eviction_pool: bool = True, check_invariants: bool = False) -> PrefixReport:
    """Serve `workload` one request at a time through a pool of `num_gpu_blocks` blocks (vLLM's
    num_gpu_blocks: block 0 is the null block), and count hits per pass; also find the smallest pool
    that never evicts (one more run; skip with `find_no_eviction_pool=False`), and replay with each of
    `what_if_blocks`. `check_invariants` (slow, for tests)
    verifies the pool's bookkeeping around every request."""
    check_block_size(block_size)
    for n in (num_gpu_blocks, *what_if_blocks):  # refused before the first run, not after it
        check_pool_size(n)
    # The no-eviction replay's pool holds every block of every request, so this bounds it too.
    roomy = 2 + sum(request_blocks(r.num_prompt_tokens, r.num_output_tokens, block_size) for r in workload.requests)
    check_workload_blocks(roomy - 2)
    off = offload or OffloadSettings()
    if off.cpu_offload_tokens < 0 or off.load_ms_per_ktok < 0 or off.recompute_ms_per_ktok < 0:
        raise InvalidParameter("offload size and per-token figures must be ≥ 0")
    cpu = CpuTier(off.cpu_offload_tokens, off.chunk_tokens, block_size) if off.cpu_offload_tokens else None
    main = _run(workload, num_gpu_blocks, block_size, cpu, classify=True, check=check_invariants)
    usable = num_gpu_blocks - 1
    passes = tuple(_stats(n, c, block_size, usable, d, off)
                   for n, c, d in zip(workload.phase_names, main.counters, main.distinct_so_far, strict=True))
    total_c = [sum(col) for col in zip(*main.counters, strict=True)]
    total = _stats("total", total_c, block_size, usable, max(main.distinct_so_far, default=0), off)

    # An unbounded pool never evicts; its peak of (in use + cached) blocks, plus the null block, is the
    # smallest pool with the same behaviour (unhashed free blocks always sit in front of hashed ones).
    no_evict = None
    if find_no_eviction_pool:
        unbounded = _run(workload, roomy, block_size, None, classify=False)
        no_evict = _what_if(unbounded, unbounded.peak_blocks + 1, block_size)
    what_if = tuple(_what_if(_run(workload, n, block_size, None, classify=False), n, block_size)
                    for n in what_if_blocks)
    return PrefixReport(
        scenario=workload.scenario, description=workload.description, block_size=block_size,
        num_gpu_blocks=num_gpu_blocks, usable_blocks=usable, kv_tokens=num_gpu_blocks * block_size,
        distinct_blocks=max(main.distinct_so_far, default=0), passes=passes, total=total, no_eviction=no_evict,
        what_if=what_if, offload=off)


def _what_if(run: _Run, num_gpu_blocks: int, bs: int) -> PoolWhatIf:
    hits = tuple(c[_HIT] for c in run.counters)
    return PoolWhatIf(num_gpu_blocks, num_gpu_blocks * bs, hits, sum(hits))
