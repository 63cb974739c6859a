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
    from kvplan.cli.common import load_model_with_weights
    from kvplan.cli.console import out, print_json
    from kvplan.model.size import size_report

    spec, weights = load_model_with_weights(model, revision, quiet=json_)
    report = size_report(
        spec, tp=tensor_parallel_size, pp=pipeline_parallel_size, kv_cache_dtype=kv_cache_dtype,
        weights_bytes=weights.bytes if weights else None,
        weights_source="safetensors metadata" if weights else "analytic parameter count",
    )
    from dataclasses import replace

    from kvplan.vllm.architectures import not_served_reason
    from kvplan.vllm.defaults import LATEST

    reason = not_served_reason(spec.architectures, LATEST)
    if reason is not None:  # sized all the same: an older vLLM may serve it
        report = replace(report, notes=(*report.notes, reason))
    if json_:
        from kvplan.render.json import dumps

        print_json(dumps("size", report))
    else:
        from kvplan.render.size import render_size

        out().print(render_size(report))
