"""Diagnose a running vLLM server from its metrics: pure rules over one or two scrapes.

The rules are those of the starting document §8 ("Metrics and /metrics") and §6 (preemption):

* waiting requests, `kv_cache_usage_perc` near 1 and preemptions rising → `kv_shortage`; the
  mitigations vLLM's docs give: raise gpu_memory_utilization, lower max_num_seqs or
  max_num_batched_tokens, store KV in FP8, add tensor parallelism;
* waiting requests while KV usage stays low → `batch_limit`: max_num_seqs or the token budget binds;
* prefix caching on but few hits (hits ÷ queries) → `low_prefix_hit_rate`, with what breaks sharing
  (vllm-reference.md §7: chained block hashes with cache_salt, full blocks only, LRU eviction);
* queue time p95 above a threshold → `high_queue_time`;
* none of these → `healthy`.

With `--plan MODEL --gpu …` (`compare_report_with_plan`), each engine's KV capacity from
`vllm:cache_config_info` (num_gpu_blocks × block_size) is set against kvplan's prediction for MODEL with
the settings the server reveals there (utilization, KV dtype, block size, prefix caching) →
`plan_matches` (info) or `plan_mismatch` (warning).

With one scrape, counters are totals since the server started; with two (`--interval`), they become
changes and rates over the window, and histograms are differenced so quantiles describe the window.
"""
from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Final, Literal

from kvplan.errors import InvalidParameter
from kvplan.observe.metrics import (
    SCALAR_METRICS,
    EngineMetrics,
    Histogram,
    MetricsSnapshot,
    Quantile,
    histogram_quantile,
)

if TYPE_CHECKING:
    from kvplan.model.spec import ModelSpec
    from kvplan.vllm.settings import GpuLike, ServeSettings

Severity = Literal["ok", "info", "warning", "critical"]
Evidence = Mapping[str, float | int | str | None]

QUANTILES: Final = (0.5, 0.95, 0.99)
# kvplan's bound on any count: int64's range (a counter past it has wrapped or was made up; 1e300 is finite)
MAX_COUNT: Final = 2.0**63
LATENCY_ORDER: Final = ("ttft", "itl", "queue", "prefill", "decode", "e2e")
LATENCY_METRIC: Final[Mapping[str, str]] = {
    "ttft": "vllm:time_to_first_token_seconds",
    "itl": "vllm:inter_token_latency_seconds",
    "queue": "vllm:request_queue_time_seconds",
    "prefill": "vllm:request_prefill_time_seconds",
    "decode": "vllm:request_decode_time_seconds",
    "e2e": "vllm:e2e_request_latency_seconds",
}

KV_SHORTAGE_ACTIONS: Final = (
    "raise --gpu-memory-utilization: more of the GPU for KV blocks",
    "lower --max-num-seqs or --max-num-batched-tokens: fewer requests holding blocks at once",
    "store KV in FP8 (--kv-cache-dtype fp8): half the bytes per token, twice the tokens",
    "add GPUs with a larger --tensor-parallel-size: KV heads are split across them",
)
PREFIX_CHECKS: Final = (
    "cache_salt: requests with different salts (per user or tenant) never share blocks",
    "the prompt start: a system prompt that varies, or a timestamp or request id near the start, "
    "changes the hash of every block after it (hashes are chained from the first block)",
    "block alignment: only full blocks of {block_size} tokens are cached, so a shared prefix shorter than "
    "one block never hits, and a full hit still recomputes the last block",
    "eviction by cyclic access: when the prefixes reused in turn outgrow the KV cache, LRU evicts each one "
    "just before it is needed again (more KV memory, fewer distinct prefixes in flight, or route requests "
    "with the same prefix to the same server)",
)


