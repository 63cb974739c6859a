"""Rich rendering of a SizeReport (renderers never compute)."""
from __future__ import annotations

from rich.console import Group
from rich.table import Table
from rich.text import Text

from kvplan.model.size import SizeReport
from kvplan.units import GiB, human_bytes

_KIND_LABEL = {
    "full": "full",
    "sliding_window": "sliding",
    "chunked_local": "chunked",
    "mla": "MLA latent",
    "mamba": "recurrent",
}


def render_size(r: SizeReport) -> Group:
    """The layer table, totals, MHA comparison, per-request KV and weights."""
    title = f"{r.model} · KV {r.kv_cache_dtype} · TP {r.tp} · PP {r.pp}"
    t = Table(title=title, title_justify="left")
    t.add_column("layers", justify="right")
    t.add_column("kind")
    t.add_column("KV heads", justify="right")
    t.add_column("head size", justify="right")
    t.add_column("B/token/layer", justify="right")
    t.add_column("B/token", justify="right")
    t.add_column("state/req", justify="right")
    for g in r.layers:
        extra = f" (window {g.sliding_window:,})" if g.sliding_window else (
            f" (chunk {g.attention_chunk_size:,})" if g.attention_chunk_size else "")
        t.add_row(
            str(g.count), _KIND_LABEL[g.kind] + extra,
            "—" if g.kind == "mamba" else str(g.kv_heads),
            "—" if g.kind == "mamba" else str(g.head_size),
            "—" if g.kind == "mamba" else f"{g.bytes_per_token:,}",
            "—" if g.kind == "mamba" else f"{g.bytes_per_token * g.count:,}",
            human_bytes(g.state_bytes * g.count) if g.state_bytes else "—",
        )
    lines = [
        Text.assemble(("KV per token: ", "bold"),
                      f"{r.kv_bytes_per_token:,} bytes ({human_bytes(r.kv_bytes_per_token)})"
                      " per GPU, every KV layer, as if every token were kept"),
    ]
    if r.attention_class != "none":
        ratio = r.mha_bytes_per_token / r.kv_bytes_per_token if r.kv_bytes_per_token else 0.0
        lines.append(Text(f"Attention: {r.attention_class}; as MHA it would need {r.mha_bytes_per_token:,} bytes/token"
                          f" ({human_bytes(r.mha_bytes_per_token)}, {ratio:.1f}×)"))
    if r.state_bytes_per_request:
        lines.append(Text(f"Recurrent state: {human_bytes(r.state_bytes_per_request)} per request per GPU, "
                          "whatever the context length"))
    ctx = Table(title="KV cache per request (windows capped, state included)", title_justify="left")
    ctx.add_column("context", justify="right")
    ctx.add_column("GiB", justify="right")
    for c in r.per_request:
        ctx.add_row(f"{c.tokens:,}", f"{c.bytes / GiB:.4f}")
    weights = Text(_weights_line(r))
    notes = [Text(f"Note: {n}", style="dim") for n in r.notes]
    return Group(t, *lines, ctx, weights, *notes)


def _weights_line(r: SizeReport) -> str:
    if r.weights_bytes is None:
        return f"Weights: {r.weights_source} (pass a Hub id for safetensors metadata, or --weights-memory to fit)"
    params = f"{r.num_parameters / 1e9:.2f} B parameters, " if r.num_parameters is not None else ""
    per_gpu = f"; {human_bytes(r.weights_bytes_per_gpu)} per GPU" if r.weights_bytes_per_gpu is not None else ""
    return f"Weights: {human_bytes(r.weights_bytes)} ({params}{r.weights_source}){per_gpu}"
