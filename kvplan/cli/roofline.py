"""`kvplan roofline`: how fast decode and prefill can go on a GPU, and what limits them."""
from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from kvplan.cli.options import (
    DEPLOYMENT_PANEL,
    JsonFlag,
    KvCacheDtypeOpt,
    Revision,
    SglangTensorParallel,
    TensorParallelOpt,
)

NAME = "roofline"
HELP = "Decode and prefill speed limits on a GPU: ridge point, tokens/s by batch, memory- or compute-bound."
EPILOG = """Examples:

  kvplan roofline Qwen/Qwen2.5-7B --gpu h100

  kvplan roofline meta-llama/Llama-3.1-70B -tp 4 --gpu h100 --context 8K --batch 1,16,64,256

  kvplan roofline Qwen/Qwen3-30B-A3B --gpu a100-80gb --kv-cache-dtype fp8 --prompt 16K --json

  kvplan roofline tests/fixtures/configs/meta-llama--Meta-Llama-3.1-8B --gpu h100 --batch 1,8,64,256

  kvplan roofline deepseek-ai/DeepSeek-R1 --gpu h200 -dp 8 --enable-expert-parallel --batch 1,64,128

  kvplan roofline --gpu h100 --vllm-cmd "vllm serve Qwen/Qwen2.5-72B -tp 4 --kv-cache-dtype fp8"
"""

DEFAULT_BATCH_LIST = "1,2,4,8,16,32,64,128,256"


