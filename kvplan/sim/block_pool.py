"""vLLM's KV block pool: free queue, prefix-cache hash map, reference counts, null block.

Mirrors `v1/core/block_pool.py:BlockPool` and `v1/core/kv_cache_utils.py:FreeKVCacheBlockQueue` of vLLM 0.33
(kvplan's reference, §7). The serve scheduler (`kvplan.sim.scheduler`) drives `BlockPool`; the prefix
simulator (`kvplan.sim.prefix`) drives `SequentialPool`, the same rules for requests served one at a
time, with a hash-keyed free queue (and a `BlockPool` behind it when two blocks hold one hash). Pure: no
I/O, no printing.

Block hashes. vLLM chains `sha256(pickle((parent_hash, block_token_ids, extra_keys)))`
(`kv_cache_utils.py:hash_block_tokens`). A simulation only needs *equality* of hashes, so kvplan uses
CPython's `hash()` of the same tuple, built from ints only (`NONE_HASH` is the int 0, salts are turned
into ints by the workload): hashing ints and tuples of ints does not depend on `PYTHONHASHSEED`, so runs
are reproducible, and it is an order of magnitude faster (about 0.2 µs against 3 µs per 16-token block,
measured with CPython 3.11). The price is a 64-bit hash, where
two different blocks collide with probability about n²/2⁶⁴ (≈ 5·10⁻⁸ for a million distinct blocks).
Blocks whose content no other request can share (unique prompts, generated tokens) skip hashing and get a
*private key* ≥ 2⁶⁴, which no tuple hash can equal.
"""
from __future__ import annotations

from collections import OrderedDict
from collections.abc import Hashable, Iterable, Sequence
from itertools import islice

from kvplan.errors import InvalidParameter

BlockHash = Hashable

NULL_BLOCK_ID = 0
"""Block 0 is popped from the free queue at start-up and never handed out (`BlockPool.__init__`:
`self.null_block = self.free_block_queue.popleft()`), so a pool of N blocks has N − 1 usable ones."""

NONE_HASH = 0
"""The parent hash of a request's first block (vLLM: `NONE_HASH = hash_fn(seed)`, `init_none_hash`)."""

NO_EXTRA_KEYS = 0
"""`extra_keys` of a block without LoRA, multimodal inputs or cache salt (vLLM passes None)."""

PRIVATE_KEY_BASE = 1 << 64
"""Private keys start above every 64-bit tuple hash, so they never equal a content hash."""

_PRIVATE_INDEX_BITS = 32

MAX_GPU_BLOCKS = 1 << 25
"""The largest pool kvplan simulates (33,554,432 blocks). The largest pools vLLM builds on one GPU are a
few million blocks (a 0.5B model with FP8 KV on a 288 GB MI355X: ~42M tokens, 2.6M 16-token blocks);
this leaves >10× headroom, and the pool's per-block bookkeeping (16 bytes) stays at 512 MiB."""


MAX_BLOCK_SIZE = 1 << 16
"""The largest block kvplan simulates (65,536 tokens). vLLM's attention kernels take 16–128-token blocks and
hybrid models' Mamba alignment raises them to hundreds; the scheduler keeps a bucket per token of a block."""


def check_block_size(block_size: int) -> None:
    """Raise InvalidParameter unless 1 ≤ `block_size` ≤ `MAX_BLOCK_SIZE`."""
    if block_size < 1:
        raise InvalidParameter(f"block-size must be ≥ 1, got {block_size}")
    if block_size > MAX_BLOCK_SIZE:
        raise InvalidParameter(f"block-size {block_size:,} is more than kvplan simulates (at most {MAX_BLOCK_SIZE:,}; "
                               "vLLM's blocks are 16 to a few hundred tokens)")


def check_pool_size(num_gpu_blocks: int) -> None:
    """Raise InvalidParameter unless 2 ≤ `num_gpu_blocks` ≤ `MAX_GPU_BLOCKS`."""
    if num_gpu_blocks < 2:
        raise InvalidParameter(f"num_gpu_blocks must be ≥ 2 (block 0 is the null block), got {num_gpu_blocks}")
    if num_gpu_blocks > MAX_GPU_BLOCKS:
        raise InvalidParameter(
            f"a pool of {num_gpu_blocks:,} blocks is more than kvplan simulates (at most {MAX_GPU_BLOCKS:,}; "
            "the largest real pools are a few million blocks)")