@dataclass(frozen=True)
class Thresholds:
    """Where the rules draw their lines; each is a `kvplan diagnose` option."""

    kv_high: float = 0.9  # KV usage at or above which the cache counts as full
    hit_rate_low: float = 0.1  # prefix-cache hit rate below which sharing is judged broken
    min_prefix_queries: float = 1000.0  # tokens looked up before the hit rate is judged
    queue_p95_high_s: float = 1.0  # queue-time p95 above which requests wait too long
    max_num_seqs: int | None = None  # the server's --max-num-seqs, when known, to name the binding limit

    def __post_init__(self) -> None:
        if not 0.0 < self.kv_high <= 1.0:
            raise InvalidParameter(f"--kv-high must be within (0, 1], got {self.kv_high}")
        if not 0.0 <= self.hit_rate_low <= 1.0:
            raise InvalidParameter(f"--hit-rate-low must be within [0, 1], got {self.hit_rate_low}")
        if not self.min_prefix_queries >= 0:  # written so that NaN fails too
            raise InvalidParameter(f"--min-prefix-queries must be ≥ 0, got {self.min_prefix_queries:g}")
        if not self.queue_p95_high_s > 0:  # NaN would compare false with every p95: never reported
            raise InvalidParameter(f"--queue-p95-high must be > 0 s, got {self.queue_p95_high_s:g}")
        if self.max_num_seqs is not None and self.max_num_seqs < 1:
            raise InvalidParameter(f"--max-num-seqs must be ≥ 1, got {self.max_num_seqs}")


@dataclass(frozen=True)
class Latency:
    """One latency histogram summarised: observations, mean and p50/p95/p99 with their buckets."""

    name: str
    metric: str
    count: float
    mean_s: float | None
    quantiles: tuple[Quantile, ...]

    def quantile(self, q: float) -> Quantile | None:
        """The q-quantile if there were observations."""
        return next((x for x in self.quantiles if x.q == q), None)


@dataclass(frozen=True)
class EngineFigures:
    """The figures the diagnosis rests on, for one engine. Counters are over `window_s` when two
    scrapes were taken, else since the server started (`window_s` None)."""

    model_name: str | None
    engine: str | None
    window_s: float | None
    running: float | None
    waiting: float | None
    waiting_change: float | None  # waiting now − waiting at the first scrape
    waiting_by_reason: Mapping[str, float]
    kv_cache_usage: float | None
    kv_cache_usage_first: float | None  # at the first scrape, when two were taken
    preemptions_total: float | None
    preemptions: float | None  # in the window, or since start
    preemptions_per_s: float | None
    prefix_cache_queries: float | None
    prefix_cache_hits: float | None
    prefix_hit_rate: float | None
    prompt_tokens_per_s: float | None
    generation_tokens_per_s: float | None
    latencies: tuple[Latency, ...]
    cache_config: Mapping[str, str]
    # Samples no server can expose (∞, NaN, a negative count, KV usage above 1): metric name → why, with
    # the value. They are left out of every figure above and reported as `invalid_metrics`, not diagnosed.
    invalid: Mapping[str, str] = field(default_factory=dict)

    def latency(self, name: str) -> Latency | None:
        """The summary of one latency histogram (`ttft`, `itl`, `queue`, `prefill`, `decode`, `e2e`)."""
        return next((x for x in self.latencies if x.name == name), None)


@dataclass(frozen=True)
class Diagnosis:
    """One finding about one engine, the figures it rests on, and what to do."""

    code: str
    severity: Severity
    message: str
    model_name: str | None
    engine: str | None
    actions: tuple[str, ...] = ()
    evidence: Evidence = field(default_factory=dict)


@dataclass(frozen=True)
class PlanComparison:
    """The server's KV capacity (cache_config_info) against kvplan's prediction, in tokens."""

    observed_num_gpu_blocks: int
    observed_block_size: int
    predicted_num_gpu_blocks: int
    predicted_block_size: int
    observed_tokens: int
    predicted_tokens: int
    difference_tokens: int  # observed − predicted
    relative_difference: float  # (observed − predicted) / observed
    model_name: str | None = None  # the engine compared (labels of its metrics)
    engine: str | None = None
    settings: Mapping[str, str] = field(default_factory=dict)  # what the plan took from cache_config_info

    @property
    def block_size_matches(self) -> bool:
        """Whether server and plan use the same block size."""
        return self.observed_block_size == self.predicted_block_size


