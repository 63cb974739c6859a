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
