"""Rich rendering of an SglangFit (`kvplan fit --engine sglang`); renderers never compute."""

from __future__ import annotations

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from kvplan.sglang.compare import EngineComparison
from kvplan.sglang.dsv4 import Dsv4Part
from kvplan.sglang.fit import SglangFit
from kvplan.sglang.pool import TokenPool
from kvplan.sglang.size import SglangSize
from kvplan.sglang.sweep import SglangSweep
from kvplan.units import GiB


def _row(table: Table, *cells: str) -> None:
    table.add_row(*(Text(c) for c in cells))


def _table(title: str) -> Table:
    t = Table(title=title, title_justify="left", show_header=False, box=None, pad_edge=False)
    t.add_column("", overflow="fold")
    t.add_column("", justify="right", overflow="fold")
    t.add_column("", overflow="fold")
    return t


def _defaults(r: SglangFit) -> Table:
    d = r.defaults
    t = _table(f"SGLang {r.sglang_version} server arguments (SGLang's rules, not vLLM's)")
    mib = "unknown" if d.gpu_memory_mib is None else f"{d.gpu_memory_mib:,} MiB"
    _row(t, "GPU memory (nvidia-smi memory.total)", mib, r.gpu_name)
    reserved = "" if d.reserved_mib is None else f"reserved {d.reserved_mib:,.0f} MiB; "
    _row(t, "mem_fraction_static", f"{d.mem_fraction_static:g}", reserved + d.mem_fraction_source)
    _row(t, "chunked_prefill_size", f"{d.chunked_prefill_size:,}",
         f"÷ attention DP {d.attn_dp_size}" if d.attn_dp_size > 1 else "by GPU memory tier")
    _row(t, "decode CUDA graphs max_bs", f"{d.decode_graph_max_bs}", f"{d.decode_graph_sizes} batch sizes")
    _row(t, "prefill CUDA graphs", d.prefill_graph,
         f"up to {d.prefill_graph_max_bs:,} tokens, {d.prefill_graph_sizes} sizes" if d.prefill_graph != "disabled"
         else "")
    _row(t, "attention backend", d.attention_backend, "")
    _row(t, "page size", f"{d.page_size}", "tokens per page")
    _row(t, "KV cache dtype", r.kv_cache_dtype, "")
    _row(t, "context_len", f"{r.context_len:,}", "")
    return t


def _memory(r: SglangFit) -> Table:
    f, b = r.free_memory, r.budget
    t = _table("Memory per GPU (tightest rank), GiB")
    _row(t, "free before weights (pre_model_load_memory)", f"{f.pre_gib:.2f}",
         f"{f.source}: {f.pre_range[0]:.2f} … {f.pre_range[1]:.2f}")
    _row(t, "weights", f"{r.weights_bytes / GiB:.2f}",
         "SGLang's log: mem usage" if f.source == "log" else "given" if f.source == "given"
         else "estimate (kvplan's loaded-weights estimate)")
    _row(t, "free after weights (avail)", f"{f.avail_gib:.2f}",
         f"{f.source}: {f.avail_range[0]:.2f} … {f.avail_range[1]:.2f}")
    _row(t, "− pre × (1 − mem_fraction_static)", f"{b.slack_gib:.2f}", "slack for graphs and activations")
    m = b.mamba
    if m is not None and m.refusal is None:
        _row(t, "− Mamba state slots", f"{m.state_bytes / GiB:.2f}",
             f"({m.max_mamba_cache_size:,} + 1) × {m.per_req_bytes / (1 << 20):.2f} MiB; "
             f"{m.ratio} slots per running request")
    if b.budget_bytes is not None:
        _row(t, "= KV budget", f"{b.budget_bytes / GiB:.2f}", "_profile_available_bytes")
    return t


def _dsv4_rows(t: Table, d: Dsv4Part, p: TokenPool | None) -> None:
    """DSV4PoolConfigurator's per-token figures (kvplan.sglang.dsv4) and, when sized, its pools."""
    _row(t, "bytes per full token per GPU", f"{d.bytes_per_full_token:,.2f}",
         f"DSV4: {d.c4_layers} c4 layers × ({d.paged_bytes(4):g} + {d.index_bytes} index) / 4 + {d.c128_layers} c128 "
         f"layers × {d.paged_bytes(128):g} / 128 + swa_full_tokens_ratio {d.swa_ratio:g} × the SWA slot")
    _row(t, "bytes per sliding-window token", f"{d.bytes_per_swa_token:,.2f}",
         f"{d.layers} layers × {d.paged_bytes():g} + the c4 compress state")
    if p is not None and p.dsv4 is not None:
        s = p.dsv4
        _row(t, "− c128 compress state (fixed)", f"{s.c128_state_fixed_bytes / (1 << 30):.2f} GiB",
             f"for {s.requested_reqs} requests per worker")
        _row(t, "sliding-window / c4 / c128 tokens", f"{s.swa_tokens:,} / {s.c4_tokens:,} / {s.c128_tokens:,}",
             "DSV4 pool sizes")


