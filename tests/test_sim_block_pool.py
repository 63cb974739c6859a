"""BlockPool: vLLM's free-queue order, null block, eviction, usage (hand-checked)."""
from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kvplan.errors import InvalidParameter
from kvplan.sim.block_pool import NULL_BLOCK_ID, PRIVATE_KEY_BASE, BlockPool, hash_block, private_key


def test_null_block_is_reserved_so_usable_is_one_less() -> None:
    pool = BlockPool(1345)
    assert pool.usable_blocks == 1344
    assert pool.num_free_blocks() == 1344
    assert NULL_BLOCK_ID not in pool.free_queue()
    assert pool.free_queue()[:3] == [1, 2, 3]  # initial order is by block id
    assert pool.usage() == 0.0


def test_pool_of_one_block_is_refused() -> None:
    with pytest.raises(InvalidParameter):
        BlockPool(1)


def test_freed_request_goes_back_tail_first_and_evicts_tail_first() -> None:
    # 6 blocks: null + 5 usable. Request A holds 1,2,3 (hashes a0,a1 on the two full ones, 3 partial).
    pool = BlockPool(6)
    a = pool.get_new_blocks(3)
    assert a == [1, 2, 3]
    pool.cache_block(1, "a0")
    pool.cache_block(2, "a1")
    pool.free_blocks(reversed(a))
    # unhashed 3 goes to the front; hashed ones to the tail in reverse: a1 (2) before a0 (1)
    assert pool.free_queue() == [3, 4, 5, 2, 1]
    # B needs 4 blocks: 3, 4, 5 are unhashed, then block 2 (a1, the chain's tail) is evicted first
    b = pool.get_new_blocks(4)
    assert b == [3, 4, 5, 2]
    assert pool.num_evictions == 1
    assert pool.get_cached_block("a1") is None
    assert pool.get_cached_block("a0") == 1  # the prefix survives
    assert pool.find_longest_cache_hit(["a0", "a1"], 2) == [1]


def test_hit_on_a_free_block_takes_it_out_of_the_queue() -> None:
    pool = BlockPool(4)
    blocks = pool.get_new_blocks(2)
    pool.cache_block(blocks[0], "x")
    pool.free_blocks(reversed(blocks))
    assert pool.free_queue() == [2, 3, 1]
    hit = pool.find_longest_cache_hit(["x"], 1)
    assert hit == [1]
    pool.touch(hit)
    assert pool.free_queue() == [2, 3]
    assert pool.ref_cnt[1] == 1
    assert pool.usage() == pytest.approx(1 / 3)
    pool.free_blocks([1])
    assert pool.free_queue() == [2, 3, 1]  # back to the tail: most recently used


def test_shared_block_returns_to_queue_only_at_ref_cnt_zero() -> None:
    pool = BlockPool(3)
    (b,) = pool.get_new_blocks(1)
    pool.cache_block(b, "s")
    pool.touch([b])  # a second request shares it
    pool.free_blocks([b])
    assert b not in pool.free_queue()
    pool.free_blocks([b])
    assert pool.free_queue()[-1] == b


def test_unhashed_blocks_are_reused_first_lifo() -> None:
    pool = BlockPool(5)
    x = pool.get_new_blocks(4)
    pool.cache_block(x[0], "h")
    pool.free_blocks(reversed(x))  # 4, 3, 2 unhashed (pushed to the front one by one), 1 hashed
    assert pool.free_queue() == [2, 3, 4, 1]


def test_usage_counts_cached_free_blocks_as_free() -> None:
    pool = BlockPool(11)
    b = pool.get_new_blocks(5)
    assert pool.usage() == 0.5
    for i, blk in enumerate(b):
        pool.cache_block(blk, i)
    pool.free_blocks(reversed(b))
    assert pool.usage() == 0.0
    assert pool.num_cached_blocks() == 5


def test_duplicate_hashes_are_kept_per_block() -> None:
    pool = BlockPool(4)
    b1, b2 = pool.get_new_blocks(2)
    pool.cache_block(b1, "d")
    pool.cache_block(b2, "d")
    assert pool.num_cached_blocks() == 2
    pool.free_blocks([b1, b2])
    pool.get_new_blocks(2)  # 3 (unhashed), then b1 (evicted)
    assert pool.get_cached_block("d") == b2
    pool.check_invariants()


def test_allocating_more_than_free_is_refused() -> None:
    pool = BlockPool(3)
    with pytest.raises(InvalidParameter):
        pool.get_new_blocks(3)


def test_private_keys_cannot_equal_a_content_hash() -> None:
    assert private_key(0, 0) == PRIVATE_KEY_BASE
    assert abs(hash_block(0, (1, 2, 3))) < PRIVATE_KEY_BASE
    assert hash_block(0, (1, 2)) == hash_block(0, (1, 2))
    assert hash_block(0, (1, 2)) != hash_block(1, (1, 2))


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 5), st.integers(1, 4), st.booleans()), min_size=1, max_size=40),
       st.integers(3, 12))
def test_blocks_in_use_plus_free_is_always_the_pool(ops: list[tuple[int, int, bool]], n: int) -> None:
    """Random allocate/hit/free sequences keep in-use + free = num_gpu_blocks − 1."""
    pool = BlockPool(n)
    held: list[list[int]] = []
    for doc, k, release in ops:
        keys = [hash_block(doc, i) for i in range(k)]
        hit = pool.find_longest_cache_hit(keys, k)
        pool.touch(hit)
        need = k - len(hit)
        if need > pool.num_free_blocks():
            pool.free_blocks(reversed(hit))
        else:
            blocks = hit + pool.get_new_blocks(need)
            for i in range(len(hit), k):
                pool.cache_block(blocks[i], keys[i])
            held.append(blocks)
        if release and held:
            pool.free_blocks(reversed(held.pop(0)))
        pool.check_invariants()
        in_use = sum(1 for b in range(1, n) if pool.ref_cnt[b] > 0)
        assert in_use + pool.num_free_blocks() == n - 1
    for blocks in held:
        pool.free_blocks(reversed(blocks))
    assert pool.num_free_blocks() == n - 1
    pool.check_invariants()
