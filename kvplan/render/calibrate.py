"""Rich rendering of `kvplan calibrate`: what the startup log showed, grouped; the comparison with
kvplan's prediction; the overrides that reproduce the server and their check. Renderers only format."""
from __future__ import annotations

from collections.abc import Callable
from operator import attrgetter
from typing import TYPE_CHECKING, Any, Final

from kvplan.units import format_bytes

if TYPE_CHECKING:
    from rich.console import RenderableType

    from kvplan.observe.calibration import CalibrationReport, Override, TermComparison, Verification
    from kvplan.vllm.startup_log import StartupLog


def _gib(x: Any) -> str:
    return format_bytes(x, "GiB")


def _exact(x: Any) -> str:
    """A byte count vLLM prints exactly (its --kv-cache-memory advice)."""
    return f"{x} ({_gib(x)})"


def _int(x: Any) -> str:
    return f"{x:,}"


def _float(x: Any) -> str:
    return f"{x:g}"


def _seconds(x: Any) -> str:
    return f"{x:.2f} s"


def _plain(x: Any) -> str:
    return str(x)


Row = tuple[str, str, Callable[[Any], str]]  # label, the figure's path in the section's StartupLog group, format
# (title, StartupLog group, rows): one section per group of StartupLog.
SECTIONS: Final[tuple[tuple[str, str, tuple[Row, ...]], ...]] = (
    ("Settings", "settings", (
        ("vLLM version", "vllm_version", _plain), ("engine", "engine_version", _plain),
        ("model", "model_config.model", _plain), ("max_model_len", "model_config.max_model_len", _int),
        ("tensor_parallel_size", "parallel_config.tensor_parallel_size", _int),
        ("pipeline_parallel_size", "parallel_config.pipeline_parallel_size", _int),
        ("gpu_memory_utilization", "cache_config.gpu_memory_utilization", _float),
        ("dtype", "model_config.dtype", _plain), ("quantization", "model_config.quantization", _plain),
        ("kv_cache_dtype", "cache_config.kv_cache_dtype", _plain), ("block_size", "cache_config.block_size", _int),
        ("enforce_eager", "model_config.enforce_eager", _plain),
        ("enable_prefix_caching", "cache_config.enable_prefix_caching", _plain),
        ("max_num_seqs", "scheduler_config.max_num_seqs", _int),
        ("max_num_batched_tokens", "scheduler_config.max_num_batched_tokens", _int),
        ("FlashInfer top-k/top-p sampler", "flashinfer_sampler", _plain),
    )),
    ("Memory budget (per GPU)", "memory", (
        ("total GPU memory", "total_gpu_memory_bytes", _gib), ("free at start", "free_at_init_bytes", _gib),
        ("requested (total × util)", "requested_memory_bytes", _gib),
        ("weights (load)", "weights_loaded_bytes", _gib), ("weights (profiler)", "weights_profiled_bytes", _gib),
        ("consumed (weights + non-torch)", "consumed_memory_bytes", _gib),
        ("non-torch", "non_torch_bytes", _gib), ("activation peak", "activation_peak_bytes", _gib),
        ("torch peak (V0, with weights)", "peak_torch_bytes", _gib),
        ("total non-KV", "non_kv_cache_bytes", _gib), ("free after profiling", "free_after_profile_bytes", _gib),
        ("CUDA graphs (actual)", "cuda_graph_bytes", _gib),
        ("CUDA graphs (estimate)", "cuda_graph_estimate_bytes", _gib),
        ("available KV cache", "available_kv_bytes", _gib),
        ("--kv-cache-memory to fit", "kv_cache_memory_fit_bytes", _exact),
        ("--kv-cache-memory to fill", "kv_cache_memory_full_bytes", _exact),
    )),
    ("KV capacity", "capacity", (
        ("GPU blocks", "num_gpu_blocks", _int), ("KV cache tokens", "kv_cache_tokens", _int),
        ("max concurrency", "max_concurrency", lambda x: f"{x:.2f}x"),
        ("  for tokens per request", "concurrency_max_model_len", _int),
    )),
    ("Failed start", "failure", (
        ("failure", "reason", _plain), ("KV needed", "kv_needed_bytes", _gib),
        ("KV available (error)", "kv_error_available_bytes", _gib),
        ("estimated max model len", "estimated_max_model_len", _int),
    )),
    ("Timings", "timings", (
        ("model load", "model_load_seconds", _seconds), ("memory profiling", "profile_seconds", _seconds),
        ("CUDA graph capture", "graph_capture_seconds", _seconds), ("engine init", "init_engine_seconds", _seconds),
    )),
)


