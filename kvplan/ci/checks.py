"""Evaluate a plan's requirements: one `CheckResult` per requirement, pass or fail, measured against required.

Pure: a validated `Deployment` (kvplan.ci.plan), its `ModelSpec` and `GpuSpec` in, frozen results out.
Each requirement measures one quantity with the same core function the other commands use, so a check
always agrees with `kvplan fit`, `kvplan roofline` and `kvplan simulate serve` on the same settings:

* `starts`: vLLM's startup verdict (capacity.plan_fit).
* `min_concurrency`: requests of `context` tokens that run at once, min(usable blocks ÷ blocks per
  request, max_num_seqs) (capacity.plan_fit's preemption verdict).
* `no_preemption`: requests of `context` tokens the usable blocks hold, against `concurrency` capped at
  max_num_seqs (the rest wait in the queue; they are not preempted).
* `min_kv_tokens`: vLLM's "GPU KV cache size: N tokens" (capacity.plan_fit).
* `min_decode_throughput`, `max_itl_ms`: decode tokens/s and step time at `batch` × `context`
  (roofline.decode_point).
* `max_p99_ttft_ms`: p99 time to first token of a seeded synthetic workload through vLLM's scheduler,
  steps timed by the roofline (sim.scheduler.simulate_serve).
* `min_headroom_pct`: (usable blocks − concurrency × blocks per request) ÷ usable blocks × 100, the
  share of the KV cache left free with `concurrency` requests of `context` tokens running.

Definitions. *Usable blocks* are vLLM's num_gpu_blocks minus the null block; *blocks per request* is
vLLM's Σ over KV-cache groups of cdiv(max memory of a `context`-token request, page) (sliding windows
capped, Mamba state counted). `context` defaults to the deployment's max_model_len and `concurrency`
to its max_num_seqs. A requirement whose load cannot run at all (vLLM would not start, a context above
max_model_len, a batch above max_num_seqs or beyond the KV cache) fails and says why.

`margin` is the slack in the requirement's unit, signed so that ≥ 0 holds: measured − required for
minimums, required − measured for maximums.
"""
from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

from kvplan.ci.plan import locate
from kvplan.errors import KvplanError

if TYPE_CHECKING:
    from kvplan.ci.plan import Deployment, Requirement, Workload
    from kvplan.hardware.gpus import GpuSpec
    from kvplan.hardware.roofline import DecodePoint
    from kvplan.model.spec import ModelSpec
    from kvplan.sglang.fit import SglangFit
    from kvplan.vllm.report import FitReport
    from kvplan.vllm.verdicts import PreemptionVerdict

Comparison = Literal[">=", "<="]
# Deployment keys that hold vLLM settings, in the order an error about them points at.
_SETTINGS_KEYS = ("vllm", "vllm_cmd", "vllm_config", "num_gpus", "measured", "vllm_version")
MS_PER_S = 1000.0
PERCENT = 100.0


@dataclass(frozen=True)
class CheckResult:
    """One requirement judged: what was required, what kvplan measures, by how much it holds or fails."""

    requirement: str  # the plan key: starts, min_concurrency, …
    key: str  # deployments[0].require.min_concurrency
    line: int  # of that key in the plan file
    passed: bool
    comparison: Comparison
    required: float | str
    measured: float | str | None  # None: not measurable (the load cannot run)
    unit: str  # requests | tokens | tok/s | ms | % | "" (starts)
    margin: float | None  # ≥ 0 holds; in `unit`
    margin_pct: float | None  # margin ÷ required × 100
    context: int | None = None
    batch: int | None = None
    concurrency: int | None = None
    message: str = ""  # one line: what was measured and why it passes or fails


