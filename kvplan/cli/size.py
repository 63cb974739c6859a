"""`kvplan size`: KV bytes per token for every layer kind, and the weights' size."""
from __future__ import annotations

from typing import Annotated

import typer

from kvplan.cli.options import (
    JsonFlag,
    KvCacheDtype,
    ModelArg,
    Revision,
    SglangPipelineParallel,
    SglangTensorParallel,
    pipeline_parallel_option,
    tensor_parallel_option,
)

NAME = "size"
HELP = "KV-cache bytes per token (per layer kind, per GPU) and the weights' size of a model."
EPILOG = """Examples:

  kvplan size Qwen/Qwen2.5-7B

  kvplan size ./tests/fixtures/configs/deepseek-ai--DeepSeek-V3 --kv-cache-dtype fp8 -tp 8

  kvplan size meta-llama/Llama-3.1-8B --revision main --json

  kvplan size Qwen/Qwen3-Next-80B-A3B-Instruct --engine sglang --tp 4
"""
SizeEngineOpt = Annotated[str, typer.Option(
    "--engine", help="Whose pools: vllm (default) or sglang (SGLang 0.5.23's cell and Mamba state per GPU).")]
TensorParallel = Annotated[int | None, tensor_parallel_option(panel=None)]
PipelineParallel = Annotated[int | None, pipeline_parallel_option(panel=None)]


def command(
    model: ModelArg,
    revision: Revision = None,
    kv_cache_dtype: KvCacheDtype = "auto",
    tensor_parallel_size: TensorParallel = None,
    pipeline_parallel_size: PipelineParallel = None,
    tp_size: SglangTensorParallel = None,
    pp_size: SglangPipelineParallel = None,
    engine: SizeEngineOpt = "vllm",
    json_: JsonFlag = False,
) -> None:
    """KV-cache bytes per token and the weights' size."""
    from kvplan.cli.size_run import print_sglang_size, print_size, size_report_for  # Typer-free `kvplan size`

    if engine.lower() not in ("vllm", "sglang"):
        from kvplan.errors import InvalidParameter

        raise InvalidParameter(f"--engine must be vllm or sglang, got {engine!r}")
    tp = 1 if tensor_parallel_size is None else tensor_parallel_size  # -tp or --tp (kvplan.cli.options)
    pp = 1 if pipeline_parallel_size is None else pipeline_parallel_size
    if engine.lower() == "sglang":
        print_sglang_size(model, revision, kv_cache_dtype, tp, pp, json_=json_)
        return
    report = size_report_for(model, revision, kv_cache_dtype, tp, pp, quiet=json_)
    print_size(report, json_=json_)
