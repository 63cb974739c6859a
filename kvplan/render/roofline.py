"""Rich rendering of a RooflineReport: summary, decode table, a terminal chart, prefill (never computes).

`chart_text` draws throughput against batch on log-log axes in plain characters; `chart_svg` writes
the same chart as a standalone SVG document (no plotting library needed).
"""
from __future__ import annotations

import math
from collections.abc import Sequence

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from kvplan.hardware.roofline import CurvePoint, RooflineReport
from kvplan.units import GiB, human_bytes

_LIMIT_TEXT = {
    "kv_capacity": "the KV cache (it fills while decode is still memory-bound)",
    "compute": "compute (decode turns compute-bound before the KV cache fills)",
    "max_num_seqs": "max_num_seqs (vLLM runs no more requests at once; the KV cache holds more)",
    "unknown": "the KV capacity, which is not known here (pass --max-concurrency)",
}


def _cap_words(r: RooflineReport) -> tuple[str, str]:
    """Who caps the running requests, and the setting's name: vLLM's max_num_seqs or SGLang's max_running_requests."""
    return ("SGLang", "max_running_requests") if r.engine == "sglang" else ("vLLM", "max_num_seqs")


# Chart glyphs: the model's prediction, the bandwidth roof, the compute roof, the KV-capacity limit.
MODEL_GLYPH, MEMORY_GLYPH, COMPUTE_GLYPH, KV_GLYPH = "●", "/", "─", "┊"


def _tps(x: float) -> str:
    return f"{x:,.0f}" if x >= 100 else f"{x:,.1f}" if x >= 10 else f"{x:,.2f}"


def _ms(seconds: float) -> str:
    ms = seconds * 1e3
    return f"{ms:,.1f}" if ms >= 10 else f"{ms:,.2f}" if ms >= 1 else f"{ms:,.3f}"


def _flops(x: float) -> str:
    for unit, div in (("PFLOP", 1e15), ("TFLOP", 1e12), ("GFLOP", 1e9), ("MFLOP", 1e6)):
        if x >= div:
            return f"{x / div:,.2f} {unit}"
    return f"{x:,.0f} FLOP"


def render_roofline(r: RooflineReport, *, chart_width: int = 56, chart_height: int = 13) -> Group:
    """Summary of the roofs, the decode table over batches, the chart, prefill and notes."""
    dt = r.compute_dtype.upper()
    head = [
        Text.assemble((r.model, "bold"), f" on {r.gpu} · TP {r.tp}", _parallel(r),
                      f" · decode at {r.context:,} tokens"),
        Text(
            f"Roofs per GPU: HBM {r.bandwidth_bytes_per_s / 1e12:.2f} TB/s × {r.bandwidth_efficiency:.2f}"
            + (f" (weights), × {r.kv_bandwidth_efficiency:.2f} (KV)" if r.kv_bandwidth_efficiency is not None else "")
            + "; "
            f"{dt} {r.peak_flops / 1e12:,.1f} TFLOP/s × {r.compute_efficiency:.2f} ({r.compute_dtype_reason})"
        ),
        Text(
            f"Ridge point: {r.ridge_point:,.0f} FLOP/byte rated ({dt}), {r.effective_ridge_point:,.0f} after "
            "efficiencies"
            + "".join(f"; {k.upper()} {v:,.0f}" for k, v in r.ridge_points.items() if k != r.compute_dtype)
        ),
        Text(f"Per GPU: weights {human_bytes(r.weight_bytes)}, KV {r.kv_bytes_per_token:,} bytes/token"),
        *_speed_model_lines(r),
    ]
    t = _decode_table(r)
    caps = [
        Text(
            f"Compute-bound from batch {r.compute_bound_batch:,}" if r.compute_bound_batch is not None else
            "Memory-bound at every batch at this context: KV reads grow as fast as the FLOPs"
        ),
        Text(
            f"KV cache holds {r.kv_capacity_batch:,} requests of {r.context:,} tokens"
            + (f"; {_cap_words(r)[0]} runs at most {r.max_num_seqs:,} at once ({_cap_words(r)[1]})"
               if r.max_num_seqs else "")
            if r.kv_capacity_batch is not None else "KV capacity: not computed"
        ),
    ]
    limit_text = _LIMIT_TEXT[r.throughput_limit]
    if r.throughput_limit == "max_num_seqs" and r.engine == "sglang":
        limit_text = "max_running_requests (SGLang runs no more requests at once; the KV cache holds more)"
    limit = Text.assemble(("Throughput capped by ", "bold"), limit_text)
    if r.limit_point is not None:
        lp = r.limit_point
        limit.append(f": batch {lp.batch:,} → {_tps(lp.tokens_per_s)} tok/s, ITL {_ms(lp.itl_s)} ms")
    caps.append(limit)
    caps += _speculative_lines(r)
    chart = Text(chart_text(r.curve, r.kv_capacity_batch, r.compute_bound_batch, width=chart_width,
                            height=chart_height))
    pf = r.prefill
    share = pf.attention_flops / pf.flops if pf.flops else 0.0
    prefill = [
        Text.assemble(
            ("Prefill ", "bold"),
            f"{pf.prompt_tokens:,} tokens: {_flops(pf.flops)}{' per GPU' if r.tp > 1 else ''} "
            f"({share:.0%} attention), "
            f"TTFT {_ms(pf.time_s)} ms in one step ({_ms(pf.time_low_s)}–{_ms(pf.time_high_s)}; "
            f"{pf.bound}-bound; physical bound {_ms(pf.bound_time_s)} ms)",
        )
    ]
    if pf.max_num_batched_tokens is not None and len(pf.chunks) > 1:
        prefill.append(Text(
            f"  chunked by max_num_batched_tokens={pf.max_num_batched_tokens:,}: {len(pf.chunks)} steps, "
            f"{_ms(pf.chunked_time_s)} ms alone (first {_ms(pf.chunks[0].time_s)} ms, "
            f"last {_ms(pf.chunks[-1].time_s)} ms)"
        ))
    tail = [Text(f"TP communication: {r.communication}", style="dim")]
    tail += [Text(f"Note: {n}", style="dim") for n in r.notes]
    return Group(*head, t, *caps, chart, *prefill, *tail)