@dataclass(frozen=True)
class DiagnoseReport:
    """`kvplan diagnose`'s result: per-engine figures and every diagnosis (each names its engine)."""

    source: str
    window_s: float | None
    engines: tuple[EngineFigures, ...]
    diagnoses: tuple[Diagnosis, ...]
    plan: tuple[PlanComparison, ...] | None = None


# --------------------------------------------------------------------------------------------------
# Figures


def _delta(now: float | None, before: float | None) -> float | None:
    """A counter's increase; a decrease means the server restarted, so all it counts now is new."""
    if now is None:
        return None
    if before is None:
        return now
    return now - before if now >= before else now


def _latency(name: str, hist: Histogram) -> Latency:
    quantiles = tuple(x for q in QUANTILES if (x := histogram_quantile(q, hist)) is not None)
    mean = hist.sum / hist.count if hist.count > 0 and hist.sum == hist.sum else None
    return Latency(name, LATENCY_METRIC[name], hist.count, mean, quantiles)


def _impossible(value: float, *, fraction: bool = False) -> str | None:
    """Why a gauge or counter value cannot come from a server, or None when it can: every vLLM scalar
    kvplan reads is a count or a fraction, so finite and ≥ 0; KV usage is a fraction of the pool, ≤ 1."""
    if math.isnan(value) or math.isinf(value):
        return f"{value} is not a finite number"
    if value < 0:
        return f"{value:g} is negative, and it counts something"
    if value > MAX_COUNT:
        return f"{value:.3g} is above 2**63, more than any counter of a server reaches"
    if fraction and value > 1.0 + 1e-9:
        return f"{value:g} is above 1, and it is a fraction of the KV pool"
    return None


def _bad_histogram(hist: Histogram) -> str | None:
    """Why a histogram breaks the exposition format's rules (Prometheus text format, "Histograms and
    summaries"; OpenMetrics "Histogram"): counts finite and ≥ 0, buckets cumulative (never decreasing with
    le), the +Inf bucket equal to _count. None when it keeps them."""
    counts = [hist.count, *(c for _, c in hist.buckets)]
    if any(math.isnan(c) or math.isinf(c) or c < 0 or c > MAX_COUNT for c in counts):
        return "a bucket or the count is not a finite number from 0 to 2**63"
    if math.isinf(hist.sum) or hist.sum < 0:  # NaN is kept: it stands for a series without _sum
        return f"its sum is {hist.sum}"
    for (le0, c0), (le1, c1) in zip(hist.buckets, hist.buckets[1:], strict=False):
        if c1 < c0:
            return f"its cumulative bucket counts decrease (le={le0:g}: {c0:g}, le={le1:g}: {c1:g})"
    if hist.buckets and hist.buckets[-1][1] != hist.count:
        return f"its +Inf bucket ({hist.buckets[-1][1]:g}) is not its _count ({hist.count:g})"
    return None


def _prefix_hits_above_queries(m: EngineMetrics) -> str | None:
    """Prefix-cache hits are the looked-up tokens that hit: never more than the queries (vLLM's
    v1/metrics/stats.py PrefixCacheStats counts `hits` among `queries`)."""
    if m.prefix_cache_hits is not None and m.prefix_cache_queries is not None \
            and m.prefix_cache_hits > m.prefix_cache_queries:
        return f"{m.prefix_cache_hits:g} hits is above the {m.prefix_cache_queries:g} queries they are part of"
    return None


