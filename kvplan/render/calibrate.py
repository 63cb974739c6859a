"""Rich rendering of `kvplan calibrate`: what the startup log showed, grouped, and the comparison
with kvplan's prediction once there is one. Renderers only format."""
from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Final

from kvplan.units import format_bytes

if TYPE_CHECKING:
    from rich.console import RenderableType

    from kvplan.calibration import CalibrationReport, TermComparison
    from kvplan.startup_log import StartupLog


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


Row = tuple[str, str, Callable[[Any], str]]
SECTIONS: Final[tuple[tuple[str, tuple[Row, ...]], ...]] = (
    ("Settings", (
        ("vLLM version", "vllm_version", _plain), ("engine", "engine_version", _plain), ("model", "model", _plain),
        ("max_model_len", "max_model_len", _int), ("tensor_parallel_size", "tensor_parallel_size", _int),
        ("pipeline_parallel_size", "pipeline_parallel_size", _int),
        ("gpu_memory_utilization", "gpu_memory_utilization", _float), ("dtype", "dtype", _plain),
        ("quantization", "quantization", _plain), ("kv_cache_dtype", "kv_cache_dtype", _plain),
        ("block_size", "block_size", _int), ("enforce_eager", "enforce_eager", _plain),
        ("enable_prefix_caching", "enable_prefix_caching", _plain), ("max_num_seqs", "max_num_seqs", _int),
        ("max_num_batched_tokens", "max_num_batched_tokens", _int),
    )),
    ("Memory budget (per GPU)", (
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
    ("KV capacity", (
        ("GPU blocks", "num_gpu_blocks", _int), ("KV cache tokens", "kv_cache_tokens", _int),
        ("max concurrency", "max_concurrency", lambda x: f"{x:.2f}x"),
        ("  for tokens per request", "concurrency_max_model_len", _int),
    )),
    ("Failed start", (
        ("failure", "failure", _plain), ("KV needed", "kv_needed_bytes", _gib),
        ("KV available (error)", "kv_error_available_bytes", _gib),
        ("estimated max model len", "estimated_max_model_len", _int),
    )),
    ("Timings", (
        ("model load", "model_load_seconds", _seconds), ("memory profiling", "profile_seconds", _seconds),
        ("CUDA graph capture", "graph_capture_seconds", _seconds), ("engine init", "init_engine_seconds", _seconds),
    )),
)


def _figures(log: StartupLog) -> RenderableType:
    from rich.table import Table

    table = Table(show_header=False, box=None, pad_edge=False)
    table.add_column(style="bold", no_wrap=True)
    table.add_column()
    for title, rows in SECTIONS:
        shown = [(label, fmt(getattr(log, attr))) for label, attr, fmt in rows if getattr(log, attr) is not None]
        if not shown:
            continue
        table.add_row(f"[underline]{title}[/underline]", "")
        for label, value in shown:
            table.add_row(f"  {label}", value)
    return table


def _format_term(x: int | None, unit: str) -> str:
    if x is None:
        return "—"
    return _gib(x) if unit == "bytes" else f"{x:,}"


def _comparison(terms: tuple[TermComparison, ...]) -> RenderableType:
    from rich.table import Table

    table = Table(title="Server vs kvplan", title_justify="left")
    for name in ("term", "server", "kvplan", "kvplan − server"):
        table.add_column(name, justify="left" if name == "term" else "right")
    for t in terms:
        diff = t.difference
        table.add_row(t.term, _format_term(t.observed, t.unit), _format_term(t.predicted, t.unit),
                      "—" if diff is None else (f"{diff / 2**30:+.2f} GiB" if t.unit == "bytes" else f"{diff:+,}"))
    return table


def render_calibrate(report: CalibrationReport) -> RenderableType:
    """The human view: the figures and settings the log revealed, then the comparison when present."""
    from rich.console import Group
    from rich.text import Text

    parts: list[RenderableType] = [
        Text(f"Recognised {len(report.log.lines)} lines of {report.source}", style="dim"),
        _figures(report.log),
    ]
    if report.comparison is not None:
        parts += [Text(), _comparison(report.comparison)]
    if report.overrides:
        parts += [Text(), Text("To reproduce the server: kvplan … " + " ".join(report.overrides))]
    return Group(*parts)
