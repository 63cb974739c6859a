"""Continuous-batching simulator of vLLM V1's scheduler (`v1/core/sched/scheduler.py:Scheduler.schedule`).

Per step (kvplan's reference §6): a token budget of `max_num_batched_tokens`; RUNNING requests first, in
admission order, each given `min(remaining, budget)` tokens (chunked prefill) and the blocks those tokens
need; when the pool runs dry the most recently admitted running request is preempted (FCFS: its blocks
freed tail-first, `num_computed_tokens = 0`, put back at the front of the waiting queue), and the loop
stops at a request that preempts itself. Then, only if nothing was preempted, WAITING requests are
admitted in FCFS order with a prefix-cache lookup, until `max_num_seqs` run or the budget is spent.
Blocks are cached (hashed) at allocation, as `KVCacheManager.allocate_slots` does. Async scheduling,
speculative decoding, watermark and sliding windows are not modelled.

Speed. vLLM requires `max_num_batched_tokens ≥ max_num_seqs`, so every running request is scheduled in
every step and decoding requests advance in lock step. Decoders therefore keep their state relative to a
global step counter and are grouped by block phase: a step only touches the requests that need a block,
finish, start or are preempted, never the whole batch. Blocks that only their request can hit (generated
tokens, unique prompt text) get their hash when freed, which leaves every lookup unchanged.
"""
from __future__ import annotations

import dataclasses
import math
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from kvplan.errors import InvalidParameter
from kvplan.sim.block_pool import BlockHash, BlockPool, check_block_size, check_pool_size, private_key
from kvplan.sim.stats import Distribution, percentile_sorted, summarize, summarize_weighted
from kvplan.sim.workloads import ServeRequest

if TYPE_CHECKING:
    from kvplan.sim.sizing import FittedPool

DEFAULT_BLOCK_SIZE = 16  # config/cache.py: CacheConfig.DEFAULT_BLOCK_SIZE
# engine/arg_utils.py:get_batch_defaults, OpenAI API server on an H100/H200-class GPU (reference §5).
DEFAULT_MAX_NUM_SEQS = 1024
DEFAULT_MAX_NUM_BATCHED_TOKENS = 8192

# The default cost model: an ideal roofline of Llama-3.1-8B in BF16 on one H100 SXM (a lower bound on
# step time, until `kvplan.hardware.roofline` provides a calibrated one).
REF_NUM_PARAMETERS = 8_030_000_000  # Llama-3.1-8B model card
REF_WEIGHT_BYTES = 2 * REF_NUM_PARAMETERS  # BF16
REF_KV_BYTES_PER_TOKEN = 2 * 32 * 8 * 128 * 2  # K and V × 32 layers × 8 KV heads × head 128 × 2 bytes = 131,072
H100_SXM_HBM_BYTES_PER_S = 3.35e12  # NVIDIA H100 SXM datasheet: 3.35 TB/s
H100_SXM_BF16_DENSE_FLOPS = 989e12  # NVIDIA H100 SXM datasheet: 1,979 TFLOPS BF16 with sparsity, half dense
FLOPS_PER_PARAMETER_PER_TOKEN = 2  # one multiply-add per weight per token


class StepCostModel(Protocol):
    """How long one engine step takes. `kvplan.hardware.roofline` can supply a roofline-based implementation."""

    def step_time(self, num_prefill_tokens: int, num_decode_reqs: int, total_context_tokens: int) -> float:
        """Seconds for a step that computes `num_prefill_tokens` prompt tokens and one token for each of
        `num_decode_reqs` decoding requests, attending over `total_context_tokens` KV entries in all."""
        ...


