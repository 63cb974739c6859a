"""Rich rendering of the simulators' reports (renderers never compute)."""
from __future__ import annotations

import math

from rich import box
from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from kvplan.sim.prefix import PrefixReport
from kvplan.sim.scheduler import KvUsagePoint, ServeReport
from kvplan.sim.sizing import ROOFLINE_COST_MODEL, FittedPool
from kvplan.sim.stats import Distribution
from kvplan.units import human_bytes

_SPARK = "▁▂▃▄▅▆▇█"


def _pct(x: float) -> str:
    return f"{100 * x:.1f}%"


def _deployment(p: FittedPool, engine: bool) -> list[Text]:
    """Where a `--model/--gpu` run's pool (and, for serve, its engine limits) came from."""
    par = "".join(f", {flag} {n}" for flag, n in (("-tp", p.tp), ("-pp", p.pp)) if n > 1)
    kv = ("--kv-cache-memory-bytes" if p.kv_cache_memory_bytes_given
          else f"gpu_memory_utilization {p.gpu_memory_utilization:g}")
    lines = [Text.assemble(
        ("Deployment (kvplan fit): ", "bold"), f"{p.model} on {p.gpu_name}{par}; {human_bytes(p.available_kv_bytes)} "
        f"of {p.kv_cache_dtype} KV cache per GPU ({kv}): num_gpu_blocks {p.num_gpu_blocks:,} × {p.block_size} "
        f"tokens, 'GPU KV cache size: {p.kv_cache_tokens:,} tokens'; max_model_len {p.max_model_len:,}.")]
    if engine:
        src = p.settings_sources
        lines.append(Text(f"  max_num_seqs {p.max_num_seqs:,} [{src.get('max_num_seqs', 'fit')}], "
                          f"max_num_batched_tokens {p.max_num_batched_tokens:,} "
                          f"[{src.get('max_num_batched_tokens', 'fit')}]."))
    lines.append(Text(f"  Pool mapping: {p.mapping}", style="" if p.exact else "yellow"))
    lines.extend(Text(f"  {note}", style="dim") for note in p.notes)
    return lines


def render_prefix(r: PrefixReport, deployment: FittedPool | None = None) -> Group:
    """Passes table, the reason for each pass, the pool that would never evict, what-ifs and the CPU tier;
    with `deployment`, where the pool came from first."""
    head = [
        Text.assemble(("Prefix cache · ", "bold"), (r.scenario, "bold"), f": {r.description}"),
        *(_deployment(deployment, engine=False) if deployment is not None else ()),
        Text(f"Pool: {r.num_gpu_blocks:,} blocks × {r.block_size} tokens = {r.kv_tokens:,} tokens "
             f"({r.usable_blocks:,} usable; block 0 is the null block). Requests are served one at a time."),
    ]
    cpu = r.offload.cpu_offload_tokens > 0
    t = Table(title="Tokens per pass", title_justify="left", box=box.SIMPLE_HEAD)
    t.add_column("pass", min_width=10, overflow="fold")
    for col in ("queried", "hits", "hit\nrate", "cold", "evicted", "uncache-\nable", "blocks\nevicted"):
        t.add_column(col, justify="right", no_wrap=True)
    for p in (*r.passes, r.total):
        t.add_row(p.name, f"{p.query_tokens:,}", f"{p.hit_tokens:,}", _pct(p.hit_rate), f"{p.cold_miss_tokens:,}",
                  f"{p.evicted_miss_tokens:,}", f"{p.uncacheable_tokens:,}", f"{p.evicted_blocks:,}",
                  style="bold" if p is r.total else None)
    parts: list[RenderableType] = [*head, t, Text(
        "cold: first read; evicted: read before, no longer cached; uncacheable: the partial last block and the "
        "last block a full hit recomputes; evictions: cached blocks reused for other content.", style="dim"),
        Text("Why:", style="bold")]
    for p in r.passes:
        parts.append(Text(f"  {p.name}: {p.reason}"))
    ne = r.no_eviction
    if ne is not None:
        parts.append(Text.assemble(("A larger pool: ", "bold"), f"{ne.num_gpu_blocks:,} blocks ({ne.kv_tokens:,} "
                                   "tokens) never evict; hits per pass "
                                   + " / ".join(f"{h:,}" for h in ne.hit_tokens) + " tokens."))
    for w in r.what_if:
        parts.append(Text(f"  With {w.num_gpu_blocks:,} blocks ({w.kv_tokens:,} tokens): hits per pass "
                          + " / ".join(f"{h:,}" for h in w.hit_tokens) + f" tokens (total {w.total_hit_tokens:,})."))
    if cpu:
        o = r.offload
        parts.append(Text.assemble(
            ("CPU tier: ", "bold"), f"{o.cpu_offload_tokens:,} tokens in {o.chunk_tokens}-token chunks (LRU); "
            f"load {o.load_ms_per_ktok:.2f} ms and recompute {o.recompute_ms_per_ktok:.1f} ms per 1,000 tokens."))
        c = Table(title_justify="left", box=box.SIMPLE_HEAD)
        c.add_column("pass", min_width=10, overflow="fold")
        for col in ("CPU hits", "prefill,\nGPU only", "prefill with\nCPU tier"):
            c.add_column(col, justify="right", no_wrap=True)
        for p in (*r.passes, r.total):
            c.add_row(p.name, f"{p.cpu_hit_tokens:,}", f"{p.prefill_ms:,.0f} ms",
                      f"{p.prefill_ms_with_offload:,.0f} ms",
                      style="bold" if p is r.total else None)
        parts.append(c)
    parts.append(Text(f"Block hashes: {r.hash_function}.", style="dim"))
    return Group(*parts)