@dataclass(frozen=True)
class DeploymentResult:
    """All requirements of one deployment, with the plan's headline numbers."""

    name: str
    key: str
    line: int
    model: str
    gpu: str
    num_gpus: int
    passed: bool
    startup: str  # ok | refuses: … (capacity.FitReport.startup)
    max_model_len: int
    max_num_seqs: int
    num_gpu_blocks: int
    kv_cache_tokens: int
    checks: tuple[CheckResult, ...]
    engine: str = "vllm"  # whose rules judged it (vllm | sglang)

    @property
    def headline(self) -> str:
        """The deployment's numbers in its engine's words (SGLang: context_len, max_running_requests, pool)."""
        if self.engine == "sglang":
            return (f"SGLang: context_len {self.max_model_len:,} · max_running_requests {self.max_num_seqs:,} · "
                    f"{self.kv_cache_tokens:,} tokens in the pool")
        return (f"max_model_len {self.max_model_len:,} · max_num_seqs {self.max_num_seqs:,} · "
                f"{self.num_gpu_blocks:,} KV blocks ({self.kv_cache_tokens:,} tokens)")


@dataclass(frozen=True)
class CheckReport:
    """`kvplan check`: every deployment of a plan; `passed` when every requirement holds."""

    plan: str
    passed: bool
    num_requirements: int
    num_failed: int
    deployments: tuple[DeploymentResult, ...]

    @property
    def failures(self) -> list[tuple[DeploymentResult, CheckResult]]:
        """(deployment, check) for every requirement that failed, in plan order."""
        return [(d, c) for d in self.deployments for c in d.checks if not c.passed]


def check_report(plan_path: str, deployments: Sequence[DeploymentResult]) -> CheckReport:
    """Gather deployment results into the report."""
    checks = [c for d in deployments for c in d.checks]
    failed = sum(1 for c in checks if not c.passed)
    return CheckReport(plan=plan_path, passed=failed == 0, num_requirements=len(checks), num_failed=failed,
                       deployments=tuple(deployments))


# =================================================================================================
# The measurements: the ONE place per requirement that calls another core module
# =================================================================================================


def _plan_fit(model: ModelSpec, gpu: GpuSpec, dep: Deployment, *, context: int | None = None,
              concurrency: int | None = None, kv_cache_memory_bytes: int | None = None) -> FitReport:
    """capacity.plan_fit at the deployment's settings, judged at `context` × `concurrency` (with
    `kv_cache_memory_bytes`: that KV memory per worker instead of the profiled one)."""
    from kvplan.vllm.fit import plan_fit

    settings = dep.settings.updated(context=context, concurrency=concurrency)
    if kv_cache_memory_bytes is not None:
        settings = settings.updated(kv_cache_memory_bytes=max(1, kv_cache_memory_bytes))
    return plan_fit(model, gpu, settings, advise=False)


def _decode(model: ModelSpec, gpu: GpuSpec, dep: Deployment, *, batch: int, context: int) -> DecodePoint:
    """roofline.decode_point as `kvplan roofline` computes it (the speed model's efficiencies and overheads)."""
    from kvplan.hardware import roofline as rl

    s = dep.settings
    costs, roof = rl.deployment_roofline(model, gpu, tp=s.parallel_config.tensor_parallel_size,
                                         kv_cache_dtype=s.cache_config.kv_cache_dtype,
                                         weights_bytes=s.measured.weights_total_bytes)
    return rl.decode_point(costs, roof, batch, context)


