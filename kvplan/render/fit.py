"""Rich rendering of a FitReport and a SweepReport (renderers never compute)."""

from __future__ import annotations

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from kvplan.units import GiB
from kvplan.vllm.report import FitReport
from kvplan.vllm.sweep import SweepReport
from kvplan.vllm.verdicts import StartupRange

BAR_WIDTH = 60
_TERM_LABEL = {
    "weights": "weights",
    "activation": "activation peak",
    "cuda_graphs": "CUDA graphs",
    "non_torch": "non-torch",
}
_TERM_STYLE = {
    "weights": "blue",
    "activation": "magenta",
    "cuda_graphs": "cyan",
    "non_torch": "yellow",
}
_KIND_LABEL = {
    "full": "full",
    "sliding_window": "sliding",
    "chunked_local": "chunked",
    "mla": "MLA",
    "mamba": "recurrent",
}


def _row(table: Table, *cells: str | Text, style: str | None = None) -> None:
    """Add a row whose plain strings are shown verbatim (never read as Rich markup)."""
    table.add_row(*(Text(c) if isinstance(c, str) else c for c in cells), style=style)


def _gib(num_bytes: int) -> str:
    return f"{num_bytes / GiB:,.2f}"


def _waterfall(r: FitReport) -> Table:
    t = Table(title="Memory per GPU", title_justify="left", show_header=True, box=None, pad_edge=False)
    t.add_column("", overflow="fold")
    t.add_column("GiB", justify="right", overflow="fold")
    t.add_column("how it is known")
    _row(t, "GPU memory (cudaMemGetInfo total)", _gib(r.memory.cuda_total_bytes), r.deployment.gpu_name)
    override = r.memory.kv_cache_memory_bytes_given
    _row(
        t,
        f"× gpu_memory_utilization {r.memory.gpu_memory_utilization:g} = requested",
        _gib(r.memory.requested_bytes),
        "not used: --kv-cache-memory-bytes given" if override else r.settings_sources.get("gpu_memory_utilization", ""),
    )
    for term in r.memory.terms:
        label = _TERM_LABEL.get(term.name, term.name)
        how = f"{term.source}: {term.assumption}"
        _row(
            t,
            Text(f"− {label}", style=_TERM_STYLE.get(term.name, "")),
            _gib(term.bytes),
            how,
            style="dim" if override and term.name != "weights" else None,
        )
    kv_label = "= KV cache (--kv-cache-memory-bytes)" if override else "= KV cache"
    style = "bold green" if r.memory.available_kv_bytes > 0 else "bold red"
    _row(
        t,
        Text(kv_label, style=style),
        Text(_gib(r.memory.available_kv_bytes), style=style),
        "exact, as given" if override else "what vLLM would log as 'Available KV cache memory'" + _range_text(r),
    )
    return t


def _range_text(r: FitReport) -> str:
    """The estimate's range (calibration residuals of the estimated terms), when it is not a point."""
    low, high = r.memory.available_kv_range
    if low == high:
        return ""
    tokens_low, tokens_high = r.cache.kv_cache_tokens_range
    return f"; range {_gib(low)} … {_gib(high)} GiB, {tokens_low:,} … {tokens_high:,} tokens"


def _bar(r: FitReport) -> Text:
    total = max(1, r.memory.cuda_total_bytes)
    parts: list[tuple[str, int, str]] = [
        (term.name, term.bytes, _TERM_STYLE.get(term.name, "white")) for term in r.memory.terms if term.bytes > 0
    ]
    kv = max(0, r.memory.available_kv_bytes)
    parts.append(("kv", kv, "green"))
    used = sum(b for _, b, _ in parts)
    parts.append(("free", max(0, total - used), "dim"))
    text = Text("[")
    for name, num, style in parts:
        cells = min(BAR_WIDTH, round(num / total * BAR_WIDTH))  # terms can exceed a tiny --gpu-total-bytes
        text.append(("·" if name == "free" else "█") * cells, style=style)
    text.append("]  ")
    text.append("weights", style="blue")
    text.append(" activation", style="magenta")
    text.append(" graphs", style="cyan")
    text.append(" non-torch", style="yellow")
    text.append(" KV", style="green")
    text.append(" unreserved", style="dim")
    return text