def _pool(r: SglangFit) -> list[RenderableType]:
    g, p = r.geometry, r.pool
    t = _table("KV pool")
    if g is None:
        _row(t, "bytes per token per GPU", "not modelled", "SGLang refuses before it sizes the pool")
        return [t]
    if g.dsv4 is not None:
        _dsv4_rows(t, g.dsv4, p)
    else:
        _row(t, "bytes per token per GPU", f"{g.cell_bytes:,}",
             f"{g.kind.upper()}: {g.layers} layers × {g.kv_heads} heads × {g.head_dim}"
             + (f"+{g.v_head_dim}" if g.v_head_dim else "") + f" × {g.element_bytes} B"
             + (f" + {g.indexer_bytes:,} B index-K" if g.indexer_bytes else "")
             + (f" + the draft's {g.draft_layers} layer(s) {g.cell_bytes - g.target_cell_bytes:,} B"
                if g.draft_layers else ""))
    if g.swa is not None:
        w = g.swa
        _row(t, "+ sliding-window layers", f"{w.per_token(g.element_bytes) * w.layers:,}",
             f"{w.layers} layers × {w.kv_heads} heads × {w.head_dim}+{w.v_head_dim} × {g.element_bytes} B, "
             f"× swa_full_tokens_ratio {w.ratio:g} per full token")
        if p is not None:
            _row(t, "sliding-window pool tokens", f"{p.swa_tokens:,}", "swa_layer_tokens")
    if p is not None:
        rng = r.max_total_num_tokens_range
        _row(t, "max_total_num_tokens", f"{p.max_total_num_tokens:,}",
             f"range {rng[0]:,} … {rng[1]:,}" if rng else "from the given memory")
        _row(t, "max_running_requests", f"{p.max_running_requests:,}", "per attention-DP worker")
        if r.attn_dp_size > 1:
            _row(t, f"× {r.attn_dp_size} attention-DP workers", f"{r.total_tokens:,}",
                 f"tokens; {r.total_running_requests:,} requests")
        _row(t, "full-context requests at once", f"{r.requests_at_context:,}", f"at {r.context_len:,} tokens each")
    out: list[RenderableType] = [t]
    if p is not None:
        # (a speculative run's Mamba line adds the intermediate caches, not reproduced: log_line is empty then)
        lines = [r.budget.mamba.log_line.rstrip()] if r.budget.mamba is not None and r.budget.mamba.log_line else []
        if p.swa_tokens:
            lines.append(f"Use sliding window memory pool. full_layer_tokens={p.max_total_num_tokens}, "
                         f"swa_layer_tokens={p.swa_tokens}")
        lines += [*(p.log_lines or (p.log_line,)), p.banner]
        out.append(Text("SGLang would print:\n  " + "\n  ".join(lines), style="dim"))
    return out


def render_sglang_fit(r: SglangFit) -> Group:
    """The tables of `kvplan fit --engine sglang`."""
    verdict = (Text(f"✓ SGLang starts: {r.max_total_num_tokens:,} tokens in the pool", style="green") if r.fits
               else Text(f"✗ SGLang refuses to start: {r.startup}", style="red"))
    parts: list[RenderableType] = [
        Text(f"{r.model} on {r.num_gpus} × {r.gpu_name} (TP {r.tp}, PP {r.pp}, DP {r.dp}"
             + (", attention DP" if r.attn_dp_size > 1 else "") + f") — engine: SGLang {r.sglang_version}",
             style="bold"),
        _defaults(r), Text(""), _memory(r), Text(""), *_pool(r), Text(""), verdict]
    parts += [Text(f"Note: {n}", style="dim") for n in r.notes]
    return Group(*parts)