def valid_metrics(m: EngineMetrics, *, scrape: str = "") -> tuple[EngineMetrics, dict[str, str]]:
    """`m` without the samples no server exposes (see `_impossible`), and those samples: metric name →
    why. A histogram with an impossible count is dropped whole; so is a waiting reason."""
    changes: dict[str, object] = {}
    invalid: dict[str, str] = {}
    suffix = f" ({scrape})" if scrape else ""
    for attr, names in SCALAR_METRICS.items():
        value = getattr(m, attr)
        if value is not None and (why := _impossible(value, fraction=attr == "kv_cache_usage")):
            changes[attr] = None
            invalid[names[0]] = why + suffix
    if "prefix_cache_hits" not in changes and "prefix_cache_queries" not in changes \
            and (why := _prefix_hits_above_queries(m)):
        changes["prefix_cache_hits"] = changes["prefix_cache_queries"] = None
        invalid[SCALAR_METRICS["prefix_cache_hits"][0]] = why + suffix
    reasons = {}
    for reason, value in m.waiting_by_reason.items():
        if why := _impossible(value):
            invalid[f"vllm:num_requests_waiting_by_reason{{reason={reason!r}}}"] = why + suffix
        else:
            reasons[reason] = value
    if len(reasons) != len(m.waiting_by_reason):
        changes["waiting_by_reason"] = reasons
    histograms = {}
    for name, hist in m.histograms.items():
        if why := _bad_histogram(hist):
            invalid[LATENCY_METRIC[name]] = why + suffix
        else:
            histograms[name] = hist
    if len(histograms) != len(m.histograms):
        changes["histograms"] = histograms
    return (replace(m, **changes) if changes else m), invalid  # type: ignore[arg-type]


def engine_figures(now: EngineMetrics, before: EngineMetrics | None = None,
                   window_s: float | None = None) -> EngineFigures:
    """The figures for one engine: from one scrape, or the change between two `window_s` apart.

    Impossible samples (`valid_metrics`) are left out of the figures and listed in `invalid`."""
    if (before is None) != (window_s is None):
        raise InvalidParameter("two scrapes need the seconds between them, and only two scrapes do")
    if window_s is not None and window_s <= 0:
        raise InvalidParameter(f"the window must be positive, got {window_s} s")
    now, invalid = valid_metrics(now)
    if before is not None:
        before, invalid_before = valid_metrics(before, scrape="at the first scrape")
        for name, why in invalid_before.items():
            invalid.setdefault(name, why)

    def counted(attr: str) -> float | None:
        value: float | None = getattr(now, attr)
        return _delta(value, getattr(before, attr)) if before is not None else value

    def rate(attr: str) -> float | None:
        amount = counted(attr)
        return amount / window_s if amount is not None and window_s else None

    queries, hits = counted("prefix_cache_queries"), counted("prefix_cache_hits")
    if queries is not None and hits is not None and hits > queries:  # in the window (see _prefix_hits_above_queries)
        invalid[SCALAR_METRICS["prefix_cache_hits"][0]] = (f"{hits:g} hits is above the {queries:g} queries "
                                                          "they are part of, in the window")
        queries = hits = None
    latencies = tuple(
        _latency(name, now.histograms[name].since(before.histograms.get(name) if before else None))
        for name in LATENCY_ORDER if name in now.histograms
    )
    waiting_change = (now.num_requests_waiting - before.num_requests_waiting
                      if before is not None and now.num_requests_waiting is not None
                      and before.num_requests_waiting is not None else None)
    return EngineFigures(
        model_name=now.model_name,
        engine=now.engine,
        window_s=window_s,
        running=now.num_requests_running,
        waiting=now.num_requests_waiting,
        waiting_change=waiting_change,
        waiting_by_reason=dict(now.waiting_by_reason),
        kv_cache_usage=now.kv_cache_usage,
        kv_cache_usage_first=before.kv_cache_usage if before is not None else None,
        preemptions_total=now.num_preemptions,
        preemptions=counted("num_preemptions"),
        preemptions_per_s=rate("num_preemptions"),
        prefix_cache_queries=queries,
        prefix_cache_hits=hits,
        prefix_hit_rate=hits / queries if queries and hits is not None else None,
        prompt_tokens_per_s=rate("prompt_tokens"),
        generation_tokens_per_s=rate("generation_tokens"),
        latencies=latencies,
        cache_config=dict(now.cache_config),
        invalid=invalid,
    )