def _p99_ttft_s(model: ModelSpec, gpu: GpuSpec, dep: Deployment, fit: FitReport, workload: Workload) -> float:
    """p99 TTFT (s) of the seeded synthetic workload through vLLM's scheduler (sim.scheduler.simulate_serve),
    on the fitted pool (sim.sizing.pool_from_fit), each step timed by this model's roofline on this GPU
    (roofline.RooflineCost). The simulator keeps one pool of `block_size`-token blocks: exact for one
    KV-cache group, an approximation for hybrid models (sliding-window or Mamba groups)."""
    from kvplan.hardware import roofline as rl
    from kvplan.sim.scheduler import SchedulerConfig, simulate_serve
    from kvplan.sim.sizing import pool_from_fit
    from kvplan.sim.workloads import SyntheticLoad, parse_length_dist, synthetic_serve_requests

    s = dep.settings
    cost = rl.RooflineCost(*rl.deployment_roofline(
        model, gpu, tp=s.parallel_config.tensor_parallel_size, kv_cache_dtype=s.cache_config.kv_cache_dtype,
        weights_bytes=s.measured.weights_total_bytes))
    config = SchedulerConfig(
        num_gpu_blocks=pool_from_fit(fit), block_size=fit.block_size, max_num_seqs=fit.max_num_seqs,
        max_num_batched_tokens=fit.max_num_batched_tokens, enable_prefix_caching=s.cache_config.enable_prefix_caching,
        max_model_len=fit.max_model_len,
    )
    load = SyntheticLoad(workload.num_requests, request_rate=workload.request_rate, arrival=workload.arrival,
                         prompt_len=parse_length_dist(workload.prompt_len, what="prompt_len"),
                         output_len=parse_length_dist(workload.output_len, what="output_len"),
                         shared_prefix_tokens=workload.shared_prefix_tokens, seed=workload.seed)
    requests = synthetic_serve_requests(load, block_size=fit.block_size)
    return simulate_serve(requests, config, cost).time_to_first_token_seconds.p99


# =================================================================================================
# Evaluation
# =================================================================================================


@dataclass
class _Ctx:
    """One deployment being evaluated: its inputs, its base fit, and fits at other loads (memoised)."""

    dep: Deployment
    model: ModelSpec
    gpu: GpuSpec
    fit: FitReport
    loads: dict[tuple[int, int, bool], PreemptionVerdict] = field(default_factory=dict)

    def load(self, context: int, concurrency: int, *, pessimistic: bool = False) -> PreemptionVerdict:
        """How `concurrency` requests of `context` tokens sit in the KV cache (capacity's verdict); with
        `pessimistic`, in the cache of the low end of kvplan's available KV memory: the deployment re-planned
        with that memory given as --kv-cache-memory-bytes (every worker at the tightest stage's low end)."""
        key = (context, concurrency, pessimistic)
        if key not in self.loads:
            low = self.fit.available_kv_range[0] if pessimistic else None
            self.loads[key] = _plan_fit(self.model, self.gpu, self.dep, context=context,
                                        concurrency=concurrency, kv_cache_memory_bytes=low).preemption
        return self.loads[key]


def evaluate_deployment(dep: Deployment, model: ModelSpec, gpu: GpuSpec) -> DeploymentResult:
    """Judge every requirement of `dep` on `model` and `gpu`, in plan order.

    Errors in the inputs (a TP size that does not divide the heads, a workload longer than
    max_model_len) are raised as the core raises them, prefixed with the plan location."""
    if dep.engine == "sglang":
        return _evaluate_sglang(dep, model, gpu)
    try:
        fit = _plan_fit(model, gpu, dep)
    except KvplanError as exc:  # settings vLLM refuses: point at where they are given
        raise dep.locate(exc, next((k for k in _SETTINGS_KEYS if k in dep.lines), None)) from None
    ctx = _Ctx(dep, model, gpu, fit)
    checks = []
    for q in dep.requirements:
        try:
            checks.append(_EVALUATORS[q.kind](ctx, q))
        except KvplanError as exc:
            raise locate(exc, dep.plan, q.line, q.key) from None
    return DeploymentResult(
        name=dep.name, key=dep.key, line=dep.line, model=dep.model, gpu=gpu.id, num_gpus=dep.num_gpus,
        passed=all(c.passed for c in checks), startup=fit.startup, max_model_len=fit.max_model_len,
        max_num_seqs=fit.max_num_seqs, num_gpu_blocks=fit.num_gpu_blocks, kv_cache_tokens=fit.kv_cache_tokens,
        checks=tuple(checks),
    )


