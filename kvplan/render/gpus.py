"""Rich renderings of the GPU catalog (`kvplan gpus`). Formatting only: every number comes from GpuSpec."""
from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rich.console import RenderableType

    from kvplan.hardware.gpus import GpuSpec

_GIB = 2**30
_MIB = 2**20
_NONE = "—"


def _tflops(spec: GpuSpec, dtype: str) -> str:
    value = spec.flops.get(dtype)
    return _NONE if value is None else f"{value / 1e12:,.1f}"


def _tb_per_s(value: float | None) -> str:
    return _NONE if value is None else f"{value / 1e12:.2f}"


def _ridge(spec: GpuSpec) -> tuple[str, bool]:
    """BF16 ridge point text, and whether it used another dtype's figure (marked with *)."""
    if spec.memory_bandwidth_bytes_per_s is None or not spec.flops:
        return _NONE, False
    resolved = spec.resolve_flops("bf16")
    text = f"{spec.ridge_point('bf16'):,.0f}"
    return (text + "*", True) if resolved.is_fallback else (text, False)


def gpu_data(spec: GpuSpec) -> dict[str, object]:
    """One GPU as `kvplan gpus --json` lists it: every GpuSpec field, and after compute_capability the architecture
    kvplan derives from it (GpuSpec.arch: hopper, blackwell, ampere, ada, cdna3, …; "unknown" when not known), which
    picks vLLM's attention backend and block size (a key added within schema_version 2: docs/json-schema.md)."""
    from kvplan.render.json import to_data

    data: dict[str, object] = {}
    for key, value in to_data(spec).items():
        data[key] = value
        if key == "compute_capability":
            data["arch"] = spec.arch
    return data


def catalog_table(specs: Sequence[GpuSpec]) -> RenderableType:
    """One row per GPU: memory, CUDA total, bandwidth, dense BF16/FP8/FP4 TFLOPS, BF16 ridge point.

    The name sits under the id and numbers keep their width: at 80 columns (a pipe, a CI log) it is a
    table; narrower, each GPU is stacked as lines of text (TableOrStack), so no number is ever cut."""
    from rich.console import Group
    from rich.padding import Padding
    from rich.table import Table
    from rich.text import Text

    from kvplan.render.layout import TableOrStack

    title = "GPU catalog (dense tensor throughput, no sparsity)"
    table = Table(title=title, title_justify="left")
    table.add_column("id / name", overflow="fold", ratio=1)
    headers = ("memory\nGB", "CUDA\nGiB", "TB/s", "BF16\nTFLOPS", "FP8\nTFLOPS", "FP4\nTFLOPS", "ridge")
    for header in headers:
        table.add_column(header, justify="right", no_wrap=True)
    any_fallback = False
    rows = []
    for spec in specs:
        ridge, fallback = _ridge(spec)
        any_fallback |= fallback
        figures = (f"{spec.memory_gb:g}", f"{spec.cuda_total_bytes / _GIB:.2f}",
                   _tb_per_s(spec.memory_bandwidth_bytes_per_s), _tflops(spec, "bf16"), _tflops(spec, "fp8"),
                   _tflops(spec, "fp4"), ridge)
        rows.append((spec, figures))
        ident = Text(spec.id, style="bold")
        ident.append("\n" + spec.name, style="dim")
        table.add_row(ident, *figures)
    notes = ["CUDA GiB = cudaMemGetInfo total, what --gpu-memory-utilization multiplies. TB/s = memory "
             "bandwidth. ridge = BF16 FLOP per byte of bandwidth."]
    if any_fallback:
        notes.append("* FP16 figure: the GPU has no BF16 tensor cores.")
    table.caption = " ".join(notes)
    table.caption_justify = "left"

    def stacked() -> RenderableType:
        parts: list[RenderableType] = [Text(title, style="italic")]
        labels = [h.replace("\n", " ") for h in headers]
        for spec, figures in rows:
            head = Text(spec.id, style="bold")
            head.append(f"  {spec.name}", style="dim")
            parts.append(head)
            parts.append(Padding(Text(", ".join(f"{label} {value}" for label, value in zip(labels, figures,
                                                                                           strict=True))),
                                 (0, 0, 0, 2)))
        parts.append(Text(" ".join(notes), style="dim"))
        return Group(*parts)

    return TableOrStack(table, stacked)


def gpu_detail(spec: GpuSpec) -> RenderableType:
    """Every figure of one GPU, each followed by its source."""
    from rich.table import Table
    from rich.text import Text

    table = Table(title=f"{spec.name} ({spec.id})", title_justify="left", show_lines=True)
    table.add_column("figure", no_wrap=True)
    table.add_column("value and source", overflow="fold")

    def row(label: str, value: str, key: str | None = None) -> None:
        cell = Text(value)
        source = spec.sources.get(key) if key else None
        if source:
            cell.append("\n" + source, style="dim")  # Text, not markup: sources may hold brackets
        table.add_row(label, cell)

    row("aliases", ", ".join(spec.aliases) or _NONE)
    row("device names", ", ".join(spec.device_names) or _NONE)
    row("vendor / arch", f"{spec.vendor} / {spec.arch}")
    row("vLLM platform", f"{spec.platform} (vllm/platforms/{spec.platform}.py rules)")
    row("memory", f"{spec.memory_gb:g} GB", "memory_gb")
    cuda, nvml = spec.cuda_total_bytes, spec.nvml_total_bytes
    row("CUDA total", f"{cuda:,} B ({cuda / _GIB:.2f} GiB)", "cuda_total_bytes")
    row("NVML total", f"{nvml:,} B ({nvml / _MIB:,.0f} MiB)", "nvml_total_bytes")
    bandwidth = _tb_per_s(spec.memory_bandwidth_bytes_per_s)
    row("memory bandwidth", f"{bandwidth} TB/s", "memory_bandwidth_bytes_per_s")
    for dtype, value in spec.flops.items():
        row(f"{dtype.upper()} dense", f"{value / 1e12:,.1f} TFLOPS", f"flops.{dtype}")
    row("compute capability", spec.compute_capability or _NONE, "compute_capability")
    if spec.interconnect_bytes_per_s is not None:
        row("interconnect", f"{spec.interconnect_bytes_per_s / 1e9:,.0f} GB/s", "interconnect_bytes_per_s")
    return table