# --------------------------------------------------------------------------------------------------
# Rules


def _n(x: float | None) -> str:
    """A count for a message: integral values without decimals."""
    if x is None:
        return "?"
    return f"{x:,.0f}" if float(x).is_integer() else f"{x:,.2f}"


def _pct(x: float) -> str:
    return f"{100 * x:.1f}%"


def _window_text(f: EngineFigures) -> str:
    return f"in the last {f.window_s:g} s" if f.window_s is not None else "since the server started"


def _prefix_caching_on(f: EngineFigures) -> bool:
    flag = f.cache_config.get("enable_prefix_caching")
    if flag is not None:
        return flag.strip().lower() in ("true", "1")
    # Without cache_config_info: V1 only counts prefix-cache queries when caching is enabled.
    return bool(f.prefix_cache_queries)


def _kv_peak(f: EngineFigures) -> float | None:
    """The highest KV usage seen (at either scrape): "stays low" must hold at both."""
    seen = [u for u in (f.kv_cache_usage, f.kv_cache_usage_first) if u is not None]
    return max(seen) if seen else None


def _kv_shortage(f: EngineFigures, t: Thresholds) -> Diagnosis | None:
    usage, waiting = f.kv_cache_usage, f.waiting or 0.0
    peak = _kv_peak(f)
    kv_full = peak is not None and peak >= t.kv_high
    preempting = (f.preemptions or 0.0) > 0
    # Preemptions in a window prove KV ran out; a single scrape's total may be old news, so alone
    # it does not make a finding.
    if not ((kv_full and (waiting > 0 or preempting)) or (f.window_s is not None and preempting)):
        return None
    # The document's rule in full: waiting (growing, over a window) + KV near 1 + preemptions.
    queue_grows = (f.waiting_change or 0.0) > 0 if f.window_s is not None else waiting > 0
    severity: Severity = "critical" if kv_full and preempting and queue_grows else "warning"
    parts = []
    if usage is not None:
        parts.append(f"KV cache {_pct(usage)} used (≥ {_pct(t.kv_high)} counts as full)")
    if waiting > 0:
        grow = f" ({f.waiting_change:+,.0f} over the window)" if f.waiting_change is not None else ""
        parts.append(f"{_n(waiting)} requests waiting{grow}")
    if preempting:
        rate = f", {f.preemptions_per_s:.2f}/s" if f.preemptions_per_s is not None else ""
        parts.append(f"{_n(f.preemptions)} preemptions {_window_text(f)}{rate}")
    message = "; ".join(parts) + ": requests wait for KV blocks, and preempted ones are recomputed."
    if f.window_s is None and preempting:
        message += " Rerun with --interval to see whether preemptions are still rising."
    evidence: Evidence = {"kv_cache_usage": usage, "waiting": f.waiting, "waiting_change": f.waiting_change,
                          "preemptions": f.preemptions, "preemptions_per_s": f.preemptions_per_s,
                          "kv_high": t.kv_high, "window_s": f.window_s}
    return Diagnosis("kv_shortage", severity, message, f.model_name, f.engine, KV_SHORTAGE_ACTIONS, evidence)


