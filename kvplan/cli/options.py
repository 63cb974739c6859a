"""Options shared by several commands, declared once with vLLM's names and defaults."""
from __future__ import annotations

from typing import Annotated

import typer

ModelArg = Annotated[str, typer.Argument(
    help="Hub id (org/name), a local folder with config.json, or a config.json path.", show_default=False)]
Revision = Annotated[str | None, typer.Option("--revision", help="Hub branch, tag or commit.")]
KvCacheDtype = Annotated[str, typer.Option(
    "--kv-cache-dtype",
    help="auto (model dtype or the checkpoint's KV scheme), bfloat16, float16, fp8, fp8_e4m3, fp8_e5m2.")]
TensorParallel = Annotated[int, typer.Option("--tensor-parallel-size", "-tp", help="Tensor-parallel GPUs.")]
PipelineParallel = Annotated[int, typer.Option("--pipeline-parallel-size", "-pp", help="Pipeline stages.")]
JsonFlag = Annotated[bool, typer.Option("--json", help="Print the result as JSON (stable schema) on stdout.")]

# The deployment flags of `kvplan fit` (vLLM's names; None = vLLM's default, as in capacity.ServeSettings),
# for commands that plan a deployment with fit's helper (`kvplan simulate … --model M --gpu G`).
DEPLOYMENT_PANEL = "Deployment (vLLM's flags)"
ModelOpt = Annotated[str | None, typer.Option(
    "--model", help="Size the run from a deployment: hub id, local folder or config.json (with --gpu).",
    show_default=False, rich_help_panel=DEPLOYMENT_PANEL)]
GpuOpt = Annotated[str | None, typer.Option(
    "--gpu", "-g", help="GPU from the catalog (`kvplan gpus`).", show_default=False, rich_help_panel=DEPLOYMENT_PANEL)]
GpusFileOpt = Annotated[str | None, typer.Option(
    "--gpus-file", help="Extra GPU catalog YAML (or $KVPLAN_GPUS_FILE).", show_default=False,
    rich_help_panel=DEPLOYMENT_PANEL)]
RevisionOpt = Annotated[str | None, typer.Option(
    "--revision", help="Hub branch, tag or commit.", show_default=False, rich_help_panel=DEPLOYMENT_PANEL)]
TensorParallelOpt = Annotated[int | None, typer.Option(
    "--tensor-parallel-size", "-tp", help="Tensor-parallel GPUs (default 1).", show_default=False,
    rich_help_panel=DEPLOYMENT_PANEL)]
PipelineParallelOpt = Annotated[int | None, typer.Option(
    "--pipeline-parallel-size", "-pp", help="Pipeline stages (default 1).", show_default=False,
    rich_help_panel=DEPLOYMENT_PANEL)]
GpuMemoryUtilizationOpt = Annotated[float | None, typer.Option(
    "--gpu-memory-utilization", "--device-memory-utilization",
    help="Fraction of GPU memory for vLLM (default: 0.92; 0.9 before vLLM 0.20).",
    show_default=False, rich_help_panel=DEPLOYMENT_PANEL)]
KvCacheDtypeOpt = Annotated[str | None, typer.Option(
    "--kv-cache-dtype", help="auto, bfloat16, float16, fp8, fp8_e4m3, fp8_e5m2 (default: auto).",
    show_default=False, rich_help_panel=DEPLOYMENT_PANEL)]
KvCacheMemoryBytesOpt = Annotated[str | None, typer.Option(
    "--kv-cache-memory-bytes", "--kv-cache-memory",
    help="KV cache size per GPU, e.g. 20GiB; replaces the memory profile, as in vLLM.",
    show_default=False, rich_help_panel=DEPLOYMENT_PANEL)]
EnforceEagerOpt = Annotated[bool | None, typer.Option(
    "--enforce-eager/--no-enforce-eager", help="No CUDA graphs (no graph memory).", show_default=False,
    rich_help_panel=DEPLOYMENT_PANEL)]
