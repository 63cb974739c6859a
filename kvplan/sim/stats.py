"""Percentiles and summaries for simulated latencies (numpy's default 'linear' percentile, no numpy)."""
from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

PERCENTILES = (50.0, 95.0, 99.0)


@dataclass(frozen=True)
class Distribution:
    """Summary of one latency metric (seconds). Percentiles as `numpy.percentile(method='linear')`,
    which `vllm bench serve` reports."""

    count: int
    mean: float
    p50: float
    p95: float
    p99: float
    max: float


def percentile_sorted(values: Sequence[float], q: float) -> float:
    """The q-th percentile of sorted values, interpolating linearly between ranks."""
    if not values:
        return math.nan
    pos = q / 100.0 * (len(values) - 1)
    lo = math.floor(pos)
    hi = min(lo + 1, len(values) - 1)
    return values[lo] + (values[hi] - values[lo]) * (pos - lo)


def weighted_percentile(pairs: Sequence[tuple[float, int]], q: float) -> float:
    """`percentile_sorted` of the list where each (value, count) pair stands for `count` copies of value."""
    items = sorted(p for p in pairs if p[1] > 0)
    total = sum(c for _, c in items)
    if not total:
        return math.nan
    pos = q / 100.0 * (total - 1)
    lo = math.floor(pos)
    frac = pos - lo
    v_lo = v_hi = math.nan
    seen = 0
    for v, c in items:
        if math.isnan(v_lo) and lo < seen + c:
            v_lo = v
        if lo + 1 < seen + c:
            v_hi = v
            break
        seen += c
    if math.isnan(v_hi):
        v_hi = v_lo
    return v_lo + (v_hi - v_lo) * frac


def summarize(values: Sequence[float]) -> Distribution:
    """Count, mean, p50/p95/p99 and max of the values (NaN when empty)."""
    s = sorted(values)
    if not s:
        return Distribution(0, math.nan, math.nan, math.nan, math.nan, math.nan)
    p50, p95, p99 = (percentile_sorted(s, q) for q in PERCENTILES)
    return Distribution(len(s), math.fsum(s) / len(s), p50, p95, p99, s[-1])


def summarize_weighted(pairs: Sequence[tuple[float, int]]) -> Distribution:
    """`summarize` of (value, count) pairs."""
    n = sum(c for _, c in pairs)
    if not n:
        return Distribution(0, math.nan, math.nan, math.nan, math.nan, math.nan)
    p50, p95, p99 = (weighted_percentile(pairs, q) for q in PERCENTILES)
    return Distribution(n, math.fsum(v * c for v, c in pairs) / n, p50, p95, p99, max(v for v, c in pairs if c))