def _batch_limit(f: EngineFigures, t: Thresholds) -> Diagnosis | None:
    usage, waiting, peak = f.kv_cache_usage, f.waiting or 0.0, _kv_peak(f)
    preempting_now = f.window_s is not None and (f.preemptions or 0.0) > 0
    if waiting <= 0 or usage is None or peak is None or peak >= t.kv_high or preempting_now:
        return None  # not queued, or KV is (or was, in the window) the limit: that is kv_shortage
    running = f.running
    if t.max_num_seqs is not None and running is not None and running >= t.max_num_seqs:
        cause = f"{_n(running)} requests run, which is --max-num-seqs ({t.max_num_seqs}): it is the limit"
        actions: tuple[str, ...] = ("raise --max-num-seqs (KV has room for more requests)",)
    else:
        cause = (f"{_n(running)} requests run: if that is --max-num-seqs, it is the limit; otherwise the "
                 f"per-step token budget --max-num-batched-tokens is spent on prefills")
        actions = ("raise --max-num-seqs if the running count sits at it",
                   "raise --max-num-batched-tokens if prompts are long (prefill takes the step's budget)")
    message = (f"{_n(waiting)} requests waiting while KV cache is only {_pct(usage)} used: the scheduler's "
               f"batch limits, not KV memory, hold them back. {cause}.")
    evidence: Evidence = {"waiting": f.waiting, "waiting_change": f.waiting_change, "running": running,
                          "kv_cache_usage": usage, "kv_high": t.kv_high, "max_num_seqs": t.max_num_seqs}
    return Diagnosis("batch_limit", "warning", message, f.model_name, f.engine, actions, evidence)


def _low_prefix_hit_rate(f: EngineFigures, t: Thresholds) -> Diagnosis | None:
    rate, queries = f.prefix_hit_rate, f.prefix_cache_queries
    if rate is None or queries is None or not _prefix_caching_on(f):
        return None
    if queries < t.min_prefix_queries or rate >= t.hit_rate_low:
        return None
    block_size = f.cache_config.get("block_size", "block_size")
    message = (f"prefix caching is on but only {_pct(rate)} of looked-up prompt tokens hit "
               f"({_n(f.prefix_cache_hits)} of {_n(queries)} {_window_text(f)}; "
               f"below {_pct(t.hit_rate_low)}).")
    actions = tuple(c.format(block_size=block_size) for c in PREFIX_CHECKS)
    evidence: Evidence = {"prefix_hit_rate": rate, "prefix_cache_hits": f.prefix_cache_hits,
                          "prefix_cache_queries": queries, "hit_rate_low": t.hit_rate_low,
                          "window_s": f.window_s}
    return Diagnosis("low_prefix_hit_rate", "warning", message, f.model_name, f.engine, actions, evidence)


def _high_queue_time(f: EngineFigures, t: Thresholds) -> Diagnosis | None:
    queue = f.latency("queue")
    p95 = queue.quantile(0.95) if queue else None
    if p95 is None or p95.value < t.queue_p95_high_s:
        return None
    upper = "∞" if p95.upper == float("inf") else f"{p95.upper:g}"
    message = (f"queue time p95 is {p95.value:.2f} s (its bucket: {p95.lower:g}–{upper} s), above "
               f"{t.queue_p95_high_s:g} s: requests wait before their first step.")
    actions = ("see kv_shortage or batch_limit for why the scheduler does not admit them",
               "if neither applies, the server is simply saturated: add replicas")
    evidence: Evidence = {"queue_p95_s": p95.value, "bucket_lower_s": p95.lower, "bucket_upper_s": p95.upper,
                          "queue_p95_high_s": t.queue_p95_high_s}
    return Diagnosis("high_queue_time", "warning", message, f.model_name, f.engine, actions, evidence)


