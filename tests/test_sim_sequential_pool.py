"""SequentialPool (the prefix simulator's pool) gives BlockPool's results request by request."""
from __future__ import annotations

import dataclasses

from hypothesis import given, settings
from hypothesis import strategies as st

from kvplan.sim.block_pool import BlockPool, SequentialPool
from kvplan.sim.prefix import simulate_prefix
from kvplan.sim.workloads import PrefixRequest, PrefixWorkload, cyclic_documents

BS = 4


def _serve_all(pool: SequentialPool, reqs: list[tuple[list[int], int, int]]) -> list[tuple[int, int]]:
    """Requests as (hashes, prompt tokens, output tokens), served as kvplan.sim.prefix does."""
    out = []
    for hashes, p, o in reqs:
        computed = p + o - 1
        full = computed // BS
        keys = [*hashes, *range(10**6 + 100 * len(out), 10**6 + 100 * len(out) + full - len(hashes))][:full]
        out.append(pool.serve(keys, full, (p - 1) // BS, -(-computed // BS)))
    return out


def test_a_repeated_whole_block_prompt_hands_over_to_a_block_pool() -> None:
    # the same 3-block prompt twice: the second recomputes its last block, so two blocks hold its hash
    pool = SequentialPool(20, track_known=True, check=True)
    got = _serve_all(pool, [([1, 2, 3], 12, 1), ([1, 2, 3], 12, 1), ([1, 2, 3], 12, 2)])
    assert got == [(0, 2), (2, 0), (2, 0)]
    assert pool.pool is not None
    assert pool.free_queue_hashes() == [3, 3, 3, 2, 1]  # each recomputed copy stays in the queue


def test_a_hash_twice_in_one_request_hands_over_before_it() -> None:
    pool = SequentialPool(20, track_known=True, check=True)
    got = _serve_all(pool, [([5, 6], 9, 1), ([5, 5, 5], 13, 1)])
    assert pool.pool is not None
    assert got[1][0] == 3  # vLLM hits block 5 three times (one pop per hash would stop after the first)


def test_the_document_scenario_stays_on_the_fast_path() -> None:
    w = cyclic_documents(10, 5033, 16)
    pool = SequentialPool(1345, track_known=True)
    for r in w.requests:
        full = (r.num_prompt_tokens + r.num_output_tokens - 1) // 16
        pool.serve(r.block_hashes, full, (r.num_prompt_tokens - 1) // 16, -(-(r.num_prompt_tokens) // 16))
    assert pool.pool is None
    assert pool.known_hashes() == 10 * 314


@st.composite
def workloads(draw: st.DrawFn) -> PrefixWorkload:
    """Small hash alphabets: shared prefixes, whole-block prompts repeated, hashes repeated in a request."""
    alphabet = draw(st.integers(1, 12))
    reqs = []
    for i in range(draw(st.integers(1, 30))):
        n = draw(st.integers(0, 8))
        if draw(st.booleans()):
            hashes = [draw(st.integers(0, alphabet)) for _ in range(n)]  # anything, repeats included
        else:
            start = draw(st.integers(0, 3))
            hashes = list(range(100 * start, 100 * start + n))  # a document's prefix
        prompt = max(1, BS * n - draw(st.sampled_from([0, 0, 1, 3])))
        reqs.append(PrefixRequest(prompt, hashes, draw(st.integers(1, 9)), draw(st.integers(0, 1)), i))
    return PrefixWorkload("random", "", ("a", "b"), tuple(reqs))


@settings(max_examples=300, deadline=None)
@given(workloads(), st.integers(12, 40), st.lists(st.integers(12, 60), max_size=2))
def test_same_results_as_block_pool_request_by_request(w: PrefixWorkload, blocks: int, what_if: list[int]) -> None:
    # check_invariants: a shadow BlockPool serves every request too; hits, cold misses, evictions and the
    # free queue's order must agree after each one
    checked = simulate_prefix(w, num_gpu_blocks=blocks, block_size=BS, what_if_blocks=what_if,
                              check_invariants=True)
    plain = simulate_prefix(w, num_gpu_blocks=blocks, block_size=BS, what_if_blocks=what_if)
    assert dataclasses.asdict(checked) == dataclasses.asdict(plain)


def test_hand_over_keeps_tombstones_and_counters() -> None:
    pool = SequentialPool(8, track_known=True)
    _serve_all(pool, [([1, 2, 3], 13, 1), ([7, 8, 9], 13, 1), ([1, 2], 8, 1), ([1, 2], 8, 1)])
    assert pool.pool is not None
    ref = BlockPool(8, keep_evicted_hashes=True)
    assert pool.known_hashes() == 6 > ref.known_hashes()
    assert pool.num_evictions == pool.pool.num_evictions > 0