@dataclass(frozen=True)
class FixedCost:
    """`per_step_s + per_token_s × (prefill tokens + decode requests) + per_context_token_s × context`."""

    per_step_s: float
    per_token_s: float
    per_context_token_s: float = 0.0

    def step_time(self, num_prefill_tokens: int, num_decode_reqs: int, total_context_tokens: int) -> float:
        """Seconds for one step (see the class docstring)."""
        return (self.per_step_s + self.per_token_s * (num_prefill_tokens + num_decode_reqs)
                + self.per_context_token_s * total_context_tokens)

    @classmethod
    def reference(cls) -> FixedCost:
        """Llama-3.1-8B BF16 on one H100 SXM at peak: weights read once per step (≈ 4.8 ms), 2 FLOPs per
        parameter per token (≈ 16 µs), every KV entry attended read once (≈ 39 ns per token of context)."""
        return cls(REF_WEIGHT_BYTES / H100_SXM_HBM_BYTES_PER_S,
                   FLOPS_PER_PARAMETER_PER_TOKEN * REF_NUM_PARAMETERS / H100_SXM_BF16_DENSE_FLOPS,
                   REF_KV_BYTES_PER_TOKEN / H100_SXM_HBM_BYTES_PER_S)

    @classmethod
    def from_ms(cls, step_ms: float | None = None, ms_per_token: float | None = None,
                ms_per_context_ktok: float | None = None) -> FixedCost:
        """`--step-ms`, `--ms-per-token`, `--ms-per-context-ktok`, each defaulting to the reference's. NaN and ∞
        are refused (Click's min=0.0 lets them through, NaN < 0 being false): either would reach the clock as NaN
        (an IndexError, a NaN cast to int); so is a negative figure (the command's min=0.0)."""
        for flag, value in (("--step-ms", step_ms), ("--ms-per-token", ms_per_token),
                            ("--ms-per-context-ktok", ms_per_context_ktok)):
            if value is not None and not (math.isfinite(value) and value >= 0):
                raise InvalidParameter(f"{flag} must be a finite number of milliseconds ≥ 0, got {value}")
        ref = cls.reference()
        return cls(ref.per_step_s if step_ms is None else step_ms / 1000,
                   ref.per_token_s if ms_per_token is None else ms_per_token / 1000,
                   ref.per_context_token_s if ms_per_context_ktok is None else ms_per_context_ktok / 1e6)


@dataclass(frozen=True)
class SchedulerConfig:
    """The engine settings the scheduler reads, with vLLM's names."""

    num_gpu_blocks: int
    block_size: int = DEFAULT_BLOCK_SIZE
    max_num_seqs: int = DEFAULT_MAX_NUM_SEQS
    max_num_batched_tokens: int = DEFAULT_MAX_NUM_BATCHED_TOKENS
    enable_chunked_prefill: bool = True
    enable_prefix_caching: bool = True
    max_model_len: int | None = None

    def validate(self) -> None:
        """Raise InvalidParameter for settings vLLM refuses (`config/scheduler.py` checks)."""
        check_block_size(self.block_size)
        if self.num_gpu_blocks < 2:
            raise InvalidParameter(f"num-gpu-blocks must be ≥ 2 (block 0 is the null block), got {self.num_gpu_blocks}")
        check_pool_size(self.num_gpu_blocks)
        if self.max_num_seqs < 1:
            raise InvalidParameter(f"max-num-seqs must be ≥ 1, got {self.max_num_seqs}")
        if self.max_num_batched_tokens < self.max_num_seqs:
            raise InvalidParameter(
                f"max-num-batched-tokens ({self.max_num_batched_tokens}) must be ≥ max-num-seqs ({self.max_num_seqs})",
                hint="vLLM's SchedulerConfig refuses it too")


@dataclass(frozen=True)
class KvUsagePoint:
    """KV usage over one slice of the run: time-weighted mean and maximum."""

    t_start_s: float
    t_end_s: float
    mean: float
    max: float


@dataclass(frozen=True)
class KvUsageSummary:
    """`vllm:kv_cache_usage_perc` (0–1) over the run: time-weighted mean (idle time counts as 0),
    percentiles over steps, maximum, the most blocks in use, and a coarse timeline."""

    mean: float
    p50: float
    p95: float
    p99: float
    max: float
    blocks_used_max: int
    timeline: tuple[KvUsagePoint, ...]


@dataclass(frozen=True)
class Goodput:
    """Requests meeting every given SLO, per second of the run (DistServe's goodput, as `vllm bench`)."""

    ttft_slo_s: float | None
    tpot_slo_s: float | None
    good_requests: int
    goodput_req_s: float