def render_comparison(c: EngineComparison) -> Group:
    """The table of `kvplan fit --engine both`: each engine's own rules, side by side, then why they differ."""
    t = Table(title=f"{c.model} on {c.gpu_name}, TP {c.tp}: vLLM {c.vllm.version} and SGLang {c.sglang.version}, "
                    "each by its own rules", title_justify="left", box=None, pad_edge=False)
    t.add_column("per replica", overflow="fold")
    t.add_column("vLLM", justify="right", overflow="fold")
    t.add_column("SGLang", justify="right", overflow="fold")
    v, s = c.vllm, c.sglang

    def row(label: str, a: str, b: str) -> None:
        t.add_row(Text(label), Text(a), Text(b))

    row("starts", "yes" if v.starts else f"no: {v.startup}", "yes" if s.starts else f"no: {s.startup}")
    row("KV budget per GPU, GiB", f"{v.kv_budget_bytes / GiB:.2f}", f"{s.kv_budget_bytes / GiB:.2f}")
    row("KV bytes per token per GPU", f"{v.kv_bytes_per_token:,.1f}", f"{s.kv_bytes_per_token:,.1f}")
    row("KV tokens", f"{v.kv_tokens:,}", f"{s.kv_tokens:,}")
    row("context (max_model_len / context_len)", f"{v.context:,}", f"{s.context:,}")
    row("full-context requests at once", f"{v.requests_at_context:,.2f}", f"{s.requests_at_context:,.0f}")
    row("requests at once (max_num_seqs / max_running_requests)", f"{v.requests_at_once:,}",
        f"{s.requests_at_once:,}")
    row("tokens per block / page", f"{v.granularity}", f"{s.granularity}")
    parts: list[RenderableType] = [t]
    if c.token_ratio is not None:
        parts.append(Text(f"SGLang holds {c.token_ratio:.2f}× vLLM's KV tokens.", style="bold"))
    parts += [Text("Why they differ:")] + [Text(f"  • {r}") for r in c.reasons]
    return Group(*parts)


def render_sglang_size(r: SglangSize) -> Group:
    """The table of `kvplan size --engine sglang`."""
    t = _table(f"{r.model} in SGLang {r.sglang_version}'s pools, per GPU at TP {r.tp} (KV dtype {r.kv_cache_dtype})")
    _row(t, "pool configurator", r.pool_configurator, "model_executor/pool_configurator.py")
    dsv4 = r.pool_configurator == "DSV4PoolConfigurator"
    cell = f"{r.bytes_per_token:,.2f}".removesuffix(".00") if dsv4 else f"{r.bytes_per_token:,.1f}".removesuffix(".0")
    _row(t, "bytes per token (the configurator's cell)", cell, "what one token of max_total_num_tokens costs")
    index = "c4 indexer" if dsv4 else "DSA index-K"
    _row(t, "compressed side (c4 + c128, rounded up)" if dsv4 else "full-attention side",
         f"{r.full_bytes_per_token:,}",
         f"{r.full_layers} layers" + (f", {r.indexer_bytes_per_token:,} B of it the {index}"
                                      if r.indexer_bytes_per_token else ""))
    if r.swa_layers:
        _row(t, "sliding-window side", f"{r.swa_bytes_per_token:,}",
             f"{r.swa_layers} layers, × swa_full_tokens_ratio {r.swa_full_tokens_ratio:g} per full token")
    if r.mamba_layers:
        _row(t, "Mamba state per request slot", f"{r.mamba_state_bytes_per_request:,}", f"{r.mamba_layers} layers")
    return Group(t, *(Text(f"Note: {n}", style="dim") for n in r.notes))


def render_sglang_sweep(r: SglangSweep) -> Group:
    """The table of `kvplan fit MODEL --engine sglang` without --gpu."""
    t = Table(title=f"{r.model} under SGLang {r.sglang_version}'s rules: the smallest TP that starts, per GPU",
              title_justify="left", box=None, pad_edge=False)
    # two-line headers: measured by their longer line, the table fits 80 columns without Rich folding a header
    # ("mem_fraction_s / tatic") or a cell ("15 at / 131,072")
    for name, justify in (("GPU", "left"), ("TP", "right"), ("mem_fraction_static", "right"),
                          ("pool tokens", "right"), ("running\nrequests", "right"),
                          ("full-context\nrequests", "right")):
        t.add_column(name, justify=justify, overflow="fold")  # type: ignore[arg-type]
    for row in r.rows:
        t.add_row(row.gpu, str(row.tp), f"{row.mem_fraction_static:.4g}", f"{row.total_tokens:,}",
                  f"{row.max_running_requests:,}", f"{row.requests_at_context:,} at {row.context_len:,}")
    parts: list[RenderableType] = [t]
    parts += [Text(f"Skipped {s}", style="dim") for s in r.skipped]
    return Group(*parts)
