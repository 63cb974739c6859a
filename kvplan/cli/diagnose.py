"""`kvplan diagnose`: read a running vLLM server's /metrics and say what limits it."""
from __future__ import annotations

from typing import Annotated, Any

import typer

from kvplan.cli.options import (
    SglangPipelineParallel,
    SglangTensorParallel,
    pipeline_parallel_option,
    tensor_parallel_option,
)

NAME = "diagnose"
HELP = "Read a vLLM server's /metrics (live or saved) and diagnose KV shortage, batch limits, prefix-cache misses."
EPILOG = (
    "Examples:\n\n"
    "  kvplan diagnose http://localhost:8000/metrics\n\n"
    "  kvplan diagnose http://localhost:8000 --interval 30 --kv-high 0.95\n\n"
    "  curl -s localhost:8000/metrics > m.txt && kvplan diagnose m.txt --json\n\n"
    "  kvplan diagnose http://localhost:8000 --plan Qwen/Qwen2.5-7B --gpu h100 --max-model-len 32768\n\n"
    "  kvplan diagnose examples/metrics.prom"
)


_PLAN_PANEL = "--plan (kvplan's prediction)"


def _plan_opt(help_: str, *names: str) -> Any:
    return typer.Option(*names, help=help_, show_default=False, rich_help_panel=_PLAN_PANEL)


