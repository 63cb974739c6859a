"""`kvplan size`: KV bytes per token for every layer kind, and the weights' size."""
from __future__ import annotations

from kvplan.cli.options import JsonFlag, KvCacheDtype, ModelArg, PipelineParallel, Revision, TensorParallel

NAME = "size"
HELP = "KV-cache bytes per token (per layer kind, per GPU) and the weights' size of a model."
EPILOG = """Examples:

  kvplan size Qwen/Qwen2.5-7B

  kvplan size ./tests/fixtures/configs/deepseek-ai--DeepSeek-V3 --kv-cache-dtype fp8 -tp 8

  kvplan size meta-llama/Llama-3.1-8B --revision main --json
"""


def command(
    model: ModelArg,
    revision: Revision = None,
    kv_cache_dtype: KvCacheDtype = "auto",
    tensor_parallel_size: TensorParallel = 1,
    pipeline_parallel_size: PipelineParallel = 1,
    json_: JsonFlag = False,
) -> None:
    """KV-cache bytes per token and the weights' size."""
    from kvplan.cli.size_run import print_size, size_report_for  # shared with the Typer-free `kvplan size`

    report = size_report_for(model, revision, kv_cache_dtype, tensor_parallel_size, pipeline_parallel_size,
                             quiet=json_)
    print_size(report, json_=json_)
