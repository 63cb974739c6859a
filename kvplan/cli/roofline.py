"""`kvplan roofline`: how fast decode and prefill can go on a GPU, and what limits them."""
from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from kvplan.cli.options import DEPLOYMENT_PANEL, JsonFlag, KvCacheDtypeOpt, Revision, TensorParallelOpt

if TYPE_CHECKING:
    from kvplan.hardware.gpus import GpuSpec
    from kvplan.hardware.model_costs import ModelCosts
    from kvplan.hardware.roofline import Roof, SpeculativePoint
    from kvplan.model.spec import ModelSpec
    from kvplan.vllm.report import FitReport
    from kvplan.vllm.settings import ServeSettings

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
    from kvplan.cli.common import load_model_with_weights, notice
    from kvplan.cli.console import out, print_json
    from kvplan.errors import InvalidParameter
    from kvplan.hardware import roofline as rl
    from kvplan.hardware.gpus import get_gpu
    from kvplan.units import parse_count
    from kvplan.vllm.architectures import served_quantization_methods
    from kvplan.vllm.loading import with_stored_weights
    from kvplan.vllm.quantization import apply_quantization

    if not gpu:
        raise InvalidParameter("--gpu is needed: the GPU whose roofs to use (see `kvplan gpus`)")
    ctx = parse_count(context, what="--context")
    batches = [parse_count(b, what="--batch", minimum=1) for b in batch.split(",") if b.strip()]
    prompt_tokens = parse_count(prompt, what="--prompt", minimum=1) if prompt is not None else max(ctx, 1)
    settings, model, revision = _deployment(model, vllm_cmd, {
        "tensor_parallel_size": tensor_parallel_size, "data_parallel_size": data_parallel_size,
        "enable_expert_parallel": enable_expert_parallel, "kv_cache_dtype": kv_cache_dtype,
        "quantization": quantization, "max_num_batched_tokens": max_num_batched_tokens,
        "max_num_seqs": max_num_seqs, "gpu_memory_utilization": gpu_memory_utilization, "revision": revision,
        "rocm_aiter": aiter})
    spec_gpu = get_gpu(gpu, gpus_file)
    spec, weights = load_model_with_weights(model, revision, quiet=json_)
    spec = apply_quantization(spec, settings.quantization, served_quantization_methods())
    costs, roof = rl.deployment_roofline(
        spec, spec_gpu, tp=settings.tp, kv_cache_dtype=settings.kv_cache_dtype,
        weights_bytes=weights.bytes if weights else None, bandwidth_efficiency=bandwidth_efficiency,
        compute_efficiency=compute_efficiency, dp=settings.data_parallel_size,
        expert_parallel=settings.enable_expert_parallel)
    if ctx > spec.max_model_len:
        notice(f"--context {ctx:,} exceeds the model's max_model_len {spec.max_model_len:,}")
    settings = with_stored_weights(settings, weights)
    if engine.lower() not in ("vllm", "sglang"):
        raise InvalidParameter(f"--engine must be vllm or sglang, got {engine!r}")
    if engine.lower() == "sglang":
        _refuse_vllm_only(max_num_seqs=max_num_seqs, max_num_batched_tokens=max_num_batched_tokens,
                          gpu_memory_utilization=gpu_memory_utilization, settings=settings)
        capacity, chunk, running = _sglang_caps(spec, spec_gpu, settings, ctx, weights.bytes if weights else None)
        capacity = max_concurrency if max_concurrency is not None else capacity
    else:
        fit = _fit(spec, spec_gpu, dataclasses.replace(settings, context=ctx))
        capacity, chunk, running = max_concurrency, fit.max_num_batched_tokens, fit.max_num_seqs
        if capacity is None and fit.fits:
            capacity = fit.preemption.max_requests_at_context
        elif capacity is None:
            notice(f"KV capacity not computed: vLLM would not start ({fit.error or fit.startup})")
    report = rl.roofline(
        costs, roof, context=ctx, batches=batches, prompt_tokens=prompt_tokens,
        max_num_batched_tokens=chunk, kv_capacity_batch=capacity, max_num_seqs=running, gpu_flops=spec_gpu.flops,
    )
    report = dataclasses.replace(
        report, notes=report.notes + rl.unmodelled_settings(pp=settings.pp, enforce_eager=settings.enforce_eager),
        speculative=_speculative(costs, roof, settings, batches, ctx), engine=engine.lower())
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


def _speculative(costs: ModelCosts, roof: Roof, settings: ServeSettings, batches: list[int],
                 context: int) -> tuple[SpeculativePoint, ...]:
    """Decode with the deployment's --speculative-config at each batch (none without one)."""
    from kvplan.hardware import roofline as rl
    from kvplan.hardware.model_costs import model_costs
    from kvplan.vllm.speculative import speculative_method

    if not settings.speculative_config:
        return ()
    method = speculative_method(settings.speculative_config)
    drafted = int(settings.speculative_config.get("num_speculative_tokens") or 1)
    draft = (model_costs(settings.speculative_draft, tp=settings.tp, kv_cache_dtype=settings.kv_cache_dtype)
             if settings.speculative_draft is not None else None)
    return tuple(rl.speculative_point(costs, roof, b, context, method=method, drafted=drafted, draft=draft)
                 for b in sorted(set(batches)))