def parse_slo_s(text: str | float | None, what: str) -> float | None:
    """A goodput target: `500ms`, `0.5s` or a bare number of milliseconds (as `vllm bench serve --goodput
    ttft:500`), in seconds; None when not given."""
    if text is None:
        return None
    t = str(text).strip().lower()
    try:
        if t.endswith("ms"):
            v = float(t[:-2]) / 1000
        elif t.endswith("s"):
            v = float(t[:-1])
        else:
            v = float(t) / 1000
    except ValueError:
        raise InvalidParameter(f"{what}: cannot read {text!r}", hint="examples: 500ms, 0.5s, 500 (ms)") from None
    if not v > 0 or not math.isfinite(v):
        raise InvalidParameter(f"{what} must be > 0, got {text!r}")
    return v


@dataclass(frozen=True)
class ServeReport:
    """Result of `simulate_serve`. Metric names follow vLLM's Prometheus metrics (without `vllm:`).

    Prefix-cache counters are in tokens and counted once per admission; as in vLLM's `PrefixCacheStats`,
    lookups of requests readmitted after preemption are kept apart (`preempted_prefix_cache_*`).
    """

    config: SchedulerConfig
    cost_model: str
    cost_model_params: dict[str, float]
    num_requests: int
    completed: int
    duration_s: float
    num_steps: int
    request_throughput: float
    output_token_throughput: float
    total_token_throughput: float
    prompt_tokens: int
    generation_tokens: int
    prefill_tokens_computed: int
    recomputed_tokens: int
    prefix_cache_queries: int
    prefix_cache_hits: int
    prefix_cache_hit_rate: float
    preempted_prefix_cache_queries: int
    preempted_prefix_cache_hits: int
    num_preemptions: int
    requests_preempted: int
    first_preemption_s: float | None
    first_preemption_step: int | None
    max_running: int
    time_to_first_token_seconds: Distribution
    inter_token_latency_seconds: Distribution
    request_time_per_output_token_seconds: Distribution
    request_queue_time_seconds: Distribution
    e2e_request_latency_seconds: Distribution
    kv_cache_usage_perc: KvUsageSummary
    goodput: Goodput | None
    deployment: FittedPool | None = None  # what --model/--gpu took from `kvplan fit` (None: the pool given)