def _kv_table(r: FitReport) -> Table:
    t = Table(title="KV cache", title_justify="left", box=None, show_header=False, pad_edge=False)
    t.add_column("", overflow="fold")
    t.add_column("", overflow="fold")
    _row(t, "KV dtype", f"{r.cache.kv_cache_dtype} ({r.settings_sources.get('kv_cache_dtype', '')})")
    _row(t, "block size", f"{r.cache.block_size} tokens ({r.cache.block_size_source})")
    kinds: dict[tuple[str, int | None, int, int], list[int]] = {}
    for g in r.cache.groups:
        kinds.setdefault(
            (g.kind, g.sliding_window or g.attention_chunk_size, g.block_size, g.blocks_per_request), []
        ).append(g.num_layers)
    parts = []
    for (kind, span, block, bpr), sizes in kinds.items():
        label = _KIND_LABEL.get(kind, kind) + (f" (window {span:,})" if kind == "sliding_window" and span else "")
        label += f" (chunk {span:,})" if kind == "chunked_local" and span else ""
        layers = (
            f"{sizes[0]} layers"
            if len(sizes) == 1
            else (
                f"{len(sizes)} groups of {min(sizes)}–{max(sizes)} layers"
                if min(sizes) != max(sizes)
                else f"{len(sizes)} groups of {sizes[0]} layers"
            )
        )
        parts.append(
            f"{layers} {label}"
            + (f", block {block}" if block != r.cache.block_size else "")
            + f": {bpr:,} blocks/request each"
            if len(sizes) > 1
            else f"{layers} {label}: {bpr:,} blocks/request"
        )
    groups = "; ".join(parts)
    _row(t, "groups", f"{len(r.cache.groups)} — {groups}" if r.cache.groups else "none (no KV cache)")
    _row(t, "bytes per block", f"{r.cache.bytes_per_block:,}")
    _row(t, "blocks", f"{r.cache.num_gpu_blocks:,} ({r.cache.usable_blocks:,} usable; block 0 is vLLM's null block)")
    _row(t, "blocks per request", f"{r.cache.blocks_per_request:,} at max_model_len {r.scheduler.max_model_len:,}")
    _row(
        t,
        "scheduler",
        f"max_num_seqs {r.scheduler.max_num_seqs:,}, max_num_batched_tokens {r.scheduler.max_num_batched_tokens:,} "
        f"({r.scheduler.in_flight_tokens:,} tokens in flight)",
    )
    _row(t, "model runner", r.settings_sources.get("model_runner", r.deployment.model_runner))
    had = "" if r.verdict.fits else " (had it started)"
    _row(t, "KV tokens", f"{r.cache.kv_cache_tokens:,}{had}")
    _row(t, "max concurrency",
         f"{r.scheduler.max_concurrency:.2f}× requests of {r.scheduler.max_model_len:,} tokens{had}")
    return t


def _stage_table(r: FitReport) -> list[RenderableType]:
    """One row per PP stage when their budgets differ; the tightest (whose block count vLLM keeps) marked."""
    if len(r.memory.stages) < 2 or len({(s.available_kv_bytes, s.num_gpu_blocks) for s in r.memory.stages}) == 1:
        return []
    t = Table(title="Pipeline stages (GiB per GPU; vLLM keeps the smallest block count)", title_justify="left",
              box=None, pad_edge=False)
    for name in ("stage", "layers", "weights", "act.", "graphs", "non-torch", "KV", "blocks"):
        t.add_column(name, justify="left" if name == "stage" else "right", no_wrap=True)
    for s in r.memory.stages:
        mark = " (tightest)" if s.stage == r.memory.tightest_stage else ""
        _row(t, f"{s.stage}{mark}", str(s.num_layers), _gib(s.weights_bytes), _gib(s.activation_bytes),
             _gib(s.cuda_graph_bytes), _gib(s.non_torch_bytes), _gib(s.available_kv_bytes), f"{s.num_gpu_blocks:,}")
    return [t, Text("")]


def _verdict(r: FitReport) -> list[RenderableType]:
    lines: list[RenderableType] = []
    if r.verdict.log_line:
        lines.append(Text.assemble(("vLLM would log: ", "bold"), (r.verdict.log_line, "green")))
    for line in r.vllm_log:
        lines.append(Text(f"vLLM would also log: {line}", style="dim"))
    if r.verdict.fits and r.verdict.startup_range is not StartupRange.STARTS:
        lines.append(Text(f"✓ vLLM starts with these settings, but {r.verdict.startup_range}: at the pessimistic end "
                          "of the range it does not.", style="bold yellow"))
    elif r.verdict.fits:
        lines.append(Text("✓ vLLM starts with these settings.", style="bold green"))
    else:
        lines.append(Text(f"✗ vLLM does not start ({r.verdict.startup}):", style="bold red"))
        lines.append(Text(r.verdict.error or "", style="red"))
        if r.verdict.startup_range is not StartupRange.DOES_NOT_START:
            lines.append(Text(f"  At the optimistic end of the range it would: it {r.verdict.startup_range}.",
                              style="yellow"))
    p = r.verdict.preemption
    style = "yellow" if p.possible else "green"
    lines.append(Text.assemble(("Preemption: ", "bold"), (p.explanation, style)))
    if r.verdict.fits:
        extra = [f"{p.max_requests_at_context:,} requests of {p.context:,} tokens fit at once"]
        if p.from_concurrency is not None:
            extra.append(f"preemption from {p.from_concurrency:,} running at {p.context:,} tokens")
        if p.from_context is not None:
            extra.append(
                f"from {p.from_context:,} tokens per request at {p.concurrency:,} running"
                if p.from_context > 1
                else f"at any context length with {p.concurrency:,} running"
            )
        lines.append(Text("  " + "; ".join(extra), style="dim"))
    return lines