def _ms(x: float) -> str:
    return "—" if math.isnan(x) else f"{1000 * x:,.1f}"


def _spark(points: tuple[KvUsagePoint, ...]) -> str:
    return "".join(_SPARK[min(len(_SPARK) - 1, int(p.mean * len(_SPARK)))] for p in points)


def _cost(r: ServeReport, p: FittedPool | None) -> Text:
    c = r.cost_model_params
    if r.cost_model == ROOFLINE_COST_MODEL and p is not None and c:
        return Text(
            f"Step cost: roofline of {p.model} on {p.gpu_name} (as `kvplan roofline`): {p.compute_dtype} matmuls at "
            f"{c['compute_efficiency']:.0%} of {c['peak_flops'] / 1e12:,.0f} TFLOP/s, HBM at "
            f"{c['bandwidth_efficiency']:.0%} of {c['bandwidth_bytes_per_s'] / 1e12:,.2f} TB/s; "
            f"{human_bytes(c['weight_bytes'])} of weights and {c['kv_bytes_per_token']:,.0f} KV bytes per token per "
            "GPU. A lower bound: no launch or scheduling overhead.", style="dim")
    params = ", ".join(f"{k} {v:.3g}" for k, v in c.items())
    return Text(f"Step cost: {r.cost_model}({params}).", style="dim")


def render_serve(r: ServeReport, deployment: FittedPool | None = None) -> Group:
    """Latency table (ms), throughput, goodput, preemptions, KV usage and prefix cache lines; with
    `deployment`, where the pool and engine limits came from first."""
    c = r.config
    head = Text.assemble(
        ("Serve · ", "bold"), f"{r.num_requests:,} requests · pool {c.num_gpu_blocks:,} blocks × {c.block_size} "
        f"({c.num_gpu_blocks - 1:,} usable) · max_num_seqs {c.max_num_seqs:,} · max_num_batched_tokens "
        f"{c.max_num_batched_tokens:,}" + ("" if c.enable_chunked_prefill else " · no chunked prefill")
        + ("" if c.enable_prefix_caching else " · no prefix caching"))
    t = Table(title="Latency (ms)", title_justify="left", box=box.SIMPLE_HEAD)
    t.add_column("metric", no_wrap=True)
    for col in ("mean", "p50", "p95", "p99", "max"):
        t.add_column(col, justify="right")
    rows: tuple[tuple[str, Distribution], ...] = (
        ("TTFT", r.time_to_first_token_seconds),
        ("ITL", r.inter_token_latency_seconds),
        ("TPOT", r.request_time_per_output_token_seconds),
        ("queue time", r.request_queue_time_seconds),
        ("end to end", r.e2e_request_latency_seconds),
    )
    for name, d in rows:
        t.add_row(name, _ms(d.mean), _ms(d.p50), _ms(d.p95), _ms(d.p99), _ms(d.max))
    kv = r.kv_cache_usage_perc
    lines = [
        Text("vLLM: time_to_first_token_seconds, inter_token_latency_seconds, request_time_per_output_token_seconds, "
             "request_queue_time_seconds, e2e_request_latency_seconds; from arrival.", style="dim"),
        Text(f"Duration {r.duration_s:,.2f} s in {r.num_steps:,} steps; {r.request_throughput:,.2f} req/s, "
             f"{r.output_token_throughput:,.0f} output tok/s, {r.total_token_throughput:,.0f} total tok/s; "
             f"at most {r.max_running:,} running."),
    ]
    if r.goodput is not None:
        g = r.goodput
        slo = " and ".join(s for s in (
            f"TTFT ≤ {1000 * g.ttft_slo_s:g} ms" if g.ttft_slo_s is not None else "",
            f"TPOT ≤ {1000 * g.tpot_slo_s:g} ms" if g.tpot_slo_s is not None else "") if s)
        lines.append(Text(f"Goodput ({slo}): {g.good_requests:,} of {r.num_requests:,} requests, "
                          f"{g.goodput_req_s:,.2f} req/s."))
    if r.num_preemptions:
        lines.append(Text(
            f"num_preemptions: {r.num_preemptions:,} ({r.requests_preempted:,} requests; first at "
            f"{r.first_preemption_s:,.2f} s, step {r.first_preemption_step:,}); {r.recomputed_tokens:,} tokens "
            "recomputed. Mitigations: more KV blocks (higher --gpu-memory-utilization, FP8 KV, more TP), "
            "smaller --max-num-seqs or --max-num-batched-tokens.", style="yellow"))
    else:
        lines.append(Text("num_preemptions: 0."))
    lines.append(Text(f"kv_cache_usage_perc: mean {_pct(kv.mean)}, p50 {_pct(kv.p50)}, p95 {_pct(kv.p95)}, "
                      f"max {_pct(kv.max)} ({kv.blocks_used_max:,} blocks)"))
    lines.append(Text(f"KV usage over {r.duration_s:,.1f} s: {_spark(kv.timeline)}"))
    again = (f"; after preemption {r.preempted_prefix_cache_hits:,} of {r.preempted_prefix_cache_queries:,}"
             if r.preempted_prefix_cache_queries else "")
    lines.append(Text(f"Prefix cache: {r.prefix_cache_hits:,} of {r.prefix_cache_queries:,} queried tokens hit "
                      f"({_pct(r.prefix_cache_hit_rate)}){again}. {r.prompt_tokens:,} prompt and "
                      f"{r.generation_tokens:,} generated tokens; {r.prefill_tokens_computed:,} prefill tokens "
                      "computed."))
    lines.append(_cost(r, deployment))
    dep = _deployment(deployment, engine=True) if deployment is not None else []
    return Group(head, *dep, t, *lines)
