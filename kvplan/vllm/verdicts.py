"""Verdicts on a plan: will vLLM start (and with which error if not), and can it preempt under load."""
from __future__ import annotations

from dataclasses import dataclass

from kvplan.units import GiB
from kvplan.verdict import Verdict
from kvplan.vllm.block_plan import NO_MEMORY_MESSAGE, KVCachePlan
from kvplan.vllm.memory.budget import MemoryBudget


class Startup(Verdict):
    """Whether vLLM starts, or the way it stops (startup_verdict; FitReport.verdict.startup)."""

    OK = "ok"
    OOM_LOADING_WEIGHTS = "OOM loading weights"
    OOM_ALLOCATING_KV_CACHE = "OOM allocating the KV cache"
    REFUSES_FREE_MEMORY = "refuses: free memory"
    REFUSES_NO_KV_MEMORY = "refuses: no KV memory"
    REFUSES_MAX_MODEL_LEN = "refuses: max_model_len"

    @property
    def out_of_memory(self) -> bool:
        """CUDA (or HIP) runs out of memory: the weights, or the KV cache --kv-cache-memory-bytes asks for."""
        return self in (Startup.OOM_LOADING_WEIGHTS, Startup.OOM_ALLOCATING_KV_CACHE)


class StartupRange(Verdict):
    """The startup verdict over kvplan's estimate range (vllm/fit.py:range_fields; FitReport.verdict.startup_range)."""

    STARTS = "starts"
    STARTS_IF_OPTIMISTIC = "starts only if the estimate is optimistic"
    DOES_NOT_START = "does not start"


def startup_verdict(budget: MemoryBudget, plan: KVCachePlan, *,
                    platform: str = "cuda") -> tuple[Startup, str | None]:
    """(Startup.OK, None) or the way startup fails and the message vLLM (or CUDA) stops with, in the order vLLM
    meets them: loading the weights, allocating `--kv-cache-memory-bytes`, the free-memory check at init
    (v1/worker/utils.py:request_memory), no KV memory, one max-length request not fitting
    (kv_cache_utils.py:_check_enough_kv_cache_memory). On ROCm torch's allocator says "HIP out of memory"."""
    runtime = "HIP" if platform == "rocm" else "CUDA"
    free = budget.startup_free_bytes
    weights = budget.weights.bytes
    given = budget.kv_cache_memory_bytes
    if given is None and weights > free:
        return Startup.OOM_LOADING_WEIGHTS, (
            f"{runtime} out of memory while loading the weights: {weights / GiB:.2f} GiB per GPU do not fit in "
            f"{free / GiB:.2f} GiB free"
        )
    if given is not None and weights + given > free:
        return Startup.OOM_ALLOCATING_KV_CACHE, (
            f"{runtime} out of memory: {weights / GiB:.2f} GiB of weights plus the {given / GiB:.2f} GiB asked for "
            f"with --kv-cache-memory-bytes exceed the {free / GiB:.2f} GiB free per GPU"
        )
    if not budget.startup_ok:
        return Startup.REFUSES_FREE_MEMORY, budget.startup_error()
    if plan.refusal == NO_MEMORY_MESSAGE:
        return Startup.REFUSES_NO_KV_MEMORY, plan.refusal
    if plan.refusal is not None:
        return Startup.REFUSES_MAX_MODEL_LEN, plan.refusal
    return Startup.OK, None


@dataclass(frozen=True)
class PreemptionVerdict:
    """Whether `concurrency` running requests of `context` tokens can outgrow the usable blocks.

    vLLM admits up to max_num_seqs requests; when a running request needs a block and none is free,
    the newest request is preempted and recomputed later (v1/core/sched/scheduler.py).
    """

    possible: bool
    context: int  # tokens per request (prompt + output) analysed
    concurrency: int  # running requests analysed (capped at max_num_seqs)
    blocks_per_request: int  # at `context`
    blocks_needed: int  # concurrency × blocks_per_request
    usable_blocks: int  # num_gpu_blocks − the null block
    max_requests_at_context: int  # how many such requests fit at once
    from_concurrency: int | None  # first running count that can be preempted at `context` (None: never)
    from_context: int | None  # shortest context at which `concurrency` requests can be preempted (None: never)
    explanation: str


def _draft_slots(lookahead: int) -> str:
    return f" (+{lookahead} draft slot{'s' if lookahead > 1 else ''} each)" if lookahead else ""


def preemption_verdict(
    plan: KVCachePlan, *, max_num_seqs: int, context: int | None = None, concurrency: int | None = None,
    lookahead: int = 0,
) -> PreemptionVerdict:
    """Preemption risk of `concurrency` (default max_num_seqs) requests of `context` (default
    max_model_len) tokens, and where it begins along each axis. `lookahead`: the KV slots a speculative
    draft reserves past each request's tokens (config/vllm.py:num_lookahead_tokens, passed to
    kv_cache_manager.allocate_slots by the scheduler)."""
    ctx = context if context is not None else plan.max_model_len
    running = min(concurrency if concurrency is not None else max_num_seqs, max_num_seqs)
    usable = plan.usable_blocks

    def blocks(tokens: int) -> int:
        return plan.request_blocks(tokens + lookahead)

    per_req = blocks(ctx)
    needed = running * per_req
    max_req = usable // per_req if per_req else max_num_seqs
    from_conc = max_req + 1 if max_req + 1 <= max_num_seqs else None
    # Shortest context at which `running` requests overflow (monotone in the context).
    from_ctx: int | None = None
    if running * blocks(plan.max_model_len) > usable:
        lo, hi = 1, plan.max_model_len
        while lo < hi:
            mid = (lo + hi) // 2
            if running * blocks(mid) > usable:
                hi = mid
            else:
                lo = mid + 1
        from_ctx = lo
    possible = needed > usable
    if not plan.fits:
        text = "vLLM would not start with these settings, so there is nothing to preempt."
    elif possible:
        text = (
            f"{running:,} requests of {ctx:,} tokens{_draft_slots(lookahead)} need "
            f"{needed:,} blocks but only {usable:,} are usable: "
            f"preemption is possible from the {_ordinal(from_conc or running)} such request running at once."
        )
    else:
        text = (
            f"{running:,} requests of {ctx:,} tokens need {needed:,} of the {usable:,} usable blocks: "
            "no preemption at this load."
        )
    return PreemptionVerdict(
        possible and plan.fits, ctx, running, per_req, needed, usable, max_req, from_conc, from_ctx, text
    )


def _ordinal(n: int) -> str:
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n:,}{suffix}"