class _Retired:
    """The hash of a block only a finished request could have hit: it keeps its LRU place, off the map."""

    def __repr__(self) -> str:
        return "RETIRED"


RETIRED: BlockHash = _Retired()


def hash_block(parent: int, tokens: Hashable, extra_keys: Hashable = NO_EXTRA_KEYS) -> int:
    """Chained block hash: `hash((parent, tokens, extra_keys))` (vLLM `hash_block_tokens`, hash function swapped)."""
    return hash((parent, tokens, extra_keys))


def private_key(request_uid: int, block_index: int) -> int:
    """The hash of a block only its own request can ever hit (unique prompt text, generated tokens)."""
    return PRIVATE_KEY_BASE + (request_uid << _PRIVATE_INDEX_BITS) + block_index


class BlockPool:
    """The GPU block pool of one KV-cache group, with vLLM's free-queue and prefix-cache semantics.

    * Free queue: an `OrderedDict` used as a doubly linked list (O(1) pop-front, append, prepend,
      remove). Initial order is by block id; block 0 is the null block and never free. Blocks never
      handed out yet are not in the dict: they are the id range `[_fresh, num_gpu_blocks)`, which sits
      behind the queued unhashed blocks and in front of the hashed ones (unhashed frees go to the front,
      hashed ones to the tail), so building a pool costs O(1) queue entries, not one per block.
    * `get_new_blocks` pops from the front; a popped block that still carries a hash is evicted then
      (`BlockPool.get_new_blocks` → `_maybe_evict_cached_block`).
    * `free_blocks(ordered)`: blocks reaching ref_cnt 0 go to the tail if hashed (LRU) and to the front if
      not (reused first). Callers pass a request's blocks in reverse, so chain tails are evicted first.
    * `touch`: a cache hit on a free block takes it out of the queue.
    * `usage()` is `1 − free/(num_gpu_blocks − 1)` (`BlockPool.get_usage`): cached free blocks count as free.
    """

    __slots__ = ("num_gpu_blocks", "enable_caching", "keep_evicted_hashes", "ref_cnt", "block_hash", "_free",
                 "_fresh", "_cached", "num_free_unhashed", "num_evictions", "num_allocated", "num_freed",
                 "num_touched")

    def __init__(self, num_gpu_blocks: int, *, enable_caching: bool = True, keep_evicted_hashes: bool = False) -> None:
        check_pool_size(num_gpu_blocks)
        self.num_gpu_blocks = num_gpu_blocks
        self.enable_caching = enable_caching
        # An evicted hash stays in the map with the value None (a tombstone: lookups miss it), so the map
        # holds every hash ever cached (`known_hashes`). The prefix simulator counts cold misses with it;
        # the map then grows with the distinct blocks of the run, so the serve scheduler keeps this off.
        self.keep_evicted_hashes = keep_evicted_hashes
        self.ref_cnt = [0] * num_gpu_blocks
        self.block_hash: list[BlockHash | None] = [None] * num_gpu_blocks
        self._free: OrderedDict[int, None] = OrderedDict()  # free blocks that have been handed out before
        self._fresh = 1  # blocks [_fresh, num_gpu_blocks) were never handed out (block 0 is the null block)
        # hash -> block id, or {block id: None} when several blocks hold the same content
        # (vLLM's BlockHashToBlockMap does the same); None for an evicted one if keep_evicted_hashes.
        self._cached: dict[BlockHash, int | dict[int, None] | None] = {}
        self.num_free_unhashed = num_gpu_blocks - 1
        self.num_evictions = 0  # cached blocks whose hash was dropped to reuse them
        self.num_allocated = 0
        self.num_freed = 0
        self.num_touched = 0

    # -- queries ---------------------------------------------------------------------------------
    @property
    def usable_blocks(self) -> int:
        """Blocks that can hold KV (`num_gpu_blocks − 1`: the null block is reserved)."""
        return self.num_gpu_blocks - 1

    def num_free_blocks(self) -> int:
        """Blocks in the free queue, cached (evictable) ones included (`get_num_free_blocks`)."""
        return len(self._free) + self.num_gpu_blocks - self._fresh

    def usage(self) -> float:
        """`vllm:kv_cache_usage_perc`: `1 − free/(num_gpu_blocks − 1)` (`BlockPool.get_usage`)."""
        return 1.0 - self.num_free_blocks() / (self.num_gpu_blocks - 1)

    def num_cached_blocks(self) -> int:
        """Blocks that carry a hash (in use or free)."""
        return sum(1 if isinstance(v, int) else len(v) for v in self._cached.values() if v is not None)

    def free_queue(self) -> list[int]:
        """Free block ids from the front (next to be allocated/evicted) to the tail."""
        queued = list(self._free)
        front = self.num_free_unhashed - (self.num_gpu_blocks - self._fresh)  # unhashed ones, queued first
        return queued[:front] + list(range(self._fresh, self.num_gpu_blocks)) + queued[front:]

    def get_cached_block(self, block_hash: BlockHash) -> int | None:
        """A block holding this hash, or None (`BlockHashToBlockMap.get_one_block`)."""
        v = self._cached.get(block_hash)
        if v is None or isinstance(v, int):
            return v
        return next(iter(v))

    def known_hashes(self) -> int:
        """With `keep_evicted_hashes`: how many distinct hashes have ever been cached."""
        return len(self._cached)

    def is_known_hash(self, block_hash: BlockHash) -> bool:
        """With `keep_evicted_hashes`: whether `block_hash` has ever been cached (evicted since or not)."""
        return block_hash in self._cached

    def find_longest_cache_hit(self, hashes: Sequence[BlockHash], max_blocks: int) -> list[int]:
        """Blocks of the longest cached prefix of `hashes`, at most `max_blocks` of them.

        vLLM: `FullAttentionManager.find_longest_cache_hit` stops at the first miss (prefix-only hits).
        """
        if not self.enable_caching:
            return []
        cached = self._cached
        out: list[int] = []
        for h in hashes[:max_blocks]:
            v = cached.get(h)
            if v is None:
                break
            out.append(v if isinstance(v, int) else next(iter(v)))
        return out

    # -- mutations -------------------------------------------------------------------------------
    def touch(self, block_ids: Iterable[int]) -> None:
        """Take a reference on hit blocks; free ones leave the queue (`BlockPool.touch`)."""
        ref, free = self.ref_cnt, self._free
        n = 0
        for b in block_ids:
            r = ref[b]
            if r == 0:
                del free[b]
            ref[b] = r + 1
            n += 1
        self.num_touched += n

    def get_new_blocks(self, n: int, hashes: Sequence[BlockHash] = ()) -> list[int]:
        """Pop `n` blocks from the front of the free queue, evicting the cached ones (`get_new_blocks`).

        With `hashes`, the first `len(hashes)` blocks handed out are full ones and get those hashes, as
        `cache_blocks(blocks, hashes)` right after would do (vLLM: `allocate_slots` then `cache_blocks`),
        in the same pass over the blocks.
        """
        fresh_left = self.num_gpu_blocks - self._fresh
        if n > len(self._free) + fresh_left:
            raise InvalidParameter(f"cannot allocate {n} blocks: only {self.num_free_blocks()} free")
        if not self.enable_caching:
            hashes = ()
        pop = self._pop_keeping if self.keep_evicted_hashes else self._pop
        if not fresh_left:
            out = pop(n, hashes)
        else:  # queue order: queued unhashed blocks, then never-used ones, then hashed ones
            out = pop(min(n, self.num_free_unhashed - fresh_left))
            take = min(n - len(out), fresh_left)
            start = self._fresh
            self._fresh += take
            self.ref_cnt[start:start + take] = [1] * take
            self.num_free_unhashed -= take
            out.extend(range(start, start + take))
            done = len(out)
            if hashes:
                self.cache_blocks(out, hashes[:done])
            if done < n:
                out += pop(n - done, hashes[done:])
        self.num_allocated += n
        return out

    def _pop(self, n: int, hashes: Sequence[BlockHash] = ()) -> list[int]:
        """Pop `n` blocks from the front of the queued free blocks, evicting the cached ones; the first
        `len(hashes)` get those hashes (see `get_new_blocks`).

        The hot loop of both simulators: one dict operation per evicted block in the usual case (the only
        block with its hash), one per cached block, counters kept in locals. Evicting a block before the
        next is popped, rather than all first, leaves the same hash map: each block's entry changes alone.
        """
        ref, bh, cached = self.ref_cnt, self.block_hash, self._cached
        popitem, uncache = self._free.popitem, cached.pop
        out: list[int] = []
        append = out.append
        unhashed = evicted = 0
        m = min(n, len(hashes))
        for k in hashes[:m]:  # blocks that get a hash
            b = popitem(False)[0]
            h = bh[b]
            if h is None:
                unhashed += 1
            else:
                evicted += 1
                if h is not RETIRED and (v := uncache(h)) != b:  # several blocks hold this hash
                    self._uncache_one_of(b, h, v)
            bh[b] = k
            if k in cached:  # another block holds this content already
                self._cache_one_more(b, k)
            else:
                cached[k] = b
            ref[b] = 1
            append(b)
        for _ in range(n - m):
            b = popitem(False)[0]
            h = bh[b]
            if h is None:
                unhashed += 1
            else:
                evicted += 1
                bh[b] = None
                if h is not RETIRED and (v := uncache(h)) != b:
                    self._uncache_one_of(b, h, v)
            ref[b] = 1
            append(b)
        self.num_free_unhashed -= unhashed
        self.num_evictions += evicted
        return out

    def _pop_keeping(self, n: int, hashes: Sequence[BlockHash] = ()) -> list[int]:
        """`_pop` with `keep_evicted_hashes`: an evicted hash's entry becomes None instead of going away,
        and a new hash whose entry is None takes it over (one dict write each, no insertion)."""
        ref, bh, cached = self.ref_cnt, self.block_hash, self._cached
        popitem = self._free.popitem
        out: list[int] = []
        append = out.append
        unhashed = evicted = 0
        m = min(n, len(hashes))
        for k in hashes[:m]:  # blocks that get a hash
            b = popitem(False)[0]
            h = bh[b]
            if h is None:
                unhashed += 1
            else:
                evicted += 1
                if h is not RETIRED:
                    if (v := cached[h]) == b:
                        cached[h] = None
                    else:  # several blocks hold this hash
                        self._uncache_one_of(b, h, v)
            bh[b] = k
            if k in cached and cached[k] is not None:  # another block holds this content already
                self._cache_one_more(b, k)
            else:
                cached[k] = b
            ref[b] = 1
            append(b)
        for _ in range(n - m):
            b = popitem(False)[0]
            h = bh[b]
            if h is None:
                unhashed += 1
            else:
                evicted += 1
                bh[b] = None
                if h is not RETIRED:
                    if (v := cached[h]) == b:
                        cached[h] = None
                    else:
                        self._uncache_one_of(b, h, v)
            ref[b] = 1
            append(b)
        self.num_free_unhashed -= unhashed
        self.num_evictions += evicted
        return out

    def _cache_one_more(self, block: int, h: BlockHash) -> None:
        """Add `block` to the blocks that hold hash `h` (already held by one or more)."""
        v = self._cached[h]
        assert v is not None, "held by one or more"
        if isinstance(v, int):
            self._cached[h] = {v: None, block: None}
        else:
            v[block] = None

    def _uncache_one_of(self, block: int, h: BlockHash, blocks: int | dict[int, None] | None) -> None:
        """Put back hash `h`'s entry (just popped: the blocks holding it), without `block`."""
        assert isinstance(blocks, dict), "a block's hash maps to that block"
        del blocks[block]
        self._cached[h] = next(iter(blocks)) if len(blocks) == 1 else blocks

    def _evict(self, block: int, h: BlockHash) -> None:
        v = self._cached[h]
        assert v is not None, "an evicted block's hash is held"
        if isinstance(v, int):
            if self.keep_evicted_hashes:
                self._cached[h] = None
            else:
                del self._cached[h]
        else:
            del v[block]
            if len(v) == 1:
                self._cached[h] = next(iter(v))
        self.block_hash[block] = None
        self.num_evictions += 1

    def cache_block(self, block: int, block_hash: BlockHash) -> None:
        """Give a full block its hash so later requests can hit it (`BlockPool.cache_full_blocks`)."""
        if not self.enable_caching or self.block_hash[block] is not None:
            return
        self.block_hash[block] = block_hash
        v = self._cached.get(block_hash)
        if v is None:
            self._cached[block_hash] = block
        elif isinstance(v, int):
            self._cached[block_hash] = {v: None, block: None}
        else:
            v[block] = None

    def cache_blocks(self, block_ids: Sequence[int], hashes: Iterable[BlockHash]) -> None:
        """`cache_block` for each (block, hash) pair."""
        if not self.enable_caching:
            return
        bh, cached = self.block_hash, self._cached
        for b, h in zip(block_ids, hashes, strict=False):
            if bh[b] is None and h not in cached:
                bh[b] = h
                cached[h] = b
            else:
                self.cache_block(b, h)

    def retire_blocks(self, block_ids: Iterable[int]) -> None:
        """Mark full blocks whose hash nobody can look up any more (a finished request's private blocks).

        vLLM would hash them and send them to the tail; a retired block goes to the tail too and counts as
        an eviction when reused, but skips the hash map, which no lookup can tell apart.
        """
        if not self.enable_caching:
            return
        bh = self.block_hash
        for b in block_ids:
            if bh[b] is None:
                bh[b] = RETIRED

    def free_blocks(self, ordered_blocks: Iterable[int]) -> None:
        """Drop one reference on each block; at ref_cnt 0, hashed → tail, unhashed → front (`free_blocks`).

        Pass a request's blocks in reverse (`SingleTypeKVCacheManager.free`: tail blocks first). Unhashed
        blocks are pushed to the front one by one, so the last one freed is reused first.
        """
        ref, bh, free = self.ref_cnt, self.block_hash, self._free
        move = free.move_to_end
        n = unhashed = 0
        try:
            for b in ordered_blocks:
                n += 1
                r = ref[b]
                if r == 1:
                    ref[b] = 0
                    free[b] = None
                    if bh[b] is None:
                        move(b, False)
                        unhashed += 1
                elif r > 1:
                    ref[b] = r - 1
                else:
                    raise AssertionError(f"block {b} freed more often than allocated")
        finally:
            self.num_freed += n
            self.num_free_unhashed += unhashed

    def check_invariants(self) -> None:
        """Raise AssertionError if the pool's bookkeeping is inconsistent (for tests)."""
        order = self.free_queue()
        n_free = len(order)
        in_use = sum(1 for b in range(1, self.num_gpu_blocks) if self.ref_cnt[b] > 0)
        assert NULL_BLOCK_ID not in order and n_free == self.num_free_blocks() == len(set(order))
        assert 1 <= self._fresh <= self.num_gpu_blocks and all(b < self._fresh for b in self._free)
        assert in_use + n_free == self.num_gpu_blocks - 1, (in_use, n_free)
        assert all(self.ref_cnt[b] == 0 for b in order)
        unhashed = [b for b in order if self.block_hash[b] is None]
        assert len(unhashed) == self.num_free_unhashed
        # every unhashed free block sits in front of every hashed one
        assert order[: len(unhashed)] == unhashed
        assert all(self.block_hash[b] is RETIRED or self.get_cached_block(h) is not None
                   for b, h in enumerate(self.block_hash) if h is not None)
        for h, v in self._cached.items():
            assert v is not None or self.keep_evicted_hashes
            for b in ([] if v is None else [v] if isinstance(v, int) else list(v)):
                assert self.block_hash[b] == h