def _result(q: Requirement, *, passed: bool | None = None, comparison: Comparison, required: float | str,
            measured: float | str | None, unit: str, message: str, context: int | None = None,
            batch: int | None = None, concurrency: int | None = None) -> CheckResult:
    """A result; for numbers, `passed` and the margin follow from the comparison unless given."""
    margin = margin_pct = None
    if isinstance(measured, (int, float)) and isinstance(required, (int, float)):
        margin = measured - required if comparison == ">=" else required - measured
        margin_pct = margin / required * PERCENT if required else None
        if passed is None:
            passed = margin >= 0
    return CheckResult(
        requirement=q.kind, key=q.key, line=q.line, passed=bool(passed), comparison=comparison, required=required,
        measured=measured, unit=unit, margin=margin, margin_pct=margin_pct, context=context, batch=batch,
        concurrency=concurrency, message=message,
    )


def _num(value: float) -> str:
    """A threshold in a message, as the plan gives it: 8, 400,000, 0.5."""
    return f"{int(value):,}" if float(value).is_integer() else f"{value:,}"


def _cannot_run(ctx: _Ctx, q: Requirement, *, required: float, unit: str, comparison: Comparison,
                context: int | None = None, batch: int | None = None, concurrency: int | None = None,
                ) -> CheckResult | None:
    """A failed result when the load cannot run at all: vLLM would not start, or context > max_model_len."""
    from kvplan.vllm.verdicts import StartupRange

    fit = ctx.fit
    why = None
    if not fit.fits:
        why = f"vLLM would not start ({fit.startup})"
    elif (q.pessimistic and q.kind in ("min_concurrency", "no_preemption")
          and fit.startup_range is not StartupRange.STARTS):
        low = fit.available_kv_range[0]
        why = (f"at the pessimistic end of the estimate vLLM {fit.startup_range} ({low / 2**30:.2f} GiB of KV "
               f"memory; best {fit.available_kv_bytes / 2**30:.2f})")
    elif context is not None and context > fit.max_model_len:
        why = (f"context {context:,} is above max_model_len {fit.max_model_len:,}: vLLM rejects such requests")
    if why is None:
        return None
    return _result(q, passed=False, comparison=comparison, required=required, measured=None, unit=unit,
                   message=why, context=context, batch=batch, concurrency=concurrency)


def _starts(ctx: _Ctx, q: Requirement) -> CheckResult:
    from kvplan.vllm.verdicts import StartupRange

    fit = ctx.fit
    if q.pessimistic and fit.fits:
        low, high = fit.available_kv_range
        ok = fit.startup_range is StartupRange.STARTS
        message = (f"vLLM starts even at the pessimistic end of the estimate ({low / 2**30:.2f} … "
                   f"{high / 2**30:.2f} GiB of KV memory)" if ok else
                   f"vLLM {fit.startup_range}: at the pessimistic end of the estimate only {low / 2**30:.2f} GiB "
                   f"of KV memory (best {fit.available_kv_bytes / 2**30:.2f})")
        return _result(q, passed=ok, comparison=">=", required="starts (pessimistic)",
                       measured=fit.startup_range, unit="", message=message)
    if fit.fits:
        message = f"vLLM starts: {fit.log_line}" if fit.log_line else "vLLM starts"
    else:
        message = f"vLLM would not start ({fit.startup}): {fit.error}"
    return _result(q, passed=fit.fits, comparison=">=", required="starts",
                   measured="starts" if fit.fits else fit.startup, unit="", message=message)