def diagnose_engine(f: EngineFigures, t: Thresholds) -> tuple[Diagnosis, ...]:
    """Every rule applied to one engine's figures; `healthy` when none finds anything."""
    missing = [name for name, v in (("vllm:num_requests_waiting", f.waiting),
                                    ("vllm:kv_cache_usage_perc", f.kv_cache_usage))
               if v is None and name not in f.invalid]
    found = [d for rule in (_kv_shortage, _batch_limit, _low_prefix_hit_rate, _high_queue_time)
             if (d := rule(f, t)) is not None]
    if f.invalid:
        listed = "; ".join(f"{name}: {why}" for name, why in f.invalid.items())
        found.insert(0, Diagnosis(
            "invalid_metrics", "warning",
            f"samples no vLLM server exposes, left out of every figure and rule: {listed}.",
            f.model_name, f.engine,
            ("check what wrote the exposition (a proxy, an exporter or a hand-edited file)",),
            {"invalid": listed}))
    if missing:
        names = ", ".join(missing)
        message = f"cannot judge KV pressure: no {names} in the exposition"
        found.append(Diagnosis("missing_metrics", "info", message, f.model_name, f.engine, (),
                               {"missing": names}))
    if not found:
        message = (f"{_n(f.running)} running, {_n(f.waiting)} waiting, KV cache "
                   f"{_pct(f.kv_cache_usage or 0.0)} used, {_n(f.preemptions or 0)} preemptions "
                   f"{_window_text(f)}.")
        found.append(Diagnosis("healthy", "ok", message, f.model_name, f.engine, (), {
            "running": f.running, "waiting": f.waiting, "kv_cache_usage": f.kv_cache_usage,
            "preemptions": f.preemptions, "prefix_hit_rate": f.prefix_hit_rate}))
    return tuple(found)


def diagnose(now: MetricsSnapshot, before: MetricsSnapshot | None = None, window_s: float | None = None,
             thresholds: Thresholds | None = None, *, source: str = "") -> DiagnoseReport:
    """Diagnose every engine of a scrape (and, with `before` and `window_s`, of the window between two)."""
    t = thresholds or Thresholds()
    figures = []
    for engine in now.engines:
        earlier = before.engine(engine.key) if before is not None else None
        figures.append(engine_figures(engine, earlier, window_s if earlier is not None else None))
    diagnoses = tuple(d for f in figures for d in diagnose_engine(f, t))
    return DiagnoseReport(source, window_s, tuple(figures), diagnoses)


# --------------------------------------------------------------------------------------------------
# Plan comparison


def _label_int(cache_config: Mapping[str, str], name: str) -> int:
    text = cache_config.get(name)
    try:
        return int(str(text))
    except ValueError:
        raise InvalidParameter(f"the server's cache_config_info has no usable {name} ({text!r})") from None


def compare_with_plan(cache_config: Mapping[str, str], predicted_num_gpu_blocks: int,
                      predicted_block_size: int) -> PlanComparison:
    """Compare the server's num_gpu_blocks × block_size (from vllm:cache_config_info) with a prediction.

    Capacity is compared in tokens, since plans and servers may pick different block sizes. vLLM's
    num_gpu_blocks includes the null block, as the prediction should (vllm-reference.md §3.2).
    """
    if predicted_num_gpu_blocks < 0 or predicted_block_size < 1:
        raise InvalidParameter("a prediction needs num_gpu_blocks ≥ 0 and block_size ≥ 1")
    blocks, block_size = _label_int(cache_config, "num_gpu_blocks"), _label_int(cache_config, "block_size")
    observed, predicted = blocks * block_size, predicted_num_gpu_blocks * predicted_block_size
    return PlanComparison(
        observed_num_gpu_blocks=blocks,
        observed_block_size=block_size,
        predicted_num_gpu_blocks=predicted_num_gpu_blocks,
        predicted_block_size=predicted_block_size,
        observed_tokens=observed,
        predicted_tokens=predicted,
        difference_tokens=observed - predicted,
        relative_difference=(observed - predicted) / observed if observed else float("inf"),
    )


PLAN_TOLERANCE = 0.02  # kvplan's estimated terms (activation, non-torch) are typically within 1–2% of KV


