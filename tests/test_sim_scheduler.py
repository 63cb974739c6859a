"""Serving simulator: preemption where the block arithmetic says, mitigations, metrics, and agreement with a
plain step-by-step transcription of vLLM's `Scheduler.schedule` loop."""
from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass, field

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kvplan.errors import InvalidParameter
from kvplan.sim.block_pool import BlockPool, private_key
from kvplan.sim.scheduler import FixedCost, SchedulerConfig, simulate_serve
from kvplan.sim.stats import percentile_sorted, weighted_percentile
from kvplan.sim.workloads import (
    ServeRequest,
    SyntheticLoad,
    TokenStream,
    arrival_times,
    parse_length_dist,
    synthetic_serve_requests,
)

UNIT = FixedCost(per_step_s=0.01, per_token_s=0.0)  # every step 10 ms: times are step counts


def _same(n: int, prompt: int, output: int) -> list[ServeRequest]:
    return [ServeRequest(0.0, prompt, output) for _ in range(n)]


# ---------------------------------------------------------------------------------------------------
# Preemption begins where the arithmetic says


def test_no_preemption_when_every_request_fits() -> None:
    # 4 requests × (1,024 prompt + 257 output − 1 = 1,280 tokens = 80 blocks) = 320 blocks = usable
    r = simulate_serve(_same(4, 1024, 257), SchedulerConfig(num_gpu_blocks=321, max_num_seqs=4), UNIT,
                       check_invariants=True)
    assert r.num_preemptions == 0
    assert r.kv_cache_usage_perc.blocks_used_max == 320
    assert r.kv_cache_usage_perc.max == 1.0
    # 1 prefill step + 256 decode steps; every step 10 ms
    assert r.num_steps == 257
    assert r.duration_s == pytest.approx(2.57)
    assert r.time_to_first_token_seconds.p50 == pytest.approx(0.01)
    assert r.inter_token_latency_seconds.p99 == pytest.approx(0.01)
    assert r.request_time_per_output_token_seconds.mean == pytest.approx(0.01)


def test_preemption_starts_at_the_last_block_when_one_block_is_missing() -> None:
    # With 319 usable blocks the 80th block of the 4th request is missing. Block k+1 is needed when
    # 16k tokens are computed: the 80th at 1,264 = 1,024 + 240, i.e. in the step after 240 decode
    # steps, step index 241 (step 0 is the prefill). The last-admitted request preempts itself.
    r = simulate_serve(_same(4, 1024, 257), SchedulerConfig(num_gpu_blocks=320, max_num_seqs=4), UNIT,
                       check_invariants=True)
    assert r.num_preemptions == 1
    assert r.requests_preempted == 1
    assert r.first_preemption_step == 241
    assert r.first_preemption_s == pytest.approx(2.41)
    # readmitted, it finds its own 79 full blocks still cached and recomputes a single token
    assert r.prefix_cache_hits == 0
    assert r.preempted_prefix_cache_hits == 1264
    assert r.preempted_prefix_cache_queries == 1024 + 241
    assert r.recomputed_tokens == 1
    assert r.completed == 4


def test_preemption_needs_more_requests_than_blocks_for_them() -> None:
    for seqs, preempt in ((3, False), (4, True)):
        r = simulate_serve(_same(seqs, 1024, 257), SchedulerConfig(num_gpu_blocks=320, max_num_seqs=seqs), UNIT)
        assert (r.num_preemptions > 0) is preempt


def _overload() -> list[ServeRequest]:
    return synthetic_serve_requests(SyntheticLoad(64, request_rate=math.inf, arrival="poisson",
                                                  prompt_len=parse_length_dist("uniform:200:800"),
                                                  output_len=parse_length_dist("uniform:100:600"), seed=7),
                                    block_size=16)