def _min_concurrency(ctx: _Ctx, q: Requirement) -> CheckResult:
    fit = ctx.fit
    required = q.value or 0
    context = q.context if q.context is not None else fit.max_model_len
    failed = _cannot_run(ctx, q, required=required, unit="requests", comparison=">=", context=context)
    if failed:
        return failed
    v = ctx.load(context, fit.max_num_seqs, pessimistic=q.pessimistic)
    measured = min(v.max_requests_at_context, fit.max_num_seqs)
    limit = (f"max_num_seqs {fit.max_num_seqs:,} caps it" if fit.max_num_seqs < v.max_requests_at_context else
             f"{v.usable_blocks:,} usable blocks ÷ {v.blocks_per_request:,} per request")
    end = " at the pessimistic end of the estimate" if q.pessimistic else ""
    return _result(q, comparison=">=", required=required, measured=measured, unit="requests", context=context,
                   message=f"{measured:,} requests of {context:,} tokens run at once{end} ({limit}); "
                           f"required ≥ {_num(required)}")


def _no_preemption(ctx: _Ctx, q: Requirement) -> CheckResult:
    fit = ctx.fit
    context = q.context if q.context is not None else fit.max_model_len
    asked = q.concurrency if q.concurrency is not None else fit.max_num_seqs
    running = min(asked, fit.max_num_seqs)
    failed = _cannot_run(ctx, q, required=running, unit="requests", comparison=">=", context=context,
                         concurrency=asked)
    if failed:
        return failed
    v = ctx.load(context, asked, pessimistic=q.pessimistic)
    note = (f" ({asked:,} asked; max_num_seqs {fit.max_num_seqs:,} run at once, the rest wait in the queue)"
            if asked > fit.max_num_seqs else "")
    if q.pessimistic:
        note += " (at the pessimistic end of the estimate)"
    # needed ≤ usable ⟺ running × per_request ≤ usable ⟺ running ≤ usable // per_request = max_requests_at_context
    return _result(q, passed=not v.possible, comparison=">=", required=running,
                   measured=v.max_requests_at_context, unit="requests", context=context, concurrency=asked,
                   message=v.explanation + note)


def _min_kv_tokens(ctx: _Ctx, q: Requirement) -> CheckResult:
    fit = ctx.fit
    required = q.value or 0
    failed = _cannot_run(ctx, q, required=required, unit="tokens", comparison=">=")
    if failed:
        return failed
    if q.pessimistic:
        low = fit.kv_cache_tokens_range[0]
        return _result(q, comparison=">=", required=required, measured=low, unit="tokens",
                       message=f"GPU KV cache size at the pessimistic end of the estimate: {low:,} tokens (best "
                               f"{fit.kv_cache_tokens:,}); required ≥ {_num(required)}")
    return _result(q, comparison=">=", required=required, measured=fit.kv_cache_tokens, unit="tokens",
                   message=f"GPU KV cache size: {fit.kv_cache_tokens:,} tokens ({fit.num_gpu_blocks:,} blocks of "
                           f"{fit.block_size}); required ≥ {_num(required)}")


def _runnable_batch(ctx: _Ctx, batch: int, context: int) -> str | None:
    """Why `batch` requests of `context` tokens cannot decode together, or None when they can."""
    fit = ctx.fit
    if batch > fit.max_num_seqs:
        return f"batch {batch:,} is above max_num_seqs {fit.max_num_seqs:,}"
    v = ctx.load(context, batch)
    if v.possible:
        return f"the KV cache holds only {v.max_requests_at_context:,} requests of {context:,} tokens"
    return None