def _figures(log: StartupLog) -> RenderableType:
    from rich.table import Table

    table = Table(show_header=False, box=None, pad_edge=False)
    table.add_column(style="bold", no_wrap=True)
    table.add_column()
    for title, group, rows in SECTIONS:
        values = [(label, attrgetter(path)(getattr(log, group)), fmt) for label, path, fmt in rows]
        shown = [(label, fmt(value)) for label, value, fmt in values if value is not None]
        if not shown:
            continue
        table.add_row(f"[underline]{title}[/underline]", "")
        for label, value in shown:
            table.add_row(f"  {label}", value)
    return table


TERM_LABEL: Final = {
    "total_gpu_memory": "total GPU memory", "requested_memory": "requested",
    "weights": "weights", "non_torch": "non-torch", "activation_peak": "activation peak",
    "cuda_graph": "CUDA graphs", "available_kv": "available KV cache", "num_gpu_blocks": "GPU blocks",
    "kv_cache_tokens": "KV cache tokens", "max_concurrency": "max concurrency",
}


def _format_term(x: float | None, unit: str) -> str:
    if x is None:
        return "—"
    if unit == "bytes":
        return _gib(x)
    if unit == "ratio":
        return f"{x:.2f}x"
    return f"{x:,}"


def _format_diff(x: float | None, unit: str) -> str:
    if x is None:
        return "—"
    if unit == "bytes":
        return f"{x / 2**30:+.2f} GiB"
    if unit == "ratio":
        return f"{x:+.2f}x"
    return f"{x:+,}"


def _comparison(terms: tuple[TermComparison, ...]) -> RenderableType:
    from rich.table import Table

    table = Table(title="Server vs kvplan (per GPU; Δ = kvplan − server)", title_justify="left")
    table.add_column("term", no_wrap=True)
    for name in ("server", "kvplan", "Δ", "Δ %"):
        table.add_column(name, justify="right", no_wrap=True)
    table.add_column("server figure from")
    for t in terms:
        pct = "—" if t.difference_pct is None else f"{t.difference_pct:+.1f}%"
        table.add_row(TERM_LABEL.get(t.term, t.term), _format_term(t.observed, t.unit),
                      _format_term(t.predicted, t.unit), _format_diff(t.difference, t.unit), pct,
                      t.source or "—")
    return table


def _overrides(details: tuple[Override, ...]) -> RenderableType:
    from rich.table import Table

    table = Table(title="Overrides that reproduce the server", title_justify="left")
    table.add_column("flag", no_wrap=True)
    table.add_column("bytes", justify="right", no_wrap=True)
    table.add_column("GiB", justify="right", no_wrap=True)
    table.add_column("from")
    for o in details:
        table.add_row(o.flag, f"{o.bytes}", _gib(o.bytes), o.source)
    return table


def _verification(v: Verification) -> RenderableType:
    from rich.table import Table
    from rich.text import Text

    verdict = "reproduces the server" if v.ok else "does NOT reproduce the server"
    table = Table(title=f"Check: kvplan with these overrides {verdict}", title_justify="left",
                  title_style="green" if v.ok else "bold red")
    table.add_column("figure", no_wrap=True)
    for name in ("server", "kvplan now", ""):
        table.add_column(name, justify="right", no_wrap=True)
    table.add_column("compared")
    for c in v.checks:
        mark = Text("✓", style="green") if c.matches else Text("✗", style="bold red")
        table.add_row(TERM_LABEL.get(c.term, c.term), _format_term(c.observed, c.unit),
                      _format_term(c.reproduced, c.unit), mark, c.precision)
    return table


def render_calibrate(report: CalibrationReport) -> RenderableType:
    """The human view: the log's figures, the comparison with kvplan, the overrides, their check."""
    from rich.console import Group
    from rich.text import Text

    parts: list[RenderableType] = [
        Text(f"Recognised {len(report.log.lines)} lines of {report.source}", style="dim"),
        _figures(report.log),
    ]
    if report.comparison is not None:
        settings = ", ".join(report.settings_from_log) or "none"
        parts += [Text(), Text(f"kvplan's prediction for {report.model} on {report.gpu}; settings from the log: "
                               f"{settings}", style="dim"),
                  _comparison(report.comparison)]
    if report.override_details:
        parts += [Text(), _overrides(report.override_details)]
    if report.command:
        parts += [Text("To plan the next deployment from this one:"), Text(f"  {report.command}", style="bold")]
    if report.verified is not None:
        parts += [Text(), _verification(report.verified)]
    for line in report.missing:
        parts.append(Text(f"Missing for a comparison with kvplan: {line}", style="yellow"))
    for note in report.notes:
        parts.append(Text(f"Note: {note}", style="dim"))
    return Group(*parts)