def test_documented_mitigations_reduce_preemption() -> None:
    base = SchedulerConfig(num_gpu_blocks=600, max_num_seqs=32, max_num_batched_tokens=2048)
    worst = simulate_serve(_overload(), base, UNIT).num_preemptions
    assert worst > 10
    more_blocks = simulate_serve(_overload(), SchedulerConfig(num_gpu_blocks=900, max_num_seqs=32,
                                                              max_num_batched_tokens=2048), UNIT).num_preemptions
    fewer_seqs = simulate_serve(_overload(), SchedulerConfig(num_gpu_blocks=600, max_num_seqs=8,
                                                             max_num_batched_tokens=2048), UNIT).num_preemptions
    # FP8 KV halves the bytes per token: the same memory holds twice the blocks
    fp8 = simulate_serve(_overload(), SchedulerConfig(num_gpu_blocks=1199, max_num_seqs=32,
                                                      max_num_batched_tokens=2048), UNIT).num_preemptions
    assert more_blocks < worst
    assert fewer_seqs < worst
    assert fp8 < more_blocks


# ---------------------------------------------------------------------------------------------------
# Scheduling rules


def test_token_budget_chunks_a_long_prompt() -> None:
    # 5,000-token prompt, budget 2,048: chunks of 2,048, 2,048, 904 → first token after 3 steps
    r = simulate_serve([ServeRequest(0.0, 5000, 2)], SchedulerConfig(num_gpu_blocks=400, max_num_batched_tokens=2048,
                                                                     max_num_seqs=4), UNIT)
    assert r.time_to_first_token_seconds.p50 == pytest.approx(0.03)
    assert r.e2e_request_latency_seconds.p50 == pytest.approx(0.04)


def test_max_num_seqs_queues_the_rest() -> None:
    # 3 identical requests, 1 seat: each waits for the previous one (1 prefill + 4 decode steps each)
    r = simulate_serve(_same(3, 10, 5), SchedulerConfig(num_gpu_blocks=50, max_num_seqs=1), UNIT)
    assert sorted(round(x, 6) for x in [r.request_queue_time_seconds.p50, r.request_queue_time_seconds.max]) == \
        [0.05, 0.1]
    assert r.e2e_request_latency_seconds.max == pytest.approx(0.15)


def test_shared_prefix_hits_after_the_first_request() -> None:
    s = TokenStream(16).extend(0, 320)  # 20 full blocks of system prompt
    reqs = [ServeRequest(float(i), 400, 2, s.hashes, 20) for i in range(3)]
    r = simulate_serve(reqs, SchedulerConfig(num_gpu_blocks=200), UNIT)
    assert r.prefix_cache_queries == 3 * 400
    assert r.prefix_cache_hits == 2 * 320


def test_no_prefix_caching_means_no_hits() -> None:
    s = TokenStream(16).extend(0, 320)
    reqs = [ServeRequest(float(i), 400, 2, s.hashes, 20) for i in range(3)]
    r = simulate_serve(reqs, SchedulerConfig(num_gpu_blocks=200, enable_prefix_caching=False), UNIT)
    assert r.prefix_cache_hits == 0


def test_goodput_counts_requests_meeting_both_slos() -> None:
    r = simulate_serve(_same(3, 10, 5), SchedulerConfig(num_gpu_blocks=50, max_num_seqs=1), UNIT,
                       ttft_slo_s=0.065, tpot_slo_s=0.02)
    assert r.goodput is not None
    assert r.goodput.good_requests == 2  # TTFTs are 10, 60 and 110 ms
    assert r.goodput.goodput_req_s == pytest.approx(2 / 0.15)


def test_step_cost_model_sees_prefill_decode_and_context() -> None:
    seen: list[tuple[int, int, int]] = []

    @dataclass
    class Spy:
        calls: list[tuple[int, int, int]] = field(default_factory=list)

        def step_time(self, num_prefill_tokens: int, num_decode_reqs: int, total_context_tokens: int) -> float:
            seen.append((num_prefill_tokens, num_decode_reqs, total_context_tokens))
            return 0.001

    simulate_serve([ServeRequest(0.0, 100, 3)], SchedulerConfig(num_gpu_blocks=50), Spy())
    assert seen == [(100, 0, 100), (0, 1, 101), (0, 1, 102)]


def test_invalid_settings_are_refused() -> None:
    with pytest.raises(InvalidParameter, match="max-num-seqs"):
        simulate_serve(_same(1, 10, 2), SchedulerConfig(num_gpu_blocks=50, max_num_seqs=64,
                                                        max_num_batched_tokens=32), UNIT)
    with pytest.raises(InvalidParameter, match="usable"):
        simulate_serve(_same(1, 1000, 2), SchedulerConfig(num_gpu_blocks=10), UNIT)
    with pytest.raises(InvalidParameter, match="max-model-len"):
        simulate_serve(_same(1, 1000, 2), SchedulerConfig(num_gpu_blocks=100, max_model_len=512), UNIT)