def plan_diagnosis(c: PlanComparison, model_name: str | None, engine: str | None,
                   tolerance: float = PLAN_TOLERANCE) -> Diagnosis:
    """`plan_matches` (info) when server and prediction agree within `tolerance` (of the server's tokens),
    else `plan_mismatch` (warning) with both figures."""
    evidence: Evidence = {"observed_num_gpu_blocks": c.observed_num_gpu_blocks,
                          "predicted_num_gpu_blocks": c.predicted_num_gpu_blocks,
                          "observed_tokens": c.observed_tokens, "predicted_tokens": c.predicted_tokens,
                          "relative_difference": c.relative_difference, "tolerance": tolerance}
    text = (f"server: {c.observed_num_gpu_blocks:,} blocks × {c.observed_block_size} = {c.observed_tokens:,} "
            f"tokens; plan: {c.predicted_num_gpu_blocks:,} × {c.predicted_block_size} = "
            f"{c.predicted_tokens:,} ({c.relative_difference:+.1%} of the server's)")
    if abs(c.relative_difference) <= tolerance:
        return Diagnosis("plan_matches", "info", f"{text}, within {tolerance:.0%}.", model_name, engine, (),
                         evidence)
    actions = ["run `kvplan calibrate` on the server's startup log to see which memory term differs, and "
               "plan with the overrides it prints"]
    if not c.block_size_matches:
        actions.append(f"the server uses blocks of {c.observed_block_size} tokens, the plan "
                       f"{c.predicted_block_size}: pass the server's --block-size")
    return Diagnosis("plan_mismatch", "warning", f"{text}, beyond {tolerance:.0%}.", model_name, engine,
                     tuple(actions), evidence)


# cache_config_info label → ServeSettings field (CacheConfig field names, vllm-reference.md §8).
_CACHE_CONFIG_SETTINGS: Final[Mapping[str, str]] = {
    "gpu_memory_utilization": "gpu_memory_utilization",
    "cache_dtype": "kv_cache_dtype",
    "block_size": "block_size",
    "enable_prefix_caching": "enable_prefix_caching",
    "kv_cache_memory_bytes": "kv_cache_memory_bytes",
}


def plan_settings(cache_config: Mapping[str, str], base: ServeSettings) -> tuple[ServeSettings, dict[str, str]]:
    """`base` (fit's flags) with the settings the server's cache_config_info reveals in their place:
    gpu_memory_utilization, cache_dtype, block_size, enable_prefix_caching, kv_cache_memory_bytes.
    Returns the settings and the labels used. Labels that are absent or "None" leave `base` as it is."""
    changes: dict[str, object] = {}
    used: dict[str, str] = {}
    for label, name in _CACHE_CONFIG_SETTINGS.items():
        text = str(cache_config.get(label, "None")).strip()
        if text in ("None", ""):
            continue
        value: object
        try:
            if name == "gpu_memory_utilization":
                value = float(text)
            elif name in ("block_size", "kv_cache_memory_bytes"):
                value = int(text)
            elif name == "enable_prefix_caching":
                value = text.lower() in ("true", "1")
            else:
                value = text
        except ValueError:
            raise InvalidParameter(f"the server's cache_config_info has an unusable {label} ({text!r})") from None
        changes[name] = value
        used[label] = text
    return base.updated(**changes), used


def compare_report_with_plan(report: DiagnoseReport, model: ModelSpec, gpu: GpuLike, base: ServeSettings,
                             tolerance: float = PLAN_TOLERANCE) -> DiagnoseReport:
    """Plan MODEL on GPU with each engine's cache settings (`plan_settings`) through `capacity.plan_fit`,
    compare the server's num_gpu_blocks × block_size with the plan's, and add one `plan_matches` or
    `plan_mismatch` diagnosis per engine."""
    from kvplan.vllm.fit import plan_fit

    comparisons: list[PlanComparison] = []
    found: list[Diagnosis] = []
    for f in report.engines:
        settings, used = plan_settings(f.cache_config, base)
        plan = plan_fit(model, gpu, settings, advise=False)
        c = replace(compare_with_plan(f.cache_config, plan.cache.num_gpu_blocks, plan.cache.block_size),
                    model_name=f.model_name, engine=f.engine, settings=used)
        comparisons.append(c)
        found.append(plan_diagnosis(c, f.model_name, f.engine, tolerance))
    return replace(report, diagnoses=(*report.diagnoses, *found), plan=tuple(comparisons))