class _Req:
    __slots__ = ("uid", "arrival", "prompt", "output", "prefix", "n_prefix", "num_tokens", "computed", "generated",
                 "blocks", "num_cached", "seq", "base", "g0", "d0", "finish_tick", "first_sched", "first_token",
                 "last_token", "finish", "preemptions")

    def __init__(self, uid: int, r: ServeRequest, block_size: int) -> None:
        self.uid = uid
        self.arrival = r.arrival_s
        self.prompt = r.prompt_len
        self.output = r.output_len
        self.prefix: Sequence[BlockHash] = r.prefix_hashes
        self.n_prefix = min(r.num_prefix_blocks, len(r.prefix_hashes), r.prompt_len // block_size)
        self.num_tokens = r.prompt_len  # prompt + tokens generated so far
        self.computed = 0
        self.generated = 0
        self.blocks: list[int] = []
        self.num_cached = 0  # leading blocks that carry their hash
        self.seq = -1  # admission order (the running list's order)
        self.base = 0  # decoding: computed = base + step counter
        self.g0 = 0
        self.d0 = 0
        self.finish_tick = -1  # ≥ 0 while decoding
        self.first_sched = -1.0
        self.first_token = -1.0
        self.last_token = -1.0
        self.finish = -1.0
        self.preemptions = 0

    def key(self, i: int) -> BlockHash:
        return self.prefix[i] if i < self.n_prefix else private_key(self.uid, i)


class _Sim:
    """One run. Decoders: `finish_tick ≥ 0`, state relative to `tick`; at most one partial prefill (last)."""

    def __init__(self, config: SchedulerConfig, cost: StepCostModel, check: bool = False,
                 progress: Callable[[int, int], None] | None = None) -> None:
        self.progress = progress  # (requests finished, requests) every PROGRESS_EVERY steps
        self.completed = 0
        self.check = check
        self.cfg = config
        self.cost = cost
        self.bs = config.block_size
        self.pool = BlockPool(config.num_gpu_blocks, enable_caching=config.enable_prefix_caching)
        self.waiting: deque[_Req] = deque()
        self.running: dict[int, _Req] = {}
        self.phase: list[dict[int, _Req]] = [{} for _ in range(self.bs)]
        self.finish_at: dict[int, list[_Req]] = {}
        self.n_dec = 0
        self.base_sum = 0
        self.prefiller: _Req | None = None
        self.tick = 0
        self.seq = 0
        self.num_preemptions = 0
        self.first_preemption: tuple[float, int] | None = None
        self.queries = 0
        self.hits = 0
        self.pre_queries = 0
        self.pre_hits = 0
        self.prefill_computed = 0
        self.recomputed = 0

    # -- block bookkeeping ---------------------------------------------------------------------------
    def _free(self, r: _Req, finished: bool = False) -> None:
        """Hash the full blocks not hashed yet (private ones lazily, here), then free tail-first.

        A finished request's private blocks can never be hit again: they are retired, not hashed.
        """
        blocks, lo, hi, n_prefix = r.blocks, r.num_cached, r.computed // self.bs, r.n_prefix
        if hi > lo:
            mid = max(lo, min(hi, n_prefix))
            if mid > lo:
                self.pool.cache_blocks(blocks[lo:mid], [r.prefix[i] for i in range(lo, mid)])
            if finished:
                self.pool.retire_blocks(blocks[mid:hi])
            else:
                base = private_key(r.uid, 0)
                self.pool.cache_blocks(blocks[mid:hi], range(base + mid, base + hi))
        self.pool.free_blocks(reversed(blocks))
        r.blocks = []
        r.num_cached = 0

    def _cache_prefix(self, r: _Req, upto_tokens: int) -> None:
        end = min(upto_tokens // self.bs, r.n_prefix)
        if end > r.num_cached:
            cache, blocks, prefix = self.pool.cache_block, r.blocks, r.prefix
            for i in range(r.num_cached, end):
                cache(blocks[i], prefix[i])
            r.num_cached = end

    def _stop_decoding(self, r: _Req) -> None:
        """Materialise a decoder's counters and take it out of the lock-step structures."""
        t = self.tick
        r.computed = r.base + t
        r.generated = r.g0 + t - r.d0
        r.num_tokens = r.prompt + r.generated
        del self.phase[r.base % self.bs][r.seq]
        self.base_sum -= r.base
        self.n_dec -= 1
        r.finish_tick = -1

    def _preempt(self, r: _Req, now: float) -> None:
        """FCFS preemption (`Scheduler._preempt_request`): free, recompute from 0, front of the queue."""
        if r.finish_tick >= 0:
            self._stop_decoding(r)
        elif r is self.prefiller:
            self.prefiller = None
        del self.running[r.seq]
        self._free(r)
        r.computed = 0
        r.preemptions += 1
        if r.generated:
            r.last_token = now
        self.num_preemptions += 1
        if self.first_preemption is None:
            self.first_preemption = (now, self.tick)
        self.waiting.appendleft(r)

    def _make_room(self, r: _Req, n_blocks: int, now: float) -> bool:
        """Preempt the last running request until `n_blocks` are free; False if `r` preempted itself."""
        pool, running = self.pool, self.running
        while pool.num_free_blocks() < n_blocks:
            victim = running[next(reversed(running))]
            self._preempt(victim, now)
            if victim is r:
                return False
        return True

    def _slow_decode_alloc(self, bucket: dict[int, _Req], now: float) -> None:
        """Decoders that need a block, in running order, when the pool cannot serve them all."""
        running, pool = self.running, self.pool
        for seq in sorted(bucket):
            r = running.get(seq)
            if r is None:  # preempted as a victim: so was everything admitted after it
                return
            if not self._make_room(r, 1, now):
                return
            r.blocks.append(pool.get_new_blocks(1)[0])

    def _check_invariants(self) -> None:
        pool, bs, t = self.pool, self.bs, self.tick
        pool.check_invariants()
        in_use = {b for b in range(1, pool.num_gpu_blocks) if pool.ref_cnt[b] > 0}
        held: set[int] = set()
        for r in self.running.values():
            held.update(r.blocks)
            computed = r.base + t if r.finish_tick >= 0 else r.computed
            assert len(r.blocks) == -(-computed // bs), (r.uid, len(r.blocks), computed)
        assert held == in_use
        assert all(not r.blocks for r in self.waiting)
        assert self.n_dec == sum(1 for r in self.running.values() if r.finish_tick >= 0)
        assert len(self.running) <= self.cfg.max_num_seqs

    # -- one step, in vLLM's order (v1/core/sched/scheduler.py) -----------------------------------------
    def _allocate_decode_blocks(self, start: float) -> None:
        """RUNNING: decoders that cross a block boundary this step need one block each
        (Scheduler.schedule, the running loop's allocate_slots)."""
        bucket = self.phase[(-self.tick) % self.bs]
        if bucket:
            pool = self.pool
            if len(bucket) <= pool.num_free_blocks():
                for r, b in zip(list(bucket.values()), pool.get_new_blocks(len(bucket)), strict=True):
                    r.blocks.append(b)
            else:
                self._slow_decode_alloc(bucket, start)

    def _continue_prefill(self, p: _Req, budget: int, start: float, sched: list[tuple[_Req, int]]) -> int:
        """RUNNING: the partial prefill, last in the running order, takes what is left of the token budget;
        the budget after it (Scheduler.schedule, chunked prefill)."""
        chunk = min(p.num_tokens - p.computed, budget)
        need = -(-(p.computed + chunk) // self.bs) - len(p.blocks)
        if not self._make_room(p, need, start):
            return budget
        p.blocks.extend(self.pool.get_new_blocks(need))
        self._cache_prefix(p, min(p.computed + chunk, p.num_tokens))
        sched.append((p, chunk))
        return budget - chunk

    def _cache_hit(self, r: _Req) -> list[int]:
        """The cached blocks a waiting request starts from, at most num_tokens − 1 tokens
        (v1/core/kv_cache_manager.py:KVCacheManager.get_computed_blocks)."""
        if not self.cfg.enable_prefix_caching:
            return []
        bs = self.bs
        cap = (r.num_tokens - 1) // bs  # max_cache_hit_length = num_tokens − 1
        if not (r.generated or r.preemptions):
            cap = min(cap, r.n_prefix)  # a fresh request's private blocks cannot be cached
        if not cap:
            return []
        return self.pool.find_longest_cache_hit([r.key(i) for i in range(cap)], cap)

    def _admit(self, r: _Req, hit: list[int], new_blocks: int, num_new: int, start: float) -> None:
        """Move the head of the queue to running with its hit and new blocks; count its prefix-cache query."""
        pool, bs = self.pool, self.bs
        g = len(hit)
        self.waiting.popleft()
        pool.touch(hit)
        r.blocks = hit + pool.get_new_blocks(new_blocks)
        r.num_cached = g
        r.computed = g * bs
        self._cache_prefix(r, min(r.computed + num_new, r.num_tokens))
        if r.preemptions:  # vLLM's PrefixCacheStats keeps readmissions apart
            self.pre_queries += r.num_tokens
            self.pre_hits += g * bs
        else:
            self.queries += r.num_tokens
            self.hits += g * bs
        if r.first_sched < 0:
            r.first_sched = start
        self.seq += 1
        r.seq = self.seq
        self.running[r.seq] = r

    def _admit_waiting(self, budget: int, start: float, sched: list[tuple[_Req, int]]) -> None:
        """WAITING, FCFS: admit requests while the token budget, the seats and the free blocks last
        (Scheduler.schedule, the waiting loop)."""
        waiting, running, pool, bs = self.waiting, self.running, self.pool, self.bs
        max_seqs, chunked, ref = self.cfg.max_num_seqs, self.cfg.enable_chunked_prefill, pool.ref_cnt
        while waiting and budget > 0 and len(running) < max_seqs:
            r = waiting[0]
            hit = self._cache_hit(r)
            g = len(hit)
            num_new = r.num_tokens - g * bs
            if not chunked and num_new > budget:
                break
            num_new = min(num_new, budget)
            new_blocks = -(-(g * bs + num_new) // bs) - g
            evictable = sum(1 for b in hit if ref[b] == 0)
            if new_blocks + evictable > pool.num_free_blocks():
                break
            self._admit(r, hit, new_blocks, num_new, start)
            sched.append((r, num_new))
            budget -= num_new

    def _schedule(self, start: float) -> list[tuple[_Req, int]]:
        """One step's schedule: decode blocks, the partial prefill, then (only in a step without preemption)
        new requests; each scheduled request with its prefill tokens (Scheduler.schedule)."""
        preempted_before = self.num_preemptions
        self._allocate_decode_blocks(start)
        budget = self.cfg.max_num_batched_tokens - self.n_dec
        sched: list[tuple[_Req, int]] = []
        p = self.prefiller
        if p is not None:
            budget = self._continue_prefill(p, budget, start, sched)
        if self.num_preemptions == preempted_before and self.waiting:
            self._admit_waiting(budget, start, sched)
        return sched

    def _execute(self, sched: list[tuple[_Req, int]], n_dec: int) -> float:
        """Execute the step: its seconds from the cost model; count prefill and recomputed tokens, advance the tick."""
        prefill_tokens = sum(c for _, c in sched)
        ctx = self.base_sum + n_dec * (self.tick + 1) + sum(r.computed + c for r, c in sched)
        dt = self.cost.step_time(prefill_tokens, n_dec, ctx)
        self.prefill_computed += prefill_tokens
        self.recomputed += sum(c for r, c in sched if r.preemptions)
        self.tick += 1
        return dt

    def _start_decoding(self, r: _Req, tick: int) -> None:
        """A request whose prefill completed decodes from the next step: file it by finish tick and block phase."""
        r.base = r.computed - tick
        r.g0, r.d0 = r.generated, tick
        r.finish_tick = tick + r.output - r.generated
        self.finish_at.setdefault(r.finish_tick, []).append(r)
        self.phase[r.base % self.bs][r.seq] = r
        self.base_sum += r.base
        self.n_dec += 1

    def _update_from_output(self, sched: list[tuple[_Req, int]], now: float, itl: list[tuple[float, int]]) -> None:
        """After the step: stop the decoders due now, advance the prefills (a completed one samples its first
        token), then free the finished in running order (Scheduler.update_from_output)."""
        tick = self.tick
        finished: list[_Req] = []
        done = self.finish_at.pop(tick, None)
        if done:
            for r in done:
                if r.finish_tick == tick:
                    self._stop_decoding(r)
                    finished.append(r)
        self.prefiller = None
        for r, c in sched:
            r.computed += c
            if r.computed < r.num_tokens:
                if self.prefiller is not None:
                    raise AssertionError("two partial prefills in one step")
                self.prefiller = r
                continue
            r.generated += 1  # prefill complete: a token is sampled
            r.num_tokens += 1
            if r.generated == 1:
                r.first_token = now
            else:
                itl.append((now - r.last_token, 1))
            r.last_token = now
            if r.generated == r.output:
                finished.append(r)
                continue
            self._start_decoding(r, tick)
        if finished:
            finished.sort(key=lambda q: q.seq)
            running = self.running
            self.completed += len(finished)
            for r in finished:
                r.finish = now
                del running[r.seq]
                self._free(r, finished=True)

    # -- the run ---------------------------------------------------------------------------------------
    def run(self, reqs: list[_Req]) -> tuple[list[float], list[float], list[float], list[tuple[float, int]], int, int]:
        """The serve loop: admit arrivals, then schedule, execute and update one step at a time until every
        request is done (v1/engine/core.py:EngineCore.step)."""
        waiting, running, pool = self.waiting, self.running, self.pool
        step_t: list[float] = []
        step_dt: list[float] = []
        step_usage: list[float] = []
        itl: list[tuple[float, int]] = []
        n = len(reqs)
        nxt = 0
        now = 0.0
        max_running = 0
        idle_steps = 0
        while True:
            while nxt < n and reqs[nxt].arrival <= now:
                waiting.append(reqs[nxt])
                nxt += 1
            if not running and not waiting:
                if nxt == n:
                    break
                now = reqs[nxt].arrival
                continue
            start = now
            sched = self._schedule(start)
            n_dec = self.n_dec
            if not sched and not n_dec:
                idle_steps += 1  # everything scheduled was preempted; the next step readmits
                if idle_steps > 2:
                    raise AssertionError("scheduler made no progress")
                continue
            idle_steps = 0
            if len(running) > max_running:
                max_running = len(running)
            dt = self._execute(sched, n_dec)
            now = start + dt
            step_t.append(start)
            step_dt.append(dt)
            step_usage.append(pool.usage())
            if n_dec:
                itl.append((dt, n_dec))
            self._update_from_output(sched, now, itl)
            if self.check:
                self._check_invariants()
            if self.progress is not None and len(step_t) % PROGRESS_EVERY == 0:
                self.progress(self.completed, n)
        if self.progress is not None:
            self.progress(self.completed, n)
        return step_t, step_dt, step_usage, itl, max_running, len(step_t)


def _check_requests(reqs: Sequence[ServeRequest], cfg: SchedulerConfig) -> None:
    usable = cfg.num_gpu_blocks - 1
    for i, r in enumerate(reqs):
        if r.prompt_len < 1 or r.output_len < 1:
            raise InvalidParameter(f"request {i}: prompt and output lengths must be ≥ 1")
        if not math.isfinite(r.arrival_s) or r.arrival_s < 0:
            raise InvalidParameter(f"request {i}: arrival time must be finite and ≥ 0")
        total = r.prompt_len + r.output_len
        if cfg.max_model_len is not None and total > cfg.max_model_len:
            raise InvalidParameter(f"request {i}: prompt + output = {total:,} tokens exceeds max-model-len "
                                   f"{cfg.max_model_len:,}")
        blocks = -(-(total - 1) // cfg.block_size)
        if blocks > usable:
            raise InvalidParameter(
                f"request {i} needs {blocks:,} blocks ({total - 1:,} tokens of KV) but the pool has {usable:,} usable",
                hint="vLLM refuses to start when one max_model_len request does not fit; give a larger pool")
        if not cfg.enable_chunked_prefill and total - 1 > cfg.max_num_batched_tokens:
            raise InvalidParameter(f"request {i}: {total - 1:,} tokens to (re)compute exceed max-num-batched-tokens "
                                   "without chunked prefill")


PROGRESS_EVERY = 2048  # steps between progress calls (a few per second of simulation)


def simulate_serve(requests: Sequence[ServeRequest], config: SchedulerConfig, cost: StepCostModel, *,
                   ttft_slo_s: float | None = None, tpot_slo_s: float | None = None,
                   timeline_points: int = 40, check_invariants: bool = False,
                   progress: Callable[[int, int], None] | None = None) -> ServeReport:
    """Run `requests` (any order; sorted by arrival, stable) through the scheduler and report vLLM's
    latency, throughput, preemption and KV-usage metrics. TTFT, queue time and end-to-end latency are
    measured from arrival; TPOT = (e2e − TTFT)/(output − 1); ITL per generated token after the first.
    `check_invariants` (slow, for tests) verifies the pool and the lock-step bookkeeping after every step.
    `progress(finished, total)` is called every PROGRESS_EVERY steps and once at the end."""
    config.validate()
    _check_requests(requests, config)
    order = sorted(range(len(requests)), key=lambda i: requests[i].arrival_s)
    reqs = [_Req(i, requests[i], config.block_size) for i in order]
    sim = _Sim(config, cost, check_invariants, progress)
    step_t, step_dt, step_usage, itl, max_running, num_steps = sim.run(reqs)

    duration = max((r.finish for r in reqs), default=0.0)
    ttft = [r.first_token - r.arrival for r in reqs]
    e2e = [r.finish - r.arrival for r in reqs]
    queue = [r.first_sched - r.arrival for r in reqs]
    tpot = [(r.finish - r.first_token) / (r.output - 1) for r in reqs if r.output > 1]
    prompt_tokens = sum(r.prompt for r in reqs)
    gen_tokens = sum(r.output for r in reqs)
    goodput = None
    if ttft_slo_s is not None or tpot_slo_s is not None:
        good = sum(1 for r in reqs
                   if (ttft_slo_s is None or r.first_token - r.arrival <= ttft_slo_s)
                   and (tpot_slo_s is None or r.output == 1
                        or (r.finish - r.first_token) / (r.output - 1) <= tpot_slo_s))
        goodput = Goodput(ttft_slo_s, tpot_slo_s, good, good / duration if duration > 0 else 0.0)
    params: dict[str, float] = {}
    if dataclasses.is_dataclass(cost) and not isinstance(cost, type):
        params = dataclasses.asdict(cost)
    return ServeReport(
        config=config, cost_model=type(cost).__name__, cost_model_params=params,
        num_requests=len(reqs), completed=sum(1 for r in reqs if r.finish >= 0), duration_s=duration,
        num_steps=num_steps,
        request_throughput=len(reqs) / duration if duration > 0 else 0.0,
        output_token_throughput=gen_tokens / duration if duration > 0 else 0.0,
        total_token_throughput=(prompt_tokens + gen_tokens) / duration if duration > 0 else 0.0,
        prompt_tokens=prompt_tokens, generation_tokens=gen_tokens,
        prefill_tokens_computed=sim.prefill_computed, recomputed_tokens=sim.recomputed,
        prefix_cache_queries=sim.queries, prefix_cache_hits=sim.hits,
        prefix_cache_hit_rate=sim.hits / sim.queries if sim.queries else 0.0,
        preempted_prefix_cache_queries=sim.pre_queries, preempted_prefix_cache_hits=sim.pre_hits,
        num_preemptions=sim.num_preemptions, requests_preempted=sum(1 for r in reqs if r.preemptions),
        first_preemption_s=sim.first_preemption[0] if sim.first_preemption else None,
        first_preemption_step=sim.first_preemption[1] if sim.first_preemption else None,
        max_running=max_running,
        time_to_first_token_seconds=summarize(ttft),
        inter_token_latency_seconds=summarize_weighted(itl),
        request_time_per_output_token_seconds=summarize(tpot),
        request_queue_time_seconds=summarize(queue),
        e2e_request_latency_seconds=summarize(e2e),
        kv_cache_usage_perc=_kv_summary(step_t, step_dt, step_usage, duration, config.num_gpu_blocks - 1,
                                        timeline_points),
        goodput=goodput,
    )


def _kv_summary(step_t: list[float], step_dt: list[float], usage: list[float], duration: float, usable: int,
                points: int) -> KvUsageSummary:
    if not usage:
        return KvUsageSummary(0.0, 0.0, 0.0, 0.0, 0.0, 0, ())
    s = sorted(usage)
    mean = math.fsum(u * d for u, d in zip(usage, step_dt, strict=True)) / duration if duration > 0 else s[-1]
    k = max(1, min(points, len(usage)))
    width = duration / k if duration > 0 else 1.0
    area = [0.0] * k
    peak = [0.0] * k
    for t, d, u in zip(step_t, step_dt, usage, strict=True):
        i = min(int(t / width), k - 1)
        end = t + d
        while True:  # spread the step over the slices it covers
            hi = (i + 1) * width if i < k - 1 else math.inf
            area[i] += u * (min(end, hi) - t)
            peak[i] = max(peak[i], u)
            if end <= hi:
                break
            t, i = hi, i + 1
    timeline = tuple(KvUsagePoint(i * width, (i + 1) * width, area[i] / width, peak[i]) for i in range(k))
    return KvUsageSummary(mean, percentile_sorted(s, 50), percentile_sorted(s, 95), percentile_sorted(s, 99), s[-1],
                          round(s[-1] * usable), timeline)
