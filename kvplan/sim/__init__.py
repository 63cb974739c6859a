"""Simulators of vLLM's block pool (prefix caching) and scheduler (continuous batching).

* `block_pool.BlockPool`: the free queue, hash map, reference counts and null block both simulators share.
* `prefix.simulate_prefix`: requests one at a time, hits per pass, a larger pool, a CPU offload tier.
* `scheduler.simulate_serve`: continuous batching with chunked prefill and FCFS preemption.
* `workloads`: synthetic scenarios, length distributions, arrivals, JSONL traces.
"""