class SequentialPool:
    """The prefix simulator's pool: `BlockPool`'s results for requests served one at a time, faster.

    `kvplan.sim.prefix` serves a request, then frees all its blocks before the next one, so between
    requests every block is free and the free queue is: the unhashed blocks (in front, interchangeable),
    then the cached ones in LRU order. While no two blocks hold the same hash, a cached block *is* its
    hash, so the queue is a count of unhashed blocks plus one `OrderedDict` of hashes, and a request costs
    what the document's minimal LRU costs (§10): a pop per hit (the touch), a `popitem` per evicted block
    and a store per full block, appended tail-first (the order in which `free_blocks` gets them back: new
    blocks from the chain's tail back, then the hit ones); no block ids, no reference counts. The hashes
    ever cached (what `keep_evicted_hashes` keeps as tombstones) are a set updated in bulk.

    Two cases the hash-keyed queue cannot hold hand the state over to a `BlockPool` (block ids given in
    queue order: an id is a label, no result depends on it), which then serves every later request: a
    request whose new block gets a hash an old free block still holds (two blocks with one hash: the same
    prompt of whole blocks coming back recomputes its last block), handed over with that request's end
    state; and a request naming a hash twice (a trace's block_hashes can), handed over before it.
    With `check`, a shadow `BlockPool` serves every request too and each one's hits, cold misses,
    evictions, unhashed count and free-queue order must agree (for tests).
    """

    __slots__ = ("usable_blocks", "track_known", "num_free_unhashed", "num_evictions", "max_in_use", "pool", "_lru",
                 "_known", "_shadow")

    def __init__(self, num_gpu_blocks: int, *, track_known: bool = False, check: bool = False) -> None:
        check_pool_size(num_gpu_blocks)
        self.usable_blocks = num_gpu_blocks - 1
        self.track_known = track_known
        self.num_free_unhashed = self.usable_blocks
        self.num_evictions = 0
        self.max_in_use = 0  # the most blocks in use at once (those of the largest request)
        self.pool: BlockPool | None = None  # set once the state has been handed over
        self._lru: OrderedDict[BlockHash, bool] = OrderedDict()  # cached free blocks, LRU first
        self._known: set[BlockHash] = set()  # with track_known, until handed over: every hash ever cached
        self._shadow = BlockPool(num_gpu_blocks, keep_evicted_hashes=track_known) if check else None

    def known_hashes(self) -> int:
        """With `track_known`: how many distinct hashes have ever been cached."""
        if self.pool is not None:
            return self.pool.known_hashes()
        return len(self._known)

    def serve(self, keys: Sequence[BlockHash], full: int, cap: int, total_blocks: int) -> tuple[int, int]:
        """One request: `keys[:full]` its full blocks' hashes, hits capped at `cap` ≤ `full` blocks, and
        `total_blocks` held at its end (all freed after). Returns the hit blocks and, with `track_known`,
        the cold ones: of `keys[hit:cap]`, those never cached before (0 without)."""
        if self.pool is not None:
            return self._serve_pool(self.pool, keys, full, cap, total_blocks)
        if self._shadow is not None:
            expected = self._serve_pool(self._shadow, keys, full, cap, total_blocks, dry=True)
        ks = keys[:full]
        tail = dict.fromkeys(reversed(ks), True)  # what free_blocks(reversed(blocks)) appends, in order
        if len(tail) < full:  # a hash twice in one request (a trace's block_hashes can repeat)
            self._hand_over(list(self._lru))
            got = self._serve_pool(self.pool, keys, full, cap, total_blocks)  # type: ignore[arg-type]
        else:
            got = self._serve(ks, tail, cap, total_blocks)
        if self._shadow is not None:
            self._compare(expected, got)
        return got

    def _serve(self, ks: Sequence[BlockHash], tail: dict[BlockHash, bool], cap: int,
               total_blocks: int) -> tuple[int, int]:
        lru = self._lru
        pop = lru.pop
        g = 0
        for k in ks[:cap]:  # find_longest_cache_hit, and touch: a hit block leaves the queue
            if pop(k, None) is None:
                break
            g += 1
        n = total_blocks - g  # get_new_blocks: unhashed blocks first, then evict from the front
        u = self.num_free_unhashed
        if n > u:
            popitem = lru.popitem
            for _ in range(n - u):
                popitem(False)
            self.num_evictions += n - u
            u = 0
        else:
            u -= n
        if self.usable_blocks - u > self.max_in_use:
            self.max_in_use = self.usable_blocks - u
        cold = 0
        if self.track_known:
            known = self._known
            before = len(known)
            known.update(ks[g:cap])
            cold = len(known) - before
            known.update(ks[cap:])
        # free_blocks(reversed): the unhashed (last) ones to the front, the full ones to the tail
        self.num_free_unhashed = u + total_blocks - len(ks)
        before = len(lru)
        for k in tail:  # (a loop of stores is faster than OrderedDict.update)
            lru[k] = True
        if len(lru) - before < len(tail):  # an old block still holds a new block's hash: it kept its place
            self._hand_over([*islice(lru, before), *tail])
        return g, cold

    def _serve_pool(self, pool: BlockPool, keys: Sequence[BlockHash], full: int, cap: int, total_blocks: int,
                    dry: bool = False) -> tuple[int, int]:
        """`serve` through a `BlockPool`, block by block; `dry`: the shadow's (leaves this pool's counters)."""
        hit = pool.find_longest_cache_hit(keys, cap)
        g = len(hit)
        pool.touch(hit)
        if self.track_known:  # the map grows by the cold blocks and those past the cap never read
            new_past_cap = sum(1 for k in keys[cap:full] if not pool.is_known_hash(k))
            before = pool.known_hashes()
        blocks = hit + pool.get_new_blocks(total_blocks - g, keys[g:full])
        if not dry:
            self.max_in_use = max(self.max_in_use, self.usable_blocks - pool.num_free_unhashed)
        if self._shadow is not None:
            pool.check_invariants()
        blocks.reverse()  # a finished request's blocks go back tail-first
        pool.free_blocks(blocks)
        if self._shadow is not None:
            pool.check_invariants()
            assert pool.num_free_blocks() == self.usable_blocks  # everything is free again
        if not dry:
            self.num_evictions = pool.num_evictions
            self.num_free_unhashed = pool.num_free_unhashed
        cold = pool.known_hashes() - before - new_past_cap if self.track_known else 0
        return g, cold

    def _hand_over(self, queue: Sequence[BlockHash]) -> None:
        """Go on with a `BlockPool` whose free queue is the unhashed blocks, then blocks with `queue`'s hashes."""
        pool = BlockPool(self.usable_blocks + 1, keep_evicted_hashes=self.track_known)
        if self.track_known:
            pool._cached = dict.fromkeys(self._known)  # every hash ever cached, as tombstones
        hashed = len(queue)
        assert hashed + self.num_free_unhashed == self.usable_blocks
        # blocks 1..hashed hold queue's hashes, in queue order; the unhashed ones are the never-used range
        pool._free = OrderedDict.fromkeys(range(1, hashed + 1))
        pool._fresh = hashed + 1
        pool.num_free_unhashed = self.num_free_unhashed
        pool.num_evictions = self.num_evictions
        for b, h in enumerate(queue, 1):
            pool.cache_block(b, h)
        self.pool = pool
        self._lru.clear()
        self._known = set()

    def _compare(self, expected: tuple[int, int], got: tuple[int, int]) -> None:
        shadow = self._shadow
        assert shadow is not None
        assert got == expected, (got, expected)
        assert self.num_evictions == shadow.num_evictions and self.num_free_unhashed == shadow.num_free_unhashed
        assert self.known_hashes() == shadow.known_hashes()
        queue = self.free_queue_hashes()
        assert queue == [shadow.block_hash[b] for b in shadow.free_queue()[shadow.num_free_unhashed:]], queue
        if self.pool is not None:
            self.pool.check_invariants()

    def free_queue_hashes(self) -> list[BlockHash]:
        """The cached free blocks' hashes, front (next to be evicted) to tail; unhashed ones are in front."""
        if self.pool is None:
            return list(self._lru)
        pool = self.pool
        return [pool.block_hash[b] for b in pool.free_queue()[pool.num_free_unhashed:]]