def _decode_requirement(ctx: _Ctx, q: Requirement) -> CheckResult:
    fit = ctx.fit
    itl = q.kind == "max_itl_ms"
    required = q.value or 0
    batch = q.batch or 1
    context = q.context if q.context is not None else fit.max_model_len
    unit = "ms" if itl else "tok/s"
    comparison: Comparison = "<=" if itl else ">="
    failed = _cannot_run(ctx, q, required=required, unit=unit, comparison=comparison, context=context, batch=batch)
    if failed:
        return failed
    point = _decode(ctx.model, ctx.gpu, ctx.dep, batch=batch, context=context)
    measured = point.itl_s * MS_PER_S if itl else point.tokens_per_s
    what = (f"inter-token latency {measured:,.2f} ms" if itl else f"decode {measured:,.0f} tok/s")
    sign = "≤" if itl else "≥"
    message = (f"{what} at batch {batch:,} × {context:,} tokens ({point.bound}-bound roofline); "
               f"required {sign} {_num(required)}")
    blocked = _runnable_batch(ctx, batch, context)
    if blocked:
        return _result(q, passed=False, comparison=comparison, required=required, measured=measured, unit=unit,
                       context=context, batch=batch,
                       message=f"{message}, but the batch cannot run: {blocked}")
    return _result(q, comparison=comparison, required=required, measured=measured, unit=unit, context=context,
                   batch=batch, message=message)


def _max_p99_ttft(ctx: _Ctx, q: Requirement) -> CheckResult:
    required = q.value or 0
    failed = _cannot_run(ctx, q, required=required, unit="ms", comparison="<=")
    if failed:
        return failed
    w = q.workload
    assert w is not None  # plan.py gives every max_p99_ttft_ms a workload
    measured = _p99_ttft_s(ctx.model, ctx.gpu, ctx.dep, ctx.fit, w) * MS_PER_S
    rate = "all at once" if math.isinf(w.request_rate) else f"{w.request_rate:g} req/s {w.arrival}"
    return _result(q, comparison="<=", required=required, measured=measured, unit="ms",
                   message=f"simulated p99 TTFT {measured:,.1f} ms over {w.num_requests:,} requests ({rate}, "
                           f"prompt {w.prompt_len}, output {w.output_len}, seed {w.seed}); "
                           f"required ≤ {_num(required)} ms")


def _min_headroom(ctx: _Ctx, q: Requirement) -> CheckResult:
    fit = ctx.fit
    required = q.value or 0
    context = q.context if q.context is not None else fit.max_model_len
    asked = q.concurrency if q.concurrency is not None else fit.max_num_seqs
    failed = _cannot_run(ctx, q, required=required, unit="%", comparison=">=", context=context, concurrency=asked)
    if failed:
        return failed
    v = ctx.load(context, asked)
    usable = v.usable_blocks
    pct = (usable - v.blocks_needed) / usable * PERCENT if usable else -math.inf
    capped = f" (max_num_seqs {fit.max_num_seqs:,} of {asked:,} run at once)" if asked > fit.max_num_seqs else ""
    use = (f"use {v.blocks_needed:,} of {usable:,} usable KV blocks: {pct:.1f}% left" if v.blocks_needed <= usable
           else f"need {v.blocks_needed:,} KV blocks but only {usable:,} are usable "
                f"({v.blocks_needed - usable:,} short)")
    return _result(q, comparison=">=", required=required, measured=pct, unit="%", context=context,
                   concurrency=asked,
                   message=f"{v.concurrency:,} requests of {context:,} tokens{capped} {use}; "
                           f"required ≥ {_num(required)}% left")


_EVALUATORS: dict[str, Callable[[_Ctx, Requirement], CheckResult]] = {
    "starts": _starts,
    "min_concurrency": _min_concurrency,
    "no_preemption": _no_preemption,
    "min_kv_tokens": _min_kv_tokens,
    "min_decode_throughput": _decode_requirement,
    "max_itl_ms": _decode_requirement,
    "max_p99_ttft_ms": _max_p99_ttft,
    "min_headroom_pct": _min_headroom,
}


# =================================================================================================
# `engine: sglang`: SGLang 0.5.23's plan (kvplan/sglang/fit.py) judges starts, min_kv_tokens, min_concurrency
# =================================================================================================


