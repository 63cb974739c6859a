"""Prefix-cache simulator: the starting document's cyclic experiment, vLLM's hit rules, conservation laws."""
from __future__ import annotations

from collections import OrderedDict

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kvplan.errors import InvalidParameter
from kvplan.sim.prefix import (
    DEFAULT_LOAD_MS_PER_KTOK,
    DEFAULT_RECOMPUTE_MS_PER_KTOK,
    OffloadSettings,
    simulate_prefix,
)
from kvplan.sim.workloads import (
    PrefixRequest,
    PrefixWorkload,
    TokenStream,
    cyclic_documents,
    multi_turn_chat,
    shared_prefix,
    zipf_documents,
)


def doc_lru_model(total: int, docs: int, n: int, bs: int) -> list[int]:
    """The starting document's §10 block LRU model, verbatim in logic (it prints 0, 0, 21,488)."""
    free: OrderedDict[tuple[int, int], int] = OrderedDict()
    fresh = total

    def serve(d: int) -> int:
        nonlocal fresh
        hs = [(d, i) for i in range(n // bs)]
        hit = 0
        while hit < len(hs) and hs[hit] in free and (hit + 1) * bs <= n - 1:
            hit += 1
        for h in hs[:hit]:
            del free[h]
        for _ in range(-(-n // bs) - hit):
            if fresh:
                fresh -= 1
            else:
                free.popitem(last=False)
        for h in reversed(hs):
            free[h] = 1
        fresh += n % bs > 0
        return hit * bs

    return [sum(serve(d) for d in order) for order in (range(docs), range(docs), reversed(range(docs)))]


def test_document_cyclic_experiment_hits_0_0_21488() -> None:
    # 1,345 blocks of 16 (vLLM's num_gpu_blocks; 1,344 usable), 10 documents of 5,033 tokens.
    r = simulate_prefix(cyclic_documents(10, 5033, 16), num_gpu_blocks=1345, block_size=16)
    assert [p.hit_tokens for p in r.passes] == [0, 0, 21_488]
    assert 21_488 == 1343 * 16  # every usable block but the one holding the partial last block
    assert r.usable_blocks == 1344
    assert r.kv_tokens == 21_520  # the log's "GPU KV cache size: 21,520 tokens"
    assert "cyclic access defeats LRU" in r.passes[1].reason
    assert r.passes[1].evicted_miss_tokens == 10 * 314 * 16  # every reusable block had been evicted
    assert r.passes[0].cold_miss_tokens == 10 * 314 * 16
    assert r.distinct_blocks == 3140


def test_simulator_agrees_with_the_documents_lru_model() -> None:
    for docs, n, total in ((10, 5033, 1344), (7, 1000, 200), (12, 4096, 900)):
        r = simulate_prefix(cyclic_documents(docs, n, 16), num_gpu_blocks=total + 1, block_size=16)
        assert [p.hit_tokens for p in r.passes] == doc_lru_model(total, docs, n, 16)


def test_smallest_pool_that_never_evicts() -> None:
    # 10 × 314 hashed blocks + 1 partial block in use + the null block = 3,142
    r = simulate_prefix(cyclic_documents(10, 5033, 16), num_gpu_blocks=1345, block_size=16, what_if_blocks=(3142, 3141))
    assert r.no_eviction is not None
    assert r.no_eviction.num_gpu_blocks == 3142
    assert r.no_eviction.hit_tokens == (0, 50_240, 50_240)
    assert r.what_if[0].hit_tokens == (0, 50_240, 50_240)
    assert r.what_if[1].total_hit_tokens < 100_480
    assert simulate_prefix(cyclic_documents(10, 5033, 16), num_gpu_blocks=3142, block_size=16).total.evicted_blocks == 0
    assert simulate_prefix(cyclic_documents(10, 5033, 16), num_gpu_blocks=3141, block_size=16).total.evicted_blocks > 0


def test_prompt_of_exactly_k_blocks_reuses_k_minus_1() -> None:
    s = TokenStream(16).extend(7, 32)  # exactly 2 blocks
    twice = (PrefixRequest(32, s.hashes, 1, 0, 0), PrefixRequest(32, s.hashes, 1, 1, 1))
    w = PrefixWorkload("t", "", ("a", "b"), twice)
    r = simulate_prefix(w, num_gpu_blocks=10, block_size=16)
    assert r.passes[1].hit_tokens == 16  # the last block is recomputed to get logits
    assert r.passes[1].uncacheable_tokens == 16
    s33 = TokenStream(16).extend(7, 33)
    twice = (PrefixRequest(33, s33.hashes, 1, 0, 0), PrefixRequest(33, s33.hashes, 1, 1, 1))
    w = PrefixWorkload("t", "", ("a", "b"), twice)
    assert simulate_prefix(w, num_gpu_blocks=10, block_size=16).passes[1].hit_tokens == 32


def test_shared_system_prompt_hits_for_every_request_after_the_first() -> None:
    r = simulate_prefix(shared_prefix(5, 100, 50, 16), num_gpu_blocks=100, block_size=16)
    # the 100-token prompt has 6 full blocks (96 tokens); requests 2..5 hit them all
    assert r.passes[0].hit_tokens == 4 * 96
    assert r.passes[0].cold_miss_tokens == 6 * 16 + 5 * ((150 - 1) // 16 - 6) * 16


def test_cache_salt_separates_tenants() -> None:
    r = simulate_prefix(shared_prefix(4, 100, 50, 16, tenants=2), num_gpu_blocks=100, block_size=16)
    assert r.passes[0].hit_tokens == 2 * 96  # one hit per tenant, not three


def test_chat_reads_back_the_previous_reply() -> None:
    # turn 2's prompt = 16 system + 32 user + 32 reply + 32 user = 112 tokens; turn 1 computed KV for
    # 16 + 32 + 31 tokens (the last reply token is never fed back): 4 full blocks = 64 tokens hit.
    r = simulate_prefix(multi_turn_chat(1, 2, 16, 32, 32, 16), num_gpu_blocks=100, block_size=16)
    assert [p.hit_tokens for p in r.passes] == [0, 64]


def test_zipf_popular_documents_hit() -> None:
    r = simulate_prefix(zipf_documents(20, 320, 200, 1.2, 0, 16, seed=1), num_gpu_blocks=2000, block_size=16)
    # the pool holds every document, so only first reads miss; each later read hits 19 of 20 blocks
    distinct = len({id(req.block_hashes) for req in zipf_documents(20, 320, 200, 1.2, 0, 16, seed=1).requests})
    assert r.total.hit_tokens == (200 - distinct) * 19 * 16


def test_same_seed_same_zipf_workload() -> None:
    a = zipf_documents(50, 64, 100, 1.0, 8, 16, seed=3)
    b = zipf_documents(50, 64, 100, 1.0, 8, 16, seed=3)
    assert [list(x.block_hashes) for x in a.requests] == [list(x.block_hashes) for x in b.requests]


def test_cpu_tier_serves_the_second_pass_in_256_token_chunks() -> None:
    # every document fits the CPU tier: pass 2 loads 19 chunks (4,864 tokens) per document — the
    # document's figure — and pass 3 the part beyond its GPU hit
    off = OffloadSettings(cpu_offload_tokens=64_000)
    r = simulate_prefix(cyclic_documents(10, 5033, 16), num_gpu_blocks=1345, block_size=16, offload=off)
    assert r.passes[1].cpu_hit_tokens == 10 * 4864
    assert r.passes[2].cpu_hit_tokens == 5 * 4864 + (4864 - 1392)
    miss = r.passes[1].miss_tokens
    assert r.passes[1].prefill_ms == pytest.approx(miss * DEFAULT_RECOMPUTE_MS_PER_KTOK / 1000)
    expected = ((miss - 48_640) * DEFAULT_RECOMPUTE_MS_PER_KTOK + 48_640 * DEFAULT_LOAD_MS_PER_KTOK) / 1000
    assert r.passes[1].prefill_ms_with_offload == pytest.approx(expected)
    assert r.passes[1].hit_tokens == 0  # the CPU tier does not change the GPU pool


def test_default_offload_figures_come_from_the_document() -> None:
    assert DEFAULT_LOAD_MS_PER_KTOK == pytest.approx(8.5 / 4.864)
    assert DEFAULT_RECOMPUTE_MS_PER_KTOK == pytest.approx(560 / 4.864)


def test_too_small_cpu_tier_holds_nothing_useful_in_cyclic_order() -> None:
    off = OffloadSettings(cpu_offload_tokens=20_000)  # < all documents: LRU again
    r = simulate_prefix(cyclic_documents(10, 5033, 16), num_gpu_blocks=1345, block_size=16, offload=off)
    assert r.passes[1].cpu_hit_tokens == 0


def test_request_larger_than_pool_is_refused() -> None:
    with pytest.raises(InvalidParameter, match="usable"):
        simulate_prefix(cyclic_documents(1, 5033, 16), num_gpu_blocks=300, block_size=16)


def test_offload_chunk_must_be_whole_blocks() -> None:
    with pytest.raises(InvalidParameter):
        simulate_prefix(cyclic_documents(1, 100, 16), num_gpu_blocks=300, block_size=16,
                        offload=OffloadSettings(cpu_offload_tokens=1000, chunk_tokens=40))


@st.composite
def workloads(draw: st.DrawFn) -> PrefixWorkload:
    bs = 4
    n = draw(st.integers(1, 25))
    reqs = []
    streams: dict[int, TokenStream] = {}
    for i in range(n):
        doc = draw(st.integers(0, 4))
        length = draw(st.integers(1, 40))
        base = streams.setdefault(doc, TokenStream(bs).extend(doc, 40))
        if draw(st.booleans()):
            s = base.copy().extend(100 + i, draw(st.integers(1, 9)))  # document + a unique question
            prompt = s.num_tokens
        else:
            s, prompt = base, length  # a prefix of the document
        out = draw(st.integers(1, 6))
        reqs.append(PrefixRequest(prompt, s.hashes, out, draw(st.integers(0, 2)), i))
    return PrefixWorkload("random", "", ("a", "b", "c"), tuple(reqs))


@settings(max_examples=150, deadline=None)
@given(workloads(), st.integers(15, 60), st.integers(0, 200))
def test_hits_plus_misses_equal_queried_tokens_and_pool_is_conserved(w: PrefixWorkload, blocks: int, cpu: int) -> None:
    r = simulate_prefix(w, num_gpu_blocks=blocks, block_size=4, offload=OffloadSettings(cpu, chunk_tokens=8),
                        check_invariants=True)
    for p in (*r.passes, r.total):
        assert p.hit_tokens + p.miss_tokens == p.query_tokens
        assert p.cold_miss_tokens + p.evicted_miss_tokens + p.uncacheable_tokens == p.miss_tokens
        assert 0 <= p.cpu_hit_tokens <= p.miss_tokens
        assert p.hit_tokens % 4 == 0
    assert r.total.query_tokens == sum(q.num_prompt_tokens for q in w.requests)
    # a pool that never evicts hits at least as much; the no-eviction size is never below the pool's needs
    assert r.no_eviction is not None
    assert r.no_eviction.total_hit_tokens >= r.total.hit_tokens
    if r.total.evicted_blocks == 0:
        assert r.no_eviction.num_gpu_blocks <= blocks
    # and a pool of exactly that size evicts nothing
    again = simulate_prefix(w, num_gpu_blocks=max(2, r.no_eviction.num_gpu_blocks), block_size=4,
                            find_no_eviction_pool=False)
    assert again.total.evicted_blocks == 0
