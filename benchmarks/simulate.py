"""Speed of kvplan's simulators.

1. The starting document's cyclic scenario scaled ×SCALE (default 100: 1,000 documents of 5,033 tokens,
   3 passes, a pool of 134,500 blocks), through `kvplan.sim.prefix` and through a minimal LRU model of the
   kind the document sketches in its §10 (an OrderedDict of block hashes, written below): same hits per
   pass, and the time ratio. Block operations = allocations + frees + hit touches.
2. 100,000 requests through `kvplan.sim.scheduler.simulate_serve`: simulated requests per second.

Run: python benchmarks/simulate.py [--scale 100] [--serve-requests 100000]
"""
from __future__ import annotations

import argparse
import math
import time
from collections import OrderedDict

from kvplan.sim.prefix import request_blocks, simulate_prefix
from kvplan.sim.scheduler import FixedCost, SchedulerConfig, simulate_serve
from kvplan.sim.workloads import SyntheticLoad, cyclic_documents, parse_length_dist, synthetic_serve_requests

BS, DOC_DOCS, DOC_TOKENS, DOC_BLOCKS = 16, 10, 5033, 1345  # the document's §9/§10 scenario
_clock = time.perf_counter  # --cpu-time switches to time.process_time (steadier on a busy machine)


def minimal_lru(usable: int, docs: int, n: int, bs: int) -> list[int]:
    """The document's §10 model: a counter of never-used blocks and an OrderedDict of cached free blocks."""
    free: OrderedDict[tuple[int, int], None] = OrderedDict()
    fresh = usable
    full, total, partial = n // bs, -(-n // bs), n % bs > 0

    def serve(d: int) -> int:
        nonlocal fresh
        hit = 0
        while hit < full and (d, hit) in free and (hit + 1) * bs <= n - 1:
            hit += 1
        for i in range(hit):
            del free[(d, i)]
        for _ in range(total - hit):
            if fresh:
                fresh -= 1
            else:
                free.popitem(last=False)
        for i in range(full - 1, -1, -1):
            free[(d, i)] = None
        fresh += partial
        return hit * bs

    return [sum(serve(d) for d in order) for order in (range(docs), range(docs), reversed(range(docs)))]


def bench_prefix(scale: int) -> None:
    docs, blocks = DOC_DOCS * scale, DOC_BLOCKS * scale
    t0 = _clock()
    workload = cyclic_documents(docs, DOC_TOKENS, BS)
    t1 = _clock()
    report = simulate_prefix(workload, num_gpu_blocks=blocks, block_size=BS, find_no_eviction_pool=False)
    t2 = _clock()
    lru = minimal_lru(blocks - 1, docs, DOC_TOKENS, BS)
    t3 = _clock()
    full = simulate_prefix(workload, num_gpu_blocks=blocks, block_size=BS)
    t4 = _clock()
    ops = 2 * sum(request_blocks(r.num_prompt_tokens, r.num_output_tokens, BS) for r in workload.requests)
    ops += report.total.hit_tokens // BS
    hits = [p.hit_tokens for p in report.passes]
    print(f"prefix: {docs:,} documents × {DOC_TOKENS:,} tokens × 3 passes, pool {blocks:,} blocks")
    print(f"  kvplan hits per pass      {hits}")
    print(f"  minimal LRU hits per pass {lru}  -> {'same' if hits == lru else 'DIFFERENT'}")
    print(f"  workload build (hashing)  {t1 - t0:6.2f} s")
    print(f"  kvplan simulation         {t2 - t1:6.2f} s  ({ops:,} block ops, {ops / (t2 - t1):,.0f} block ops/s)")
    print(f"  minimal LRU model         {t3 - t2:6.2f} s  (kvplan / LRU = {(t2 - t1) / (t3 - t2):.1f}×)")
    print(f"  with no-eviction analysis {t4 - t3:6.2f} s  (smallest pool that never evicts: "
          f"{full.no_eviction.num_gpu_blocks if full.no_eviction else 0:,} blocks)")
    if hits != lru:
        raise SystemExit("hit counts differ")


def bench_serve(n: int) -> None:
    cfg = SchedulerConfig(num_gpu_blocks=30_000, block_size=BS, max_num_seqs=256, max_num_batched_tokens=8192)
    t0 = _clock()
    reqs = synthetic_serve_requests(SyntheticLoad(n, request_rate=20.0, arrival="poisson",
                                                  prompt_len=parse_length_dist("uniform:256:2048"),
                                                  output_len=parse_length_dist("lognormal:192:0.6"), seed=0),
                                    block_size=BS)
    t1 = _clock()
    r = simulate_serve(reqs, cfg, FixedCost.reference())
    t2 = _clock()
    print(f"serve: {n:,} requests, Poisson 20 req/s, prompts uniform:256:2048, outputs lognormal:192:0.6, "
          f"{cfg.num_gpu_blocks:,} blocks, max_num_seqs {cfg.max_num_seqs}")
    print(f"  generate {t1 - t0:.2f} s; simulate {t2 - t1:.2f} s = {n / (t2 - t1):,.0f} simulated requests/s, "
          f"{r.num_steps / (t2 - t1):,.0f} steps/s ({r.num_steps:,} steps, {r.generation_tokens:,} tokens)")
    ttft = r.time_to_first_token_seconds
    print(f"  simulated: {r.duration_s:,.0f} s, {r.request_throughput:.2f} req/s, TTFT p50/p99 "
          f"{1000 * ttft.p50:.0f}/{1000 * ttft.p99:.0f} ms, preemptions {r.num_preemptions:,}, "
          f"KV usage mean {100 * r.kv_cache_usage_perc.mean:.0f}%, max running {r.max_running}")
    if not math.isfinite(r.duration_s):
        raise SystemExit("bad run")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--scale", type=int, default=100)
    ap.add_argument("--serve-requests", type=int, default=100_000)
    ap.add_argument("--cpu-time", action="store_true", help="time with process CPU time instead of wall time")
    args = ap.parse_args()
    global _clock
    if args.cpu_time:
        _clock = time.process_time
    print(f"timing: {'process CPU time' if args.cpu_time else 'wall clock'}")
    bench_prefix(args.scale)
    bench_serve(args.serve_requests)


if __name__ == "__main__":
    main()