def _sglang_fit(dep: Deployment, model: ModelSpec, gpu: GpuSpec) -> SglangFit:
    """plan_sglang_fit with the plan's measured weights, or kvplan's loaded-weights estimate."""
    from kvplan.sglang.fit import plan_sglang_fit
    from kvplan.sglang.speculative import target_weights_bytes

    assert dep.sglang is not None
    sgl, measured = dep.sglang, dep.settings.measured
    best, low, high = target_weights_bytes(model, sgl, arch=gpu.arch, given=measured.weights_bytes,
                                           total_bytes=measured.weights_total_bytes)
    return plan_sglang_fit(model, gpu, dep.sglang, weights_bytes=best, weights_range=(low, high))


def _sglang_check(q: Requirement, fit: SglangFit) -> CheckResult:
    """One requirement judged on SGLang's plan (per replica: every attention-DP worker's pool together)."""
    if q.kind == "starts":
        message = (f"SGLang starts: {fit.pool.log_line}" if fit.pool is not None else
                   f"SGLang would not start: {fit.startup}")
        return _result(q, passed=fit.fits, comparison=">=", required="starts",
                       measured="starts" if fit.fits else "refuses", unit="", message=message)
    required = q.value or 0
    unit = "tokens" if q.kind == "min_kv_tokens" else "requests"
    context = q.context if q.context is not None else fit.context_len
    if not fit.fits or (q.kind == "min_concurrency" and context > fit.context_len):
        why = (f"SGLang would not start ({fit.startup})" if not fit.fits else
               f"context {context:,} is above context_len {fit.context_len:,}: SGLang rejects such requests")
        return _result(q, passed=False, comparison=">=", required=required, measured=None, unit=unit, message=why,
                       context=context if q.kind == "min_concurrency" else None)
    if q.kind == "min_kv_tokens":
        low = (fit.max_total_num_tokens_range or (fit.max_total_num_tokens,) * 2)[0] * fit.attn_dp_size
        measured = low if q.pessimistic else fit.total_tokens
        return _result(q, comparison=">=", required=required, measured=measured, unit=unit,
                       message=f"SGLang's pool: {measured:,} tokens ({fit.max_total_num_tokens:,} per attention-DP "
                               f"worker × {fit.attn_dp_size}); required ≥ {_num(required)}")
    from kvplan.sglang.fit import requests_at

    page = fit.defaults.page_size
    per_request = -(-context // page) * page  # for the message; the count is requests_at's
    by_pool = fit.max_total_num_tokens // per_request
    measured = requests_at(fit, context) * fit.attn_dp_size
    limit = (f"max_running_requests {fit.max_running_requests:,} caps it" if fit.max_running_requests < by_pool
             else f"{fit.max_total_num_tokens:,} pool tokens ÷ {per_request:,} per request")
    return _result(q, comparison=">=", required=required, measured=measured, unit=unit, context=context,
                   message=f"{measured:,} requests of {context:,} tokens run at once in SGLang ({limit}, × "
                           f"{fit.attn_dp_size} attention-DP workers); required ≥ {_num(required)}")


def _evaluate_sglang(dep: Deployment, model: ModelSpec, gpu: GpuSpec) -> DeploymentResult:
    try:
        fit = _sglang_fit(dep, model, gpu)
    except KvplanError as exc:
        raise dep.locate(exc, next((k for k in ("sglang", "sglang_cmd", "num_gpus") if k in dep.lines), None)) \
            from None
    checks = tuple(_sglang_check(q, fit) for q in dep.requirements)
    return DeploymentResult(
        name=dep.name, key=dep.key, line=dep.line, model=dep.model, gpu=gpu.id, num_gpus=fit.num_gpus,
        passed=all(c.passed for c in checks), startup="ok" if fit.fits else f"refuses: {fit.startup}",
        max_model_len=fit.context_len, max_num_seqs=fit.total_running_requests,
        num_gpu_blocks=fit.total_tokens // fit.defaults.page_size, kv_cache_tokens=fit.total_tokens, checks=checks,
        engine="sglang")