def _speculative_lines(r: RooflineReport) -> list[Text]:
    """Decode with the deployment's speculative draft: tokens per step, ITL and tok/s over the acceptance range."""
    if not r.speculative:
        return []
    first = r.speculative[0]
    source = ("DeepSeek-V3 report §5.4.3" if first.method == "mtp" else "assumed, not measured")
    lines = [Text.assemble(
        ("Speculative decoding ", "bold"),
        f"({first.method}, {first.num_speculative_tokens} drafted per step, acceptance "
        f"{first.acceptance_low:.2f}–{first.acceptance_high:.2f} per token, {source}):")]
    for p in r.speculative:
        lines.append(Text(
            f"  batch {p.batch:,}: {p.tokens_per_step_low:.2f}–{p.tokens_per_step_high:.2f} tokens per step of "
            f"{_ms(p.step_s)} ms (draft {_ms(p.draft_s)} ms) → ITL {_ms(p.itl_low_s)}–{_ms(p.itl_high_s)} ms, "
            f"{_tps(p.tokens_per_s_low)}–{_tps(p.tokens_per_s_high)} tok/s"))
    return lines


def _parallel(r: RooflineReport) -> str:
    """DP and EP, when used: batches are then per DP rank, each its own requests and KV cache."""
    parts = ([f" · DP {r.dp} (batch and tok/s per rank)"] if r.dp > 1 else []) + ([f" · EP {r.ep}"] if r.ep > 1 else [])
    return "".join(parts)


def _decode_table(r: RooflineReport) -> RenderableType:
    """Decode per batch: predicted tok/s with its range, the physical bound, ITL; stacked when too narrow."""
    from kvplan.render.layout import TableOrStack

    title = f"Decode at {r.context:,} tokens of context (per GPU)"
    known = r.kv_capacity_batch is not None
    columns = ["batch", "tok/s", "range", "bound", "ITL ms", "roof", "KV GiB", *(["fits"] if known else [])]
    rows = []
    for p in r.batches:
        rows.append([
            f"{p.batch:,}", _tps(p.tokens_per_s), f"{_tps(p.batch / p.itl_high_s)}–{_tps(p.batch / p.itl_low_s)}",
            _tps(p.bound_tokens_per_s), _ms(p.itl_s), p.bound,
            f"{p.kv_bytes / GiB:,.2f}", *(["yes" if p.fits_kv_cache else "no"] if known else []),
        ])
    t = Table(title=title, title_justify="left")
    for name in columns:
        t.add_column(name, justify="left" if name == "roof" else "right", no_wrap=True)
    for row in rows:
        t.add_row(*row)

    def stacked() -> RenderableType:
        from rich.padding import Padding

        parts: list[RenderableType] = [Text(title, style="italic")]
        for row in rows:
            parts.append(Text(f"batch {row[0]}", style="bold"))
            cells = zip(columns[1:], row[1:], strict=True)
            parts.append(Padding(Text("; ".join(f"{name} {value}" for name, value in cells)), (0, 0, 0, 2)))
        return Group(*parts)

    return TableOrStack(t, stacked)