def _deployment(
    model: str | None, vllm_cmd: str | None, given: dict[str, object]
) -> tuple[ServeSettings, str, str | None]:
    """The deployment as `kvplan fit` reads it (its settings, the model, the revision): these flags, then a
    pasted `vllm serve` line's (flags win)."""
    import os

    from kvplan.errors import InvalidParameter
    from kvplan.vllm.environment import vllm_environment
    from kvplan.vllm.flags import settings_from_flags

    pasted_env: dict[str, str] = {}
    if vllm_cmd is not None:
        from kvplan.vllm.command_line import parse_vllm_command

        parsed = parse_vllm_command(vllm_cmd)
        pasted_env = parsed.env
        given = {**{k: v for k, v in parsed.options.items() if given.get(k) is None},
                 **{k: v for k, v in given.items() if v is not None}}
        model = model or parsed.model
    if not model:
        raise InvalidParameter('a model is needed: kvplan roofline MODEL (or --vllm-cmd "vllm serve MODEL …")')
    texts: dict[str, object] = {k: (v if isinstance(v, (str, bool)) else str(v)) for k, v in given.items()
                                if v is not None}
    settings = settings_from_flags(texts, None, None, None, None, None, None, None, None,
                                   env=vllm_environment({**os.environ, **pasted_env}))
    revision = texts.get("revision")
    return settings, model, revision if isinstance(revision, str) else None


def _refuse_vllm_only(*, max_num_seqs: int | None, max_num_batched_tokens: int | None,
                      gpu_memory_utilization: float | None, settings: ServeSettings) -> None:
    """`--engine sglang` takes its caps and chunk from SGLang's rules: a vLLM setting that would be silently
    replaced by SGLang's is refused, and so is a speculative draft (SGLang's is not modelled: kvplan/sglang/fit.py)."""
    from kvplan.errors import InvalidParameter

    for flag, value in (("--max-num-seqs", max_num_seqs), ("--max-num-batched-tokens", max_num_batched_tokens),
                        ("--gpu-memory-utilization", gpu_memory_utilization)):
        if value is not None:
            raise InvalidParameter(f"{flag} is a vLLM flag: --engine sglang takes SGLang's running-request cap, "
                                   "prefill chunk and memory fraction", hint="drop it, or use --engine vllm")
    if settings.speculative_config:
        raise InvalidParameter("--engine sglang: speculative decoding is not modelled for SGLang yet "
                               "(the draft's KV cells and graph sizes)", hint="use --engine vllm")


def _sglang_caps(model: ModelSpec, gpu: GpuSpec, settings: ServeSettings, context: int,
                 stored: int | None) -> tuple[int | None, int, int]:
    """`--engine sglang`: the requests of `context` tokens SGLang's pool holds per attention-DP worker (None when
    it would not start), its chunked_prefill_size and max_running_requests (kvplan/sglang/fit.py)."""
    from kvplan.cli.common import notice
    from kvplan.sglang.defaults import SglangDeployment
    from kvplan.sglang.fit import plan_sglang_fit, requests_at
    from kvplan.vllm.memory.weights import given_or_estimated_weights

    dep = SglangDeployment(tp=settings.tp, kv_cache_dtype=settings.kv_cache_dtype)
    w, low, high = given_or_estimated_weights(model, given=None, tp=dep.tp, pp=1, arch=gpu.arch, total_bytes=stored)
    fit = plan_sglang_fit(model, gpu, dep, weights_bytes=w, weights_range=(low, high))
    notice("KV capacity, running-request cap and prefill chunk by SGLang 0.5.23's rules; the speed model is the "
           "same (fitted on vLLM and other engines' runs)", "Note")
    if not fit.fits:
        notice(f"KV capacity not computed: SGLang would not start ({fit.startup})")
        return None, fit.defaults.chunked_prefill_size, fit.max_running_requests or 1
    return requests_at(fit, context), fit.defaults.chunked_prefill_size, fit.max_running_requests


def _fit(model: ModelSpec, gpu: GpuSpec, settings: ServeSettings) -> FitReport:
    """The `kvplan fit` plan of this deployment: KV capacity at its context (one DP rank's), and vLLM's
    resolved max_num_seqs and max_num_batched_tokens (capacity.plan_fit, without advice)."""
    from kvplan.cli.common import notice
    from kvplan.vllm.fit import plan_fit

    report = plan_fit(model, gpu, settings, advise=False)
    context = settings.context or 0
    if report.startup == "refuses: max_model_len" and 0 < context < report.max_model_len:
        # The model's full length does not fit, but requests of `context` tokens may: plan the
        # server one would run for them (vLLM's own advice: decrease max_model_len).
        notice(f"the KV capacity assumes --max-model-len {context} (the model's {report.max_model_len:,} does not "
               "fit)", "Note")
        report = plan_fit(model, gpu, dataclasses.replace(settings, max_model_len=context), advise=False)
    return report