def test_reference_cost_model_is_an_h100_roofline_of_llama_8b() -> None:
    c = FixedCost.reference()
    assert c.per_step_s == pytest.approx(16.06e9 / 3.35e12)
    assert c.per_token_s == pytest.approx(2 * 8.03e9 / 989e12)
    assert c.per_context_token_s == pytest.approx(131072 / 3.35e12)


# ---------------------------------------------------------------------------------------------------
# Workload generation and statistics


def test_length_distributions_parse_and_sample_in_range() -> None:
    import random

    rng = random.Random(0)
    assert parse_length_dist("2048").sample(rng) == 2048
    u = parse_length_dist("uniform:512:4096")
    assert all(512 <= u.sample(rng) <= 4096 for _ in range(200))
    ln = parse_length_dist("lognormal:256:0.5")
    xs = sorted(ln.sample(rng) for _ in range(4001))
    assert 230 < xs[2000] < 285  # the median is the first parameter
    for bad in ("0", "uniform:5:1", "lognormal:256", "gauss:1:2", "abc"):
        with pytest.raises(InvalidParameter):
            parse_length_dist(bad)


def test_arrivals_are_seeded_and_have_the_requested_rate() -> None:
    import random

    a = arrival_times(20_000, 10.0, "poisson", random.Random(1))
    assert a == arrival_times(20_000, 10.0, "poisson", random.Random(1))
    assert a[0] == 0.0
    assert a[-1] / (len(a) - 1) == pytest.approx(0.1, rel=0.03)
    assert arrival_times(3, 4.0, "fixed", random.Random(0)) == [0.0, 0.25, 0.5]
    assert arrival_times(2, math.inf, "poisson", random.Random(0)) == [0.0, 0.0]


def test_percentiles_match_numpys_linear_rule() -> None:
    assert percentile_sorted([1.0, 2.0, 3.0, 4.0], 50) == 2.5
    assert percentile_sorted([1.0, 2.0, 3.0, 4.0], 95) == pytest.approx(3.85)
    assert weighted_percentile([(2.0, 1), (1.0, 2), (4.0, 1)], 50) == 1.5  # [1, 1, 2, 4]
    assert weighted_percentile([(2.0, 3)], 99) == 2.0


def test_same_seed_same_report() -> None:
    cfg = SchedulerConfig(num_gpu_blocks=600, max_num_seqs=32, max_num_batched_tokens=2048)
    assert simulate_serve(_overload(), cfg, UNIT) == simulate_serve(_overload(), cfg, UNIT)


# ---------------------------------------------------------------------------------------------------
# Agreement with a direct transcription of vLLM's loop (every request visited every step)


@dataclass(eq=False)
class _R:
    uid: int
    arrival: float
    prompt: int
    output: int
    prefix: list[object]
    n_prefix: int
    num_tokens: int = 0
    computed: int = 0
    generated: int = 0
    blocks: list[int] = field(default_factory=list)
    num_cached: int = 0
    preemptions: int = 0
    first_token: float = -1.0
    finish: float = -1.0

    def key(self, i: int) -> object:
        return self.prefix[i] if i < self.n_prefix else private_key(self.uid, i)