def command(
    model: Annotated[str | None, typer.Argument(
        help="Hub id (org/name), a local folder with config.json, or a config.json path.", show_default=False)]
    = None,
    gpu: Annotated[str, typer.Option("--gpu", help="GPU id, alias or device name (see `kvplan gpus`).",
                                     show_default=False)] = "",
    revision: Revision = None,
    tensor_parallel_size: TensorParallelOpt = None,
    tp_size: SglangTensorParallel = None,  # SGLang's --tp / --tp-size: their value is tensor_parallel_size's
    data_parallel_size: Annotated[int | None, typer.Option(
        "--data-parallel-size", "-dp", help="Data-parallel ranks, each its own requests and KV cache (default 1): "
        "--batch is per rank.", show_default=False, rich_help_panel=DEPLOYMENT_PANEL)] = None,
    enable_expert_parallel: Annotated[bool | None, typer.Option(
        "--enable-expert-parallel/--no-enable-expert-parallel", "-ep", help="Experts spread whole over TP × DP "
        "ranks; with -dp, attention data parallelism (DeepSeek-style).", show_default=False,
        rich_help_panel=DEPLOYMENT_PANEL)] = None,
    kv_cache_dtype: KvCacheDtypeOpt = None,
    quantization: Annotated[str | None, typer.Option(
        "--quantization", "-q", help="vLLM's --quantization (e.g. fp8 on an unquantized checkpoint).",
        show_default=False, rich_help_panel=DEPLOYMENT_PANEL)] = None,
    vllm_cmd: Annotated[str | None, typer.Option(
        "--vllm-cmd", help='A pasted `vllm serve MODEL …` line: its deployment, as `kvplan fit` reads it (flags '
        "given here win).", show_default=False, rich_help_panel=DEPLOYMENT_PANEL)] = None,
    context: Annotated[str, typer.Option(
        "--context", help="Tokens of context per decoding request (4096; 32k = 32,000, 32K = 32,768).")]
    = "4096",
    batch: Annotated[str, typer.Option("--batch", help="Comma-separated decode batch sizes (concurrent requests).")]
    = DEFAULT_BATCH_LIST,
    prompt: Annotated[str | None, typer.Option("--prompt", help="Prompt tokens for the prefill estimate "
                                               "(default: --context).", show_default=False)] = None,
    max_num_batched_tokens: Annotated[int | None, typer.Option(
        "--max-num-batched-tokens", help="Prefill chunk size (default: vLLM's for this GPU).",
        show_default=False)] = None,
    max_num_seqs: Annotated[int | None, typer.Option(
        "--max-num-seqs", help="Most requests vLLM runs at once (default: vLLM's for this GPU).",
        show_default=False)] = None,
    gpu_memory_utilization: Annotated[float | None, typer.Option(
        "--gpu-memory-utilization", help="Share of GPU memory vLLM may use, for the KV capacity (default: vLLM's).",
        show_default=False)] = None,
    max_concurrency: Annotated[int | None, typer.Option(
        "--max-concurrency", min=0, help="Requests of --context tokens the KV cache holds, if measured "
        "(default: computed as `kvplan fit` does).", show_default=False)] = None,
    bandwidth_efficiency: Annotated[float | None, typer.Option(
        "--bandwidth-efficiency", help="Share of rated HBM bandwidth reached (default: the speed model's, "
        "fitted per GPU class on measured runs).", show_default=False)] = None,
    compute_efficiency: Annotated[float | None, typer.Option(
        "--compute-efficiency", help="Share of dense peak FLOP/s reached (default: the speed model's, fitted "
        "per GPU class on measured runs).", show_default=False)] = None,
    aiter: Annotated[bool | None, typer.Option(
        "--aiter/--no-aiter", help="AMD GPUs: aiter installed, as in vLLM's ROCm images (default), or a bare pip "
        "install; as `kvplan fit` takes it (it sets the attention backend, so the block size and KV capacity).",
        show_default=False, rich_help_panel=DEPLOYMENT_PANEL)] = None,
    gpus_file: Annotated[Path | None, typer.Option(
        "--gpus-file", help="YAML file of GPUs to add or override (default: $KVPLAN_GPUS_FILE).",
        show_default=False)] = None,
    svg: Annotated[str | None, typer.Option("--svg", help="Also write the throughput chart as an SVG file "
                                            "(- is stdout).", show_default=False)] = None,
    engine: Annotated[str, typer.Option(
        "--engine", help="Whose KV capacity and running-request cap: vllm (default) or sglang (SGLang 0.5.23's "
        "pool, max_running_requests and chunked_prefill_size; the speed model is the same).")] = "vllm",
    json_: JsonFlag = False,
) -> None:
    """Decode and prefill speed limits: ridge point, tokens/s by batch, memory- or compute-bound."""
    from kvplan import api
    from kvplan.cli.common import load_model_with_weights, notice, warn
    from kvplan.cli.console import out, print_json
    from kvplan.hardware.gpus import get_gpu
    from kvplan.vllm.loading import LoadedModel

    query = api.roofline_query(gpu, context, batch, prompt)
    given: dict[str, object] = {
        "tensor_parallel_size": tensor_parallel_size, "data_parallel_size": data_parallel_size,
        "enable_expert_parallel": enable_expert_parallel, "kv_cache_dtype": kv_cache_dtype,
        "quantization": quantization, "max_num_batched_tokens": max_num_batched_tokens,
        "max_num_seqs": max_num_seqs, "gpu_memory_utilization": gpu_memory_utilization, "rocm_aiter": aiter}
    settings, model, revision = api.roofline_deployment(model, vllm_cmd, given, revision)
    chip = get_gpu(query.gpu, gpus_file)
    spec, weights = load_model_with_weights(model, revision, quiet=json_)
    report = api.roofline_plan(LoadedModel(spec, weights, None), settings, query, chip, engine=engine,
                               max_concurrency=max_concurrency, bandwidth_efficiency=bandwidth_efficiency,
                               compute_efficiency=compute_efficiency, given=given, on_warning=warn,
                               on_note=lambda text: notice(text, "Note"))
    if svg is not None:
        from kvplan.files import write_output
        from kvplan.render.roofline import chart_svg

        write_output(svg, chart_svg(report), what="--svg")
    if json_:
        from kvplan.render.json import dumps

        print_json(dumps("roofline", report))
        return
    from kvplan.render.roofline import render_roofline

    out().print(render_roofline(report))
