"""Rich rendering of `kvplan diagnose`: per engine, its state, latency quantiles, cache config and findings.

Renderers only format what `kvplan.observe.diagnose` computed.
"""
from __future__ import annotations

import math
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from rich.console import RenderableType

    from kvplan.observe.diagnose import DiagnoseReport, Diagnosis, EngineFigures, Latency
    from kvplan.observe.metrics import Quantile

SEVERITY_STYLE: Final = {"ok": "green", "info": "cyan", "warning": "yellow", "critical": "bold red"}
LATENCY_LABEL: Final = {
    "ttft": "TTFT", "itl": "ITL", "queue": "queue", "prefill": "prefill", "decode": "decode", "e2e": "e2e",
}
# cache_config_info labels worth a glance, in this order (the rest is in --json).
CACHE_CONFIG_SHOWN: Final = ("num_gpu_blocks", "block_size", "gpu_memory_utilization", "cache_dtype",
                             "enable_prefix_caching", "kv_cache_memory_bytes", "num_gpu_blocks_override")
QUANTILE_NOTE: Final = (
    "Quantiles interpolate linearly inside histogram buckets, as PromQL histogram_quantile does: each is "
    "only as fine as the bucket it fell in (shown in brackets)."
)


def _count(x: float | None) -> str:
    if x is None:
        return "—"
    return f"{x:,.0f}" if float(x).is_integer() else f"{x:,.2f}"


def _seconds(x: float) -> str:
    if math.isinf(x):
        return "∞"
    return f"{x * 1000:.0f} ms" if x < 1 else f"{x:.2f} s"


def _bound(x: float) -> str:
    return "∞" if math.isinf(x) else f"{x:g}"


def _quantile(q: Quantile | None) -> str:
    if q is None:
        return "—"
    prefix = "≥ " if math.isinf(q.upper) else ""
    return f"{prefix}{_seconds(q.value)} [{_bound(q.lower)}–{_bound(q.upper)}]"


def _title(f: EngineFigures) -> str:
    name = f.model_name or "(no model_name label)"
    return f"{name} · engine {f.engine}" if f.engine is not None else name


def _state(f: EngineFigures) -> RenderableType:
    from rich.table import Table

    window = f"last {f.window_s:g} s" if f.window_s is not None else "since start"
    table = Table(show_header=False, box=None, pad_edge=False)
    table.add_column(style="bold")
    table.add_column()
    table.add_row("running", _count(f.running))
    waiting = _count(f.waiting)
    if f.waiting_change is not None:
        waiting += f" ({f.waiting_change:+,.0f} over the window)"
    if f.waiting_by_reason:
        waiting += " — " + ", ".join(f"{k} {_count(v)}" for k, v in sorted(f.waiting_by_reason.items()))
    table.add_row("waiting", waiting)
    usage = "—" if f.kv_cache_usage is None else f"{100 * f.kv_cache_usage:.1f}%"
    if f.kv_cache_usage_first is not None:
        usage += f" (was {100 * f.kv_cache_usage_first:.1f}%)"
    table.add_row("KV cache used", usage)
    preempt = f"{_count(f.preemptions)} ({window})"
    if f.preemptions_per_s is not None:
        preempt += f", {f.preemptions_per_s:.2f}/s; {_count(f.preemptions_total)} since start"
    table.add_row("preemptions", preempt)
    if f.prefix_hit_rate is not None:
        table.add_row("prefix-cache hits", f"{100 * f.prefix_hit_rate:.1f}% ({_count(f.prefix_cache_hits)} of "
                                           f"{_count(f.prefix_cache_queries)} tokens, {window})")
    elif f.prefix_cache_queries is not None:
        table.add_row("prefix-cache hits", f"no tokens looked up ({window})")
    if f.prompt_tokens_per_s is not None or f.generation_tokens_per_s is not None:
        table.add_row("throughput", f"{_count(f.prompt_tokens_per_s)} prompt tok/s, "
                                    f"{_count(f.generation_tokens_per_s)} generated tok/s")
    shown = [f"{k}={f.cache_config[k]}" for k in CACHE_CONFIG_SHOWN
             if f.cache_config.get(k) not in (None, "None", "")]
    if shown:
        table.add_row("cache config", "  ".join(shown))
    return table


def _latencies(latencies: tuple[Latency, ...], window_s: float | None) -> RenderableType:
    from rich.table import Table

    window = f"last {window_s:g} s" if window_s is not None else "since start"
    table = Table(title=f"Latency ({window})", title_justify="left", show_edge=False)
    table.add_column("histogram")
    table.add_column("n", justify="right")
    table.add_column("mean", justify="right")
    for q in ("p50", "p95", "p99"):
        table.add_column(f"{q} [bucket, s]", justify="right")
    for lat in latencies:
        mean = _seconds(lat.mean_s) if lat.mean_s is not None else "—"
        table.add_row(LATENCY_LABEL.get(lat.name, lat.name), _count(lat.count), mean,
                      *(_quantile(lat.quantile(q)) for q in (0.5, 0.95, 0.99)))
    return table


def _diagnoses(diagnoses: list[Diagnosis]) -> RenderableType:
    from rich.table import Table
    from rich.text import Text

    grid = Table.grid(padding=(0, 1))
    grid.add_column(no_wrap=True)
    grid.add_column()
    for d in diagnoses:
        body = Text()
        body.append(d.code, style="bold")
        body.append(f": {d.message}")
        for action in d.actions:
            body.append(f"\n• {action}")
        grid.add_row(Text(d.severity.upper(), style=SEVERITY_STYLE[d.severity]), body)
    return grid


def render_diagnose(report: DiagnoseReport) -> RenderableType:
    """The human view of a diagnose report: one section per engine."""
    from rich.console import Group
    from rich.rule import Rule
    from rich.text import Text

    parts: list[RenderableType] = []
    for f in report.engines:
        parts.append(Rule(_title(f), align="left"))
        parts.append(_state(f))
        if f.latencies:
            parts.append(Text())
            parts.append(_latencies(f.latencies, f.window_s))
        parts.append(Text())
        parts.append(_diagnoses([d for d in report.diagnoses if (d.model_name, d.engine) == (f.model_name, f.engine)]))
        parts.append(Text())
    if any(f.latencies for f in report.engines):
        parts.append(Text(QUANTILE_NOTE, style="dim"))
    return Group(*parts)