def reference_serve(requests: list[ServeRequest], cfg: SchedulerConfig, cost: FixedCost) -> dict[str, object]:
    """vLLM's `schedule()` as written: visit every running request, allocate, cache at allocation."""
    bs = cfg.block_size
    pool = BlockPool(cfg.num_gpu_blocks, enable_caching=cfg.enable_prefix_caching)
    order = sorted(range(len(requests)), key=lambda i: requests[i].arrival_s)
    reqs = [_R(i, requests[i].arrival_s, requests[i].prompt_len, requests[i].output_len,
               list(requests[i].prefix_hashes),
               min(requests[i].num_prefix_blocks, len(requests[i].prefix_hashes), requests[i].prompt_len // bs),
               requests[i].prompt_len) for i in order]
    waiting: deque[_R] = deque()
    running: list[_R] = []
    now, nxt, preemptions, queries, hits = 0.0, 0, 0, 0, 0

    def cache(r: _R, upto: int) -> None:
        for i in range(r.num_cached, upto // bs):
            pool.cache_block(r.blocks[i], r.key(i))
        r.num_cached = max(r.num_cached, upto // bs)

    def preempt(r: _R) -> None:
        nonlocal preemptions
        pool.free_blocks(reversed(r.blocks))
        r.blocks, r.num_cached, r.computed = [], 0, 0
        r.preemptions += 1
        preemptions += 1
        waiting.appendleft(r)

    while True:
        while nxt < len(reqs) and reqs[nxt].arrival <= now:
            waiting.append(reqs[nxt])
            nxt += 1
        if not running and not waiting:
            if nxt == len(reqs):
                break
            now = reqs[nxt].arrival
            continue
        budget, preempted = cfg.max_num_batched_tokens, False
        sched: list[tuple[_R, int, bool]] = []
        i = 0
        while i < len(running) and budget > 0:
            r = running[i]
            n = min(r.num_tokens - r.computed, budget)
            need = -(-(r.computed + n) // bs) - len(r.blocks)
            ok = True
            while need > pool.num_free_blocks():
                victim = running.pop()
                preempt(victim)
                preempted = True
                if victim is r:
                    ok = False
                    break
            if not ok:
                break
            r.blocks += pool.get_new_blocks(need)
            cache(r, min(r.computed + n, r.num_tokens))
            sched.append((r, n, r.computed == r.num_tokens - 1 and r.generated > 0))
            budget -= n
            i += 1
        if not preempted:
            while waiting and budget > 0 and len(running) < cfg.max_num_seqs:
                r = waiting[0]
                keys = [r.key(i) for i in range((r.num_tokens - 1) // bs)]
                hit = pool.find_longest_cache_hit(keys, len(keys))
                g = len(hit)
                if not cfg.enable_chunked_prefill and r.num_tokens - g * bs > budget:
                    break
                n = min(r.num_tokens - g * bs, budget)
                new = -(-(g * bs + n) // bs) - g
                if new + sum(1 for b in hit if pool.ref_cnt[b] == 0) > pool.num_free_blocks():
                    break
                waiting.popleft()
                pool.touch(hit)
                r.blocks = hit + pool.get_new_blocks(new)
                r.num_cached, r.computed = g, g * bs
                cache(r, min(r.computed + n, r.num_tokens))
                queries += r.num_tokens
                hits += g * bs
                running.append(r)
                sched.append((r, n, False))
                budget -= n
        if not sched:
            continue
        n_dec = sum(1 for _, _, d in sched if d)
        dt = cost.step_time(sum(n for _, n, d in sched if not d), n_dec, sum(r.computed + n for r, n, _ in sched))
        now += dt
        done = []
        for r, n, _ in sched:
            r.computed += n
            if r.computed == r.num_tokens:
                r.generated += 1
                r.num_tokens += 1
                if r.generated == 1:
                    r.first_token = now
                if r.generated == r.output:
                    done.append(r)
        for r in done:
            r.finish = now
            running.remove(r)
            pool.free_blocks(reversed(r.blocks))
    return {"first_token": [r.first_token for r in reqs], "finish": [r.finish for r in reqs],
            "preemptions": [r.preemptions for r in reqs], "queries": queries, "hits": hits,
            "total_preemptions": preemptions}


@st.composite
def serve_cases(draw: st.DrawFn) -> tuple[list[ServeRequest], SchedulerConfig]:
    bs = draw(st.sampled_from([2, 4, 16]))
    shared = TokenStream(bs).extend(0, 64)
    n = draw(st.integers(1, 14))
    reqs = []
    for _ in range(n):
        p = draw(st.integers(1, 60))
        reqs.append(ServeRequest(draw(st.sampled_from([0.0, 0.005, 0.02, 0.1, 0.3])), p, draw(st.integers(1, 40)),
                                 shared.hashes, min(p, draw(st.integers(0, 64))) // bs))
    seqs = draw(st.integers(1, 6))
    need = max(-(-(r.prompt_len + r.output_len - 1) // bs) for r in reqs)
    mnbt = max(seqs, draw(st.sampled_from([8, 16, 32, 100])))
    longest = max(r.prompt_len + r.output_len - 1 for r in reqs)
    cfg = SchedulerConfig(num_gpu_blocks=need + 1 + draw(st.integers(0, 30)), block_size=bs, max_num_seqs=seqs,
                          max_num_batched_tokens=mnbt, enable_prefix_caching=draw(st.booleans()),
                          enable_chunked_prefill=longest > mnbt or draw(st.booleans()))
    return reqs, cfg


@settings(max_examples=300, deadline=None)
@given(serve_cases())
def test_fast_scheduler_matches_the_step_by_step_transcription(
        case: tuple[list[ServeRequest], SchedulerConfig]) -> None:
    reqs, cfg = case
    cost = FixedCost(0.01, 0.001, 0.00001)
    ref = reference_serve(reqs, cfg, cost)
    r = simulate_serve(reqs, cfg, cost, check_invariants=True)
    assert r.num_preemptions == ref["total_preemptions"]
    assert r.prefix_cache_queries + r.preempted_prefix_cache_queries == ref["queries"]
    assert r.prefix_cache_hits + r.preempted_prefix_cache_hits == ref["hits"]
    order = sorted(range(len(reqs)), key=lambda i: reqs[i].arrival_s)
    e2e = sorted(f - reqs[i].arrival_s for i, f in zip(order, ref["finish"], strict=True))  # type: ignore[call-overload]
    assert r.e2e_request_latency_seconds.max == pytest.approx(e2e[-1])
    assert r.e2e_request_latency_seconds.mean == pytest.approx(sum(e2e) / len(e2e))
    ttft = [f - reqs[i].arrival_s for i, f in zip(order, ref["first_token"], strict=True)]  # type: ignore[call-overload]
    assert r.time_to_first_token_seconds.mean == pytest.approx(sum(ttft) / len(ttft))
    # conservation: every request completes, every generated token is counted once
    assert r.completed == len(reqs)
    assert r.generation_tokens == sum(q.output_len for q in reqs)
    assert r.inter_token_latency_seconds.count == sum(q.output_len - 1 for q in reqs)
    assert r.prefix_cache_hits <= r.prefix_cache_queries
    assert 0.0 <= r.kv_cache_usage_perc.max <= 1.0


def test_without_chunked_prefill_a_prompt_waits_for_a_whole_budget() -> None:
    # budget 100: a decoding request takes 1 token, so a 100-token prompt cannot join it; it waits
    reqs = [ServeRequest(0.0, 10, 5), ServeRequest(0.0, 100, 1)]
    chunked = simulate_serve(reqs, SchedulerConfig(num_gpu_blocks=50, max_num_batched_tokens=100, max_num_seqs=2),
                             UNIT)
    whole = simulate_serve(reqs, SchedulerConfig(num_gpu_blocks=50, max_num_batched_tokens=100, max_num_seqs=2,
                                                 enable_chunked_prefill=False), UNIT)
    # chunked: 90 tokens of the long prompt ride along with the first prefill, 10 more in step 2 → TTFT 20 ms
    assert chunked.time_to_first_token_seconds.max == pytest.approx(0.02)
    # whole: the long prompt waits until the short request finishes (5 steps), then 1 step → TTFT 60 ms
    assert whole.time_to_first_token_seconds.max == pytest.approx(0.06)


def test_pool_size_from_tokens_blocks_or_a_fit_result() -> None:
    from kvplan.sim.sizing import num_gpu_blocks_from, pool_from_fit

    assert num_gpu_blocks_from(num_gpu_blocks=None, kv_tokens=21_520, block_size=16) == 1345
    assert num_gpu_blocks_from(num_gpu_blocks=1345, kv_tokens=None, block_size=16) == 1345
    with pytest.raises(InvalidParameter):
        num_gpu_blocks_from(num_gpu_blocks=1345, kv_tokens=21_520, block_size=16)

    @dataclass(frozen=True)
    class Fit:
        num_gpu_blocks: int

    assert pool_from_fit(Fit(1345)) == 1345
    with pytest.raises(InvalidParameter):
        pool_from_fit(Fit(0))