def _advice(r: FitReport) -> list[RenderableType]:
    if not r.verdict.advice:
        return []
    from kvplan.render.layout import TableOrStack

    title = "What fixes it (each re-planned)"
    t = Table(title=title, title_justify="left")
    # Flags and numbers keep their width while the result's words wrap; where even that is too wide the
    # rows are stacked as text (TableOrStack): never cut into an ellipsis.
    t.add_column("change", no_wrap=True)
    t.add_column("result", ratio=1)
    t.add_column("blocks", justify="right", no_wrap=True)
    t.add_column("KV tokens", justify="right", no_wrap=True)
    t.add_column("concurrency", justify="right", no_wrap=True)
    rows = [(a.change, f"{a.fixes}: {a.detail}", f"{a.num_gpu_blocks:,}", f"{a.kv_cache_tokens:,}",
             f"{a.max_concurrency:.2f}×") for a in r.verdict.advice]
    for row in rows:
        _row(t, *row)

    def stacked() -> RenderableType:
        from rich.padding import Padding

        parts: list[RenderableType] = [Text(title, style="italic")]
        for change, result, blocks, tokens, concurrency in rows:
            parts.append(Text(change, style="bold"))
            parts.append(Padding(Text(f"{result}; {blocks} blocks, {tokens} KV tokens, concurrency {concurrency}"),
                                 (0, 0, 0, 2)))
        return Group(*parts)

    return [TableOrStack(t, stacked)]


def render_fit(r: FitReport) -> Group:
    """Header, memory waterfall with a bar, KV table, vLLM's log line, verdicts, advice, notes."""
    d = r.deployment
    header = Text.assemble(
        (d.model, "bold"), f" on {d.num_gpus} × {d.gpu_name} (tp {d.tp}, pp {d.pp}) · vLLM {d.vllm_version} "
        f"{'ROCm ' if d.platform == 'rocm' else ''}rules"
    )
    notes = [Text(f"Note: {n}", style="dim") for n in r.notes]
    if d.platform_rules:
        notes.insert(0, Text(f"platform: {d.platform_rules}", style="dim"))
    return Group(
        header, Text(""), _waterfall(r), _bar(r), Text(""), *_stage_table(r), _kv_table(r), Text(""), *_verdict(r),
        *_advice(r), *notes
    )


def render_sweep(r: SweepReport) -> Group:
    """Per GPU kind, the cheapest node-aware layout (TP × PP × DP replicas), fewest GPUs first, with its
    `vllm serve` line; then why the other combinations do not serve the model, grouped."""
    title = (
        f"{r.model}: what to rent for {r.concurrency} request(s) of {r.context:,} tokens resident at once "
        "(fewest GPUs first; TP inside a node, PP across nodes, DP replicas for the load)"
    )
    t = Table(title=title, title_justify="left")
    for header, justify in (("GPU", "left"), ("TP×PP×DP", "right"), ("GPUs", "right"), ("nodes", "right"),
                            ("KV GiB/GPU", "right"), ("KV tokens per replica", "right"),
                            ("requests per replica", "right")):
        t.add_column(header, justify=justify, overflow="fold")  # type: ignore[arg-type]  # never cut a number
    for row in r.rows:
        _row(
            t,
            f"{row.gpu} (ROCm)" if row.platform == "rocm" else row.gpu,
            f"{row.tp}×{row.pp}×{row.replicas}",
            str(row.num_gpus),
            str(row.nodes),
            _gib(row.available_kv_bytes),
            f"{row.kv_cache_tokens:,}",
            f"{row.requests_at_context:,}",
        )
    parts: list[RenderableType] = [t]
    if r.rows:
        parts.append(Text("vllm serve lines, cheapest first:", style="bold"))
        parts.extend(Text(f"  {row.gpu}: {row.command}") for row in r.rows[:SWEEP_COMMANDS_SHOWN])
    else:
        parts.append(Text("No catalog GPU serves this model at this context with TP ≤ 8 per node and PP ≤ 4.",
                          style="yellow"))
    if r.reasons:
        parts.append(Text("Why the other GPU × layout combinations do not:", style="bold"))
        parts.extend(Text(f"  {x.count} × {x.reason} (e.g. {x.example})") for x in r.reasons[:SWEEP_REASONS_SHOWN])
    parts.append(
        Text(
            "Pick one and run `kvplan fit MODEL --gpu ID -tp N -pp M` for the full budget. AMD GPUs (ROCm) are "
            "planned by vLLM's ROCm rules with AMD's image (aiter installed, VLLM_ROCM_USE_AITER unset).",
            style="dim",
        )
    )
    return Group(*parts)


SWEEP_COMMANDS_SHOWN = 5
SWEEP_REASONS_SHOWN = 5