def _speed_model_lines(r: RooflineReport) -> list[Text]:
    """What the predicted times add to the roofs, and what the model rests on."""
    o = r.overheads
    if o is None:
        return [Text("Times are the roofs alone at these efficiencies (no per-step overheads)", style="dim")]
    parts = [f"{o.step_s * 1e3:,.2f} ms per step"] if o.step_s else []
    if o.layer_s:
        parts.append(f"{o.layer_s * 1e6:,.1f} µs per layer")
    if o.seq_layer_s:
        parts.append(f"{o.seq_layer_s * 1e6:,.2f} µs per decode request per layer")
    if o.moe_layer_s and any(p.expected_experts is not None for p in r.batches):
        parts.append(f"{o.moe_layer_s * 1e6:,.1f} µs per MoE layer")
    if r.tp > 1:
        parts.append(f"{o.allreduce_s * 1e6:,.1f} µs per all-reduce")
    if o.request_s:
        parts.append(f"{o.request_s * 1e3:,.2f} ms before a first token")
    return [
        Text(f"Predicted = roofs at the efficiencies above + {', '.join(parts) or 'no overheads'}; range "
             f"×{o.ratio_low:.2f}–"
             f"×{o.ratio_high:.2f} (measured ÷ predicted where calibrated)"),
        Text(f"Speed model: {r.speed_model}; bound = rated HBM and FLOP/s, no overheads (nothing runs faster)",
             style="dim"),
    ]


# --- the chart ----------------------------------------------------------------------------------


def _interp(curve: Sequence[CurvePoint], lx: float, attr: str) -> float:
    """log10 of `attr` at log2(batch) = lx, linear between the curve's points (log-log)."""
    for a, b in zip(curve, curve[1:], strict=False):
        la, lb = math.log2(a.batch), math.log2(b.batch)
        if la <= lx <= lb:
            ya, yb = (math.log10(max(getattr(p, attr), 1e-12)) for p in (a, b))
            f = (lx - la) / (lb - la) if lb > la else 0.0
            return ya + f * (yb - ya)
    return math.log10(max(getattr(curve[-1], attr), 1e-12))


def chart_text(
    curve: Sequence[CurvePoint],
    kv_capacity_batch: int | None,
    compute_bound_batch: int | None,
    *,
    width: int = 56,
    height: int = 13,
) -> str:
    """Decode throughput against batch (log-log) with the two roofs and the KV-capacity limit.

    ● predicted tok/s, / bandwidth roof (batch ÷ memory time), ─ compute roof, ┊ KV capacity.
    """
    if not curve:
        return ""
    x_max = math.log2(curve[-1].batch) or 1.0
    finite = [
        v for p in curve for v in (p.tokens_per_s, p.memory_roof_tokens_per_s, p.compute_roof_tokens_per_s)
        if math.isfinite(v) and v > 0
    ]
    y_lo = math.floor(math.log10(min(p.tokens_per_s for p in curve)))
    y_hi = math.ceil(math.log10(max(finite)))
    if y_hi <= y_lo:
        y_hi = y_lo + 1
    grid = [[" "] * width for _ in range(height)]

    def row(ly: float) -> int | None:
        r = round((y_hi - ly) / (y_hi - y_lo) * (height - 1))
        return r if 0 <= r < height else None

    def col(batch: int) -> int:
        return min(width - 1, round(math.log2(batch) / x_max * (width - 1)))

    if kv_capacity_batch and 1 <= kv_capacity_batch <= curve[-1].batch:
        c = col(kv_capacity_batch)
        for r in range(height):
            grid[r][c] = KV_GLYPH
    layers = (("memory_roof_tokens_per_s", MEMORY_GLYPH), ("compute_roof_tokens_per_s", COMPUTE_GLYPH),
              ("tokens_per_s", MODEL_GLYPH))
    for attr, glyph in layers:
        for c in range(width):
            ly = _interp(curve, c / (width - 1) * x_max, attr)
            at = row(ly)
            if at is not None:
                grid[at][c] = glyph
    label_w = 9
    labels = {row(float(e)): f"{10 ** e:,}" for e in range(y_lo, y_hi + 1)}
    lines = ["tok/s (log)"]
    for r in range(height):
        lines.append(f"{labels.get(r, ''):>{label_w}} │" + "".join(grid[r]))
    lines.append(" " * label_w + " └" + "─" * width)
    ticks = [" "] * width
    b = 1
    while b <= curve[-1].batch:
        text = f"{b:,}"
        c = col(b)
        start = max(0, min(c, width - len(text)))
        if all(ch == " " for ch in ticks[max(0, start - 1):start + len(text) + 1]):
            ticks[start:start + len(text)] = list(text)
        b *= 4
    lines.append(" " * (label_w + 2) + "".join(ticks))
    legend = f"x: batch · {MODEL_GLYPH} predicted · {MEMORY_GLYPH} HBM roof · {COMPUTE_GLYPH} compute roof"
    if kv_capacity_batch:
        legend += f" · {KV_GLYPH} KV capacity {kv_capacity_batch:,}"
    lines.append(legend)
    return "\n".join(lines)