def command(
    source: Annotated[str, typer.Argument(
        metavar="URL|FILE", help="The server's metrics URL (http://host:8000/metrics; a bare host:port URL gets "
        "/metrics) or a saved Prometheus text file.")],
    interval: Annotated[float | None, typer.Option(
        "--interval", metavar="S", help="Scrape twice, S seconds apart, to turn counters into rates and "
        "quantiles into those of the window (URL only).")] = None,
    timeout: Annotated[float, typer.Option("--timeout", metavar="S", help="Seconds to wait for the server.")] = 5.0,
    kv_high: Annotated[float, typer.Option(
        "--kv-high", help="KV cache usage (0–1) at or above which the cache counts as full.")] = 0.9,
    hit_rate_low: Annotated[float, typer.Option(
        "--hit-rate-low", help="Prefix-cache hit rate (0–1) below which sharing is judged broken.")] = 0.1,
    min_prefix_queries: Annotated[int, typer.Option(
        "--min-prefix-queries", help="Prompt tokens looked up in the prefix cache before the hit rate is "
        "judged.")] = 1000,
    queue_p95_high: Annotated[float, typer.Option(
        "--queue-p95-high", metavar="S", help="Queue-time p95 (seconds) above which high_queue_time is "
        "reported.")] = 1.0,
    max_num_seqs: Annotated[int | None, typer.Option(
        "--max-num-seqs", help="The server's --max-num-seqs, if known: tells which batch limit binds.")] = None,
    plan: Annotated[str | None, typer.Option(
        "--plan", metavar="MODEL", help="Compare the server's num_gpu_blocks with kvplan's prediction for "
        "MODEL (with --gpu); utilization, KV dtype and block size come from the server's cache_config_info.")] = None,
    gpu: Annotated[str | None, typer.Option("--gpu", "-g", help="The GPU for --plan (`kvplan gpus`).")] = None,
    gpu_memory: Annotated[str | None, _plan_opt("Custom GPU for --plan: its cudaMemGetInfo total.",
                                                "--gpu-memory")] = None,
    gpu_total_bytes: Annotated[str | None, _plan_opt("Override the GPU's cudaMemGetInfo total (as measured).",
                                                     "--gpu-total-bytes")] = None,
    gpus_file: Annotated[str | None, _plan_opt("Extra GPU catalog YAML.", "--gpus-file")] = None,
    gpu_link: Annotated[str | None, _plan_opt("How the server's GPUs reach each other: nvlink or pcie (as fit's).",
                                              "--gpu-link")] = None,
    tensor_parallel_size: Annotated[int | None, tensor_parallel_option("The server's tensor-parallel size.",
                                                                       _PLAN_PANEL)] = None,
    pipeline_parallel_size: Annotated[int | None, pipeline_parallel_option("The server's pipeline stages.",
                                                                           _PLAN_PANEL)] = None,
    tp_size: SglangTensorParallel = None,  # SGLang's --tp / --tp-size: their value is tensor_parallel_size's
    pp_size: SglangPipelineParallel = None,
    max_model_len: Annotated[str | None, _plan_opt("The server's --max-model-len.", "--max-model-len")] = None,
    max_num_batched_tokens: Annotated[str | None, _plan_opt("The server's --max-num-batched-tokens.",
                                                            "--max-num-batched-tokens")] = None,
    gpu_memory_utilization: Annotated[float | None, _plan_opt(
        "When cache_config_info does not show it.", "--gpu-memory-utilization")] = None,
    kv_cache_dtype: Annotated[str | None, _plan_opt("When cache_config_info does not show it.",
                                                    "--kv-cache-dtype")] = None,
    block_size: Annotated[int | None, _plan_opt("When cache_config_info does not show it.", "--block-size")] = None,
    enforce_eager: Annotated[bool | None, _plan_opt("The server runs without CUDA graphs.",
                                                    "--enforce-eager/--no-enforce-eager")] = None,
    vllm_version: Annotated[str | None, _plan_opt("The server's vLLM release (default: 0.33).",
                                                  "--vllm-version")] = None,
    weights_memory: Annotated[str | None, _plan_opt("Measured weights per GPU.", "--weights-memory")] = None,
    activation_memory: Annotated[str | None, _plan_opt("Measured activation peak.", "--activation-memory")] = None,
    non_torch_memory: Annotated[str | None, _plan_opt("Measured non-torch memory.", "--non-torch-memory")] = None,
    cuda_graph_memory: Annotated[str | None, _plan_opt("Measured CUDA-graph estimate.",
                                                       "--cuda-graph-memory")] = None,
    revision: Annotated[str | None, _plan_opt("Hub branch, tag or commit of MODEL.", "--revision")] = None,
    json_output: Annotated[bool, typer.Option("--json", help="Print the result as JSON.")] = False,
) -> None:
    """Read a vLLM server's /metrics (live or saved) and diagnose what limits it."""
    from kvplan import api
    from kvplan.cli.common import load_model_with_weights
    from kvplan.cli.console import err, out, print_json
    from kvplan.render.diagnose import render_diagnose
    from kvplan.render.json import dumps
    from kvplan.vllm.loading import LoadedModel

    plan_args: dict[str, object] = {
        "gpu": gpu, "gpu_memory": gpu_memory, "gpu_total_bytes": gpu_total_bytes, "gpus_file": gpus_file,
        "gpu_link": gpu_link,
        "tensor_parallel_size": tensor_parallel_size, "pipeline_parallel_size": pipeline_parallel_size,
        "max_model_len": max_model_len, "max_num_batched_tokens": max_num_batched_tokens,
        "gpu_memory_utilization": gpu_memory_utilization, "kv_cache_dtype": kv_cache_dtype,
        "block_size": block_size, "enforce_eager": enforce_eager, "vllm_version": vllm_version,
        "weights_memory": weights_memory, "activation_memory": activation_memory,
        "non_torch_memory": non_torch_memory, "cuda_graph_memory": cuda_graph_memory, "revision": revision,
    }
    thresholds = api.check_diagnose_options(plan, plan_args, interval=interval, timeout=timeout, kv_high=kv_high,
                                            hit_rate_low=hit_rate_low, min_prefix_queries=min_prefix_queries,
                                            queue_p95_high=queue_p95_high, max_num_seqs=max_num_seqs)
    report = api.diagnose_metrics(source, thresholds, interval=interval, timeout=timeout, on_warning=err().print)
    if plan is not None:
        options = {**plan_args, "max_num_seqs": max_num_seqs}
        settings = api.diagnose_plan_settings(options)
        spec, weights = load_model_with_weights(plan, revision, quiet=json_output)
        report = api.diagnose_with_plan(report, LoadedModel(spec, weights, None), settings, options)
    if json_output:
        print_json(dumps("diagnose", report))
    else:
        out().print(render_diagnose(report))
