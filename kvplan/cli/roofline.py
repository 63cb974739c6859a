"""`kvplan roofline`: how fast decode and prefill can go on a GPU, and what limits them."""
from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from kvplan.cli.options import JsonFlag, KvCacheDtype, ModelArg, Revision, TensorParallel

if TYPE_CHECKING:
    from kvplan.hardware.gpus import GpuSpec
    from kvplan.model.spec import ModelSpec
    from kvplan.vllm.report import FitReport

NAME = "roofline"
HELP = "Decode and prefill speed limits on a GPU: ridge point, tokens/s by batch, memory- or compute-bound."
EPILOG = """Examples:

  kvplan roofline Qwen/Qwen2.5-7B --gpu h100

  kvplan roofline meta-llama/Llama-3.1-70B -tp 4 --gpu h100 --context 8K --batch 1,16,64,256

  kvplan roofline Qwen/Qwen3-30B-A3B --gpu a100-80gb --kv-cache-dtype fp8 --prompt 16K --json

  kvplan roofline tests/fixtures/configs/meta-llama--Meta-Llama-3.1-8B --gpu h100 --batch 1,8,64,256
"""

DEFAULT_BATCH_LIST = "1,2,4,8,16,32,64,128,256"


def command(
    model: ModelArg,
    gpu: Annotated[str, typer.Option("--gpu", help="GPU id, alias or device name (see `kvplan gpus`).",
                                     show_default=False)],
    revision: Revision = None,
    tensor_parallel_size: TensorParallel = 1,
    kv_cache_dtype: KvCacheDtype = "auto",
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
        "--max-concurrency", help="Requests of --context tokens the KV cache holds, if measured "
        "(default: computed as `kvplan fit` does).", show_default=False)] = None,
    bandwidth_efficiency: Annotated[float | None, typer.Option(
        "--bandwidth-efficiency", help="Share of rated HBM bandwidth reached (default: the speed model's, "
        "fitted per GPU class on measured runs).", show_default=False)] = None,
    compute_efficiency: Annotated[float | None, typer.Option(
        "--compute-efficiency", help="Share of dense peak FLOP/s reached (default: the speed model's, fitted "
        "per GPU class on measured runs).", show_default=False)] = None,
    gpus_file: Annotated[Path | None, typer.Option(
        "--gpus-file", help="YAML file of GPUs to add or override (default: $KVPLAN_GPUS_FILE).",
        show_default=False)] = None,
    svg: Annotated[str | None, typer.Option("--svg", help="Also write the throughput chart as an SVG file "
                                            "(- is stdout).", show_default=False)] = None,
    json_: JsonFlag = False,
) -> None:
    """Decode and prefill speed limits: ridge point, tokens/s by batch, memory- or compute-bound."""
    from kvplan.cli.common import load_model_with_weights
    from kvplan.cli.console import err, out, print_json
    from kvplan.hardware import roofline as rl
    from kvplan.hardware.gpus import get_gpu
    from kvplan.units import parse_count

    ctx = parse_count(context, what="--context")
    batches = [parse_count(b, what="--batch", minimum=1) for b in batch.split(",") if b.strip()]
    prompt_tokens = parse_count(prompt, what="--prompt", minimum=1) if prompt is not None else max(ctx, 1)
    spec_gpu = get_gpu(gpu, gpus_file)
    spec, weights = load_model_with_weights(model, revision, quiet=json_)
    costs, roof = rl.deployment_roofline(
        spec, spec_gpu, tp=tensor_parallel_size, kv_cache_dtype=kv_cache_dtype,
        weights_bytes=weights.bytes if weights else None, bandwidth_efficiency=bandwidth_efficiency,
        compute_efficiency=compute_efficiency)
    if ctx > spec.max_model_len:
        err().print(f"warning: --context {ctx:,} exceeds the model's max_model_len {spec.max_model_len:,}")
    fit = _fit(spec, spec_gpu, tp=tensor_parallel_size, kv_cache_dtype=kv_cache_dtype, context=ctx,
               gpu_memory_utilization=gpu_memory_utilization, max_num_seqs=max_num_seqs,
               max_num_batched_tokens=max_num_batched_tokens, weights_total_bytes=weights.bytes if weights else None)
    capacity = max_concurrency
    if capacity is None and fit.fits:
        capacity = fit.preemption.max_requests_at_context
    elif capacity is None:
        err().print(f"warning: KV capacity not computed: vLLM would not start ({fit.error or fit.startup})")
    report = rl.roofline(
        costs, roof, context=ctx, batches=batches, prompt_tokens=prompt_tokens,
        max_num_batched_tokens=fit.max_num_batched_tokens, kv_capacity_batch=capacity,
        max_num_seqs=fit.max_num_seqs, gpu_flops=spec_gpu.flops,
    )
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


def _fit(
    model: ModelSpec, gpu: GpuSpec, *, tp: int, kv_cache_dtype: str, context: int,
    gpu_memory_utilization: float | None, max_num_seqs: int | None, max_num_batched_tokens: int | None,
    weights_total_bytes: int | None,
) -> FitReport:
    """The `kvplan fit` plan at these settings: KV capacity at `context`, and vLLM's resolved
    max_num_seqs and max_num_batched_tokens (capacity.plan_fit, without advice)."""
    import dataclasses

    from kvplan.cli.console import err
    from kvplan.vllm.fit import plan_fit
    from kvplan.vllm.settings import ServeSettings

    settings = ServeSettings(
        tp=tp, kv_cache_dtype=kv_cache_dtype, gpu_memory_utilization=gpu_memory_utilization,
        max_num_seqs=max_num_seqs, max_num_batched_tokens=max_num_batched_tokens,
        weights_total_bytes=weights_total_bytes, context=context,
    )
    report = plan_fit(model, gpu, settings, advise=False)
    if report.startup == "refuses: max_model_len" and 0 < context < report.max_model_len:
        # The model's full length does not fit, but requests of `context` tokens may: plan the
        # server one would run for them (vLLM's own advice: decrease max_model_len).
        err().print(f"note: the KV capacity assumes --max-model-len {context} (the model's "
                    f"{report.max_model_len:,} does not fit)")
        report = plan_fit(model, gpu, dataclasses.replace(settings, max_model_len=context), advise=False)
    return report