def _el(tag: str, text: str | None = None, **attrs: object) -> str:
    """One SVG element; attribute names use `_` for `-`."""
    from xml.sax.saxutils import escape, quoteattr

    a = " ".join(f"{k.rstrip('_').replace('_', '-')}={quoteattr(str(v))}" for k, v in attrs.items())
    return f"<{tag} {a}/>" if text is None else f"<{tag} {a}>{escape(text)}</{tag}>"


def chart_svg(r: RooflineReport, *, width: int = 720, height: int = 420) -> str:
    """The same chart as a standalone SVG document (log-log axes, three curves, the KV limit)."""
    curve = r.curve
    left, right, top, bottom = 70, 20, 40, 50
    pw, ph = width - left - right, height - top - bottom
    x_max = math.log2(curve[-1].batch) or 1.0
    values = [
        v for p in curve for v in (p.tokens_per_s, p.memory_roof_tokens_per_s, p.compute_roof_tokens_per_s)
        if math.isfinite(v) and v > 0
    ]
    y_lo = math.floor(math.log10(min(p.tokens_per_s for p in curve)))
    y_hi = max(y_lo + 1, math.ceil(math.log10(max(values))))

    def x(batch: float) -> float:
        return round(left + math.log2(batch) / x_max * pw, 1)

    def y(v: float) -> float:
        lv = min(max(math.log10(max(v, 1e-12)), y_lo), y_hi)
        return round(top + (y_hi - lv) / (y_hi - y_lo) * ph, 1)

    def path(attr: str) -> str:
        pts = [(x(p.batch), y(getattr(p, attr))) for p in curve if math.isfinite(getattr(p, attr))]
        return " ".join(f"{'M' if i == 0 else 'L'}{px},{py}" for i, (px, py) in enumerate(pts))

    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        'font-family="sans-serif" font-size="12">',
        _el("rect", width="100%", height="100%", fill="white"),
        _el("text", f"{r.model} on {r.gpu} · TP {r.tp} · context {r.context:,}", x=left, y=20, font_size=14),
        _el("line", x1=left, y1=top + ph, x2=left + pw, y2=top + ph, stroke="black"),
        _el("line", x1=left, y1=top, x2=left, y2=top + ph, stroke="black"),
    ]
    for e in range(int(y_lo), int(y_hi) + 1):
        parts.append(_el("text", f"{10 ** e:,}", x=left - 6, y=y(10**e) + 4, text_anchor="end"))
        parts.append(_el("line", x1=left, y1=y(10**e), x2=left + pw, y2=y(10**e), stroke="#eee"))
    b = 1
    while b <= curve[-1].batch:
        parts.append(_el("text", f"{b:,}", x=x(b), y=top + ph + 16, text_anchor="middle"))
        b *= 4
    parts.append(_el("text", "batch (requests)", x=left + pw / 2, y=height - 10, text_anchor="middle"))
    parts.append(_el("text", "decode tokens/s", x=16, y=top + ph / 2, text_anchor="middle",
                     transform=f"rotate(-90 16 {top + ph / 2})"))
    if r.kv_capacity_batch and 1 <= r.kv_capacity_batch <= curve[-1].batch:
        kx = x(r.kv_capacity_batch)
        parts.append(_el("line", x1=kx, y1=top, x2=kx, y2=top + ph, stroke="#c00", stroke_dasharray="4 3"))
        parts.append(_el("text", f"KV capacity {r.kv_capacity_batch:,}", x=kx + 4, y=top + 12, fill="#c00"))
    styles = (("tokens_per_s", "predicted", "black", "none"),
              ("memory_roof_tokens_per_s", "bandwidth roof", "#1f77b4", "6 3"),
              ("compute_roof_tokens_per_s", "compute roof", "#ff7f0e", "6 3"))
    for i, (attr, label, color, dash) in enumerate(styles):
        parts.append(_el("path", d=path(attr), fill="none", stroke=color, stroke_width=2,
                         stroke_dasharray=dash))
        ly = top + 14 + 16 * i
        parts.append(_el("line", x1=left + pw - 150, y1=ly - 4, x2=left + pw - 130, y2=ly - 4, stroke=color,
                         stroke_width=2, stroke_dasharray=dash))
        parts.append(_el("text", label, x=left + pw - 124, y=ly))
    parts.append("</svg>")
    return "\n".join(parts) + "\n"
