"""`kvplan fit`: vLLM's memory budget, KV blocks, concurrency and startup verdict for a deployment."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any

import typer

from kvplan.cli.fit_sglang import (
    ChunkedPrefillSizeOpt,
    ContextLengthOpt,
    EnableDpAttentionOpt,
    EngineOpt,
    MaxRunningRequestsOpt,
    MaxTotalTokensOpt,
    MemFractionStaticOpt,
    PageSizeOpt,
    SglangCmdOpt,
    SglangWeightLogOpt,
    SglDpOpt,
)
from kvplan.cli.options import (
    DEPLOYMENT_PANEL,
    EnforceEagerOpt,
    GpuMemoryUtilizationOpt,
    GpusFileOpt,
    JsonFlag,
    KvCacheDtypeOpt,
    KvCacheMemoryBytesOpt,
    PipelineParallelOpt,
    Revision,
    SglangPipelineParallel,
    SglangTensorParallel,
    TensorParallelOpt,
)

if TYPE_CHECKING:
    from kvplan.vllm.report import FitReport
    from kvplan.vllm.sweep import SweepReport

NAME = "fit"
HELP = "Will it start, how many KV blocks and tokens, how much concurrency: vLLM's own sizing, per GPU."
EPILOG = """Examples:

  kvplan fit Qwen/Qwen2.5-7B --gpu h100 --max-model-len 32768

  kvplan fit --vllm-cmd "vllm serve Qwen/Qwen2.5-7B --max-model-len 32768 -tp 2" --gpu l40s

  kvplan fit meta-llama/Llama-3.1-70B --max-model-len 16384 --concurrency 8

  kvplan fit tests/fixtures/configs/Qwen--Qwen2.5-1.5B --gpu l4 --max-model-len 8192 --json

  kvplan fit deepseek-ai/DeepSeek-V3 --gpu h200 --engine sglang --tp 8 --dp 8 --enable-dp-attention

Exit status: 0 vLLM (SGLang, with --engine sglang) starts; 1 it would not start (a capacity verdict, as in
`kvplan check`), or, without --gpu, no catalog GPU serves the model; 2 bad input.
"""


def _opt(help_: str, *names: str) -> Any:
    return typer.Option(*names, help=help_, show_default=False)


def _vllm(help_: str, *names: str) -> Any:
    """An option that is one of vLLM's own flags (grouped with the shared ones in --help)."""
    return typer.Option(*names, help=help_, show_default=False, rich_help_panel=DEPLOYMENT_PANEL)


def command(
    model: Annotated[
        str | None,
        typer.Argument(
            help="Hub id (org/name), a local folder with config.json, or a config.json path.", show_default=False
        ),
    ] = None,
    gpu: Annotated[
        str | None,
        _opt("GPU from the catalog (`kvplan gpus`); omit to list every GPU × TP that serves the model.", "--gpu", "-g"),
    ] = None,
    num_gpus: Annotated[
        int | None,
        _opt("GPUs in all; sets -tp when -tp is not given (extra GPUs are data-parallel replicas).", "--num-gpus"),
    ] = None,
    tensor_parallel_size: TensorParallelOpt = None,
    pipeline_parallel_size: PipelineParallelOpt = None,
    tp_size: SglangTensorParallel = None,  # SGLang's --tp / --tp-size: their value is tensor_parallel_size's
    pp_size: SglangPipelineParallel = None,
    gpu_memory_utilization: GpuMemoryUtilizationOpt = None,
    max_model_len: Annotated[
        str | None,
        _vllm("Context length per request: 32768, 32k (= 32,000), 32K (= 32,768, as vLLM reads them), or auto "
              "(default: model config).", "--max-model-len"),
    ] = None,
    max_num_seqs: Annotated[
        int | None, _vllm("Running requests at most (default: by GPU memory: 1024 or 256).", "--max-num-seqs")
    ] = None,
    max_num_batched_tokens: Annotated[
        str | None,
        _vllm(
            "Tokens per scheduler step (default: by GPU and --usage: 2048, 8192 or 16384).", "--max-num-batched-tokens"
        ),
    ] = None,
    kv_cache_dtype: KvCacheDtypeOpt = None,
    block_size: Annotated[
        int | None, _vllm("Tokens per KV block (default: 16, or the attention backend's).", "--block-size")
    ] = None,
    enforce_eager: EnforceEagerOpt = None,
    enable_prefix_caching: Annotated[
        bool | None,
        _vllm(
            "Prefix caching (hybrid models: Mamba align mode) (default: on).",
            "--enable-prefix-caching/--no-enable-prefix-caching",
        ),
    ] = None,
    kv_cache_memory_bytes: KvCacheMemoryBytesOpt = None,
    revision: Revision = None,
    gpus_file: GpusFileOpt = None,
    gpu_memory: Annotated[str | None, _opt("Custom GPU: its cudaMemGetInfo total, e.g. 24GiB.", "--gpu-memory")] = None,
    gpu_bandwidth: Annotated[str | None, _opt("Custom GPU: memory bandwidth, e.g. 1TB/s.", "--gpu-bandwidth")] = None,
    gpu_total_bytes: Annotated[
        str | None, _opt("Override the catalog GPU's cudaMemGetInfo total (as measured).", "--gpu-total-bytes")
    ] = None,
    gpu_link: Annotated[
        str | None, _opt("How the GPUs reach each other: nvlink (nvidia-smi topo -m: NV#) or pcie (PIX, PXB, PHB, "
                         "NODE, SYS) (default: the catalog's, NVLink where it lists a figure).", "--gpu-link")
    ] = None,
    usage: Annotated[
        str | None, _opt("serve (vllm serve) or llm (the offline LLM class) (default: serve).", "--usage")
    ] = None,
    vllm_version: Annotated[
        str | None, _opt("vLLM release whose rules to apply (default: 0.33).", "--vllm-version")
    ] = None,
    moe_backend: Annotated[
        str | None,
        _opt("MXFP4 MoE kernel whose weight layout to assume: triton, marlin, flashinfer_trtllm, flashinfer_cutlass "
             "(default: vLLM's choice for the GPU and version).", "--moe-backend"),
    ] = None,
    env_vars: Annotated[
        list[str] | None,
        _opt("A vLLM environment variable for this plan, NAME=VALUE (repeatable; wins over the shell's and the "
             "--vllm-cmd line's), e.g. --env VLLM_ROCM_USE_AITER=1.", "--env"),
    ] = None,
    aiter: Annotated[
        bool | None,
        _opt("AMD GPUs: AMD's aiter kernels (and ROCm flash-attention) installed, as in vLLM's ROCm Docker images "
             "(default); --no-aiter: a bare `pip install vllm`. Enable them with VLLM_ROCM_USE_AITER=1 in the "
             "environment or the --vllm-cmd line.", "--aiter/--no-aiter"),
    ] = None,
    weights_memory: Annotated[
        str | None, _opt("Measured weights per GPU ('Model loading took').", "--weights-memory")
    ] = None,
    activation_memory: Annotated[
        str | None, _opt("Measured activation peak ('torch peak memory increase').", "--activation-memory")
    ] = None,
    non_torch_memory: Annotated[str | None, _opt("Measured non-torch memory growth.", "--non-torch-memory")] = None,
    cuda_graph_memory: Annotated[
        str | None, _opt("Measured CUDA-graph estimate ('Estimated CUDA graph memory').", "--cuda-graph-memory")
    ] = None,
    context: Annotated[
        str | None,
        _opt("Tokens per request (prompt + output) to judge preemption at (default: max_model_len).", "--context"),
    ] = None,
    concurrency: Annotated[
        int | None,
        _opt(
            "Requests running at once to judge preemption at (default: max_num_seqs; without --gpu: 1).",
            "--concurrency",
        ),
    ] = None,
    vllm_cmd: Annotated[
        str | None, _opt("A whole `vllm serve MODEL --flag …` command line, quoted.", "--vllm-cmd")
    ] = None,
    speculative_config: Annotated[
        str | None, _vllm('Speculative decoding as JSON, e.g. \'{"method": "mtp", "num_speculative_tokens": 1}\'.',
                          "--speculative-config", "-sc")
    ] = None,
    kv_transfer_config: Annotated[
        str | None, _vllm('A KV connector as JSON, e.g. \'{"kv_connector": "NixlConnector", "kv_role": "kv_both"}\' '
                          "(one without hybrid-manager support turns it off).", "--kv-transfer-config")
    ] = None,
    decode_context_parallel_size: Annotated[
        int | None, _vllm("Shard each request's KV over this many TP ranks (default 1).",
                          "--decode-context-parallel-size", "-dcp")
    ] = None,
    prefill_context_parallel_size: Annotated[
        int | None, _vllm("Prefill context parallelism: more GPUs per replica, MLA models (default 1).",
                          "--prefill-context-parallel-size", "-pcp")
    ] = None,
    data_parallel_size: Annotated[
        int | None, _vllm("Independent replicas, each its own KV pool (default 1).", "--data-parallel-size", "-dp")
    ] = None,
    enable_expert_parallel: Annotated[
        bool | None, _vllm("Split the experts over TP × DP ranks (the KV cache is unchanged).",
                           "--enable-expert-parallel/--no-enable-expert-parallel", "-ep")
    ] = None,
    hf_overrides: Annotated[
        str | None, _vllm("Config overrides as JSON, e.g. a rope_scaling and max_position_embeddings.",
                          "--hf-overrides")
    ] = None,
    compilation_config: Annotated[
        str | None, _vllm("CUDA graphs as JSON: cudagraph_mode (NONE, PIECEWISE, FULL, FULL_DECODE_ONLY, "
                          "FULL_AND_PIECEWISE), cudagraph_capture_sizes, max_cudagraph_capture_size.",
                          "--compilation-config", "-cc")
    ] = None,
    dtype: Annotated[str | None, _vllm("Model dtype: auto, bfloat16, float16/half, float32 (default auto).",
                                       "--dtype")] = None,
    mamba_cache_dtype: Annotated[str | None, _vllm("Hybrid models' conv-state dtype (default auto).",
                                                   "--mamba-cache-dtype")] = None,
    mamba_ssm_cache_dtype: Annotated[str | None, _vllm("Hybrid models' SSM-state dtype (default auto).",
                                                       "--mamba-ssm-cache-dtype")] = None,
    num_gpu_blocks_override: Annotated[int | None, _vllm("Use this many KV blocks, whatever the memory.",
                                                         "--num-gpu-blocks-override")] = None,
    cpu_offload_gb: Annotated[str | None, _vllm("Weights kept in CPU memory per GPU, in GiB (default 0).",
                                                "--cpu-offload-gb")] = None,
    kv_offloading_size: Annotated[str | None, _vllm("CPU memory for offloaded KV blocks, in GiB (the total over "
                                                    "the TP ranks): how many tokens the CPU tier holds.",
                                                    "--kv-offloading-size")] = None,
    kv_offloading_backend: Annotated[str | None, _vllm("KV offloading backend: native (vLLM's OffloadingConnector, "
                                                       "default) or lmcache.", "--kv-offloading-backend")] = None,
    quantization: Annotated[str | None, _vllm("The checkpoint's quantization method, or fp8 to quantize a "
                                              "16-bit checkpoint at load.", "--quantization", "-q")] = None,
    enable_lora: Annotated[
        bool | None, _vllm("Reserve LoRA adapter slots on every GPU.", "--enable-lora/--no-enable-lora")
    ] = None,
    async_scheduling: Annotated[
        bool | None,
        _vllm("Async scheduling: two batches in flight (default: on where vLLM supports it).",
              "--async-scheduling/--no-async-scheduling"),
    ] = None,
    max_loras: Annotated[int | None, _vllm("LoRA adapters served at once (default 1).", "--max-loras")] = None,
    max_lora_rank: Annotated[int | None, _vllm("Largest LoRA rank (default 16).", "--max-lora-rank")] = None,
    limit_mm_per_prompt: Annotated[
        str | None, _vllm('Multimodal items per prompt as JSON, e.g. \'{"image": 0, "video": 0}\' (0 for every '
                          "modality: text-only, the vision tower is not loaded) (default: 999 each).",
                          "--limit-mm-per-prompt")
    ] = None,
    language_model_only: Annotated[
        bool | None, _vllm("Every multimodal limit 0: text-only, no vision/audio tower.",
                           "--language-model-only/--no-language-model-only")
    ] = None,
    enable_mm_embeds: Annotated[
        bool | None, _vllm("Accept precomputed multimodal embeddings: a modality limited to 0 still takes them, so "
                           "the model stays multimodal (its tower is not loaded).",
                           "--enable-mm-embeds/--no-enable-mm-embeds")
    ] = None,
    mm_encoder_tp_mode: Annotated[
        str | None, _vllm("The vision tower under TP: weights (split over the ranks, default) or data (replicated "
                          "on every rank, the dummy batch split; models without support fall back to weights).",
                          "--mm-encoder-tp-mode")
    ] = None,
    trust_remote_code: Annotated[
        bool | None, _vllm("Accept a repository whose config needs its own code (kvplan still runs none of it).",
                           "--trust-remote-code/--no-trust-remote-code")
    ] = None,
    engine: EngineOpt = None,
    sglang_cmd: SglangCmdOpt = None,
    mem_fraction_static: MemFractionStaticOpt = None,
    chunked_prefill_size: ChunkedPrefillSizeOpt = None,
    max_running_requests: MaxRunningRequestsOpt = None,
    max_total_tokens: MaxTotalTokensOpt = None,
    page_size: PageSizeOpt = None,
    sgl_dp: SglDpOpt = None,
    enable_dp_attention: EnableDpAttentionOpt = None,
    context_length: ContextLengthOpt = None,
    sglang_weight_log: SglangWeightLogOpt = None,
    json_: JsonFlag = False,
) -> None:
    """vLLM's memory budget, KV blocks, concurrency and startup verdict (SGLang's with --engine sglang)."""
    flags = dict(locals())
    from kvplan.cli.fit_sglang import run_sglang_fit, wants_sglang

    if wants_sglang(flags):
        run_sglang_fit(flags)
        return
    from kvplan import api
    from kvplan.cli.common import progress, warn
    from kvplan.vllm.engine_args import fit_options

    # The vLLM options, by their rows in kvplan/vllm/engine_args.py (each has a parameter of its name above).
    params = locals()
    given: dict[str, Any] = {arg.name: params[arg.name] for arg in fit_options()}
    flags_ = api.fit_flags(model, vllm_cmd=vllm_cmd, num_gpus=num_gpus, usage=usage, vllm_version=vllm_version,
                           weights_memory=weights_memory, activation_memory=activation_memory,
                           non_torch_memory=non_torch_memory, cuda_graph_memory=cuda_graph_memory, context=context,
                           concurrency=concurrency, env=env_vars, on_ignored=None if json_ else _print_ignored,
                           moe_backend=moe_backend, rocm_aiter=aiter, **given)
    loaded = api.load_model_with_weights(flags_.model, flags_.revision, hf_overrides=flags_.hf_overrides,
                                         progress=progress(json_))
    if loaded.note:
        warn(loaded.note)
    if (engine or "").lower() == "both":
        if gpu_memory is not None or gpu_bandwidth is not None:
            from kvplan.errors import InvalidParameter

            raise InvalidParameter("--engine both plans a catalog GPU: --gpu-memory / --gpu-bandwidth (a custom GPU) "
                                   "are not read by SGLang's plan", hint="name the GPU with --gpu (kvplan gpus)")
        _compare(flags_, loaded, flags, gpu, gpu_total_bytes, gpus_file, gpu_link, json_)
        return
    report = api.fit_plan(flags_, loaded, gpu, gpu_memory=gpu_memory, gpu_bandwidth=gpu_bandwidth,
                          gpu_total_bytes=gpu_total_bytes, gpus_file=gpus_file, gpu_link=gpu_link)
    _emit(report, json_)


def _compare(flags_: Any, loaded: Any, flags: dict[str, Any], gpu: str | None, gpu_total_bytes: str | None,
             gpus_file: str | None, gpu_link: str | None, json_: bool) -> None:
    """`--engine both`: vLLM's plan beside SGLang's for one deployment (exit 1 when either would not start)."""
    from kvplan import api
    from kvplan.cli.console import out, print_json
    from kvplan.cli.fit_sglang import plan_sglang_beside
    from kvplan.sglang.compare import compare_engines
    from kvplan.vllm.report import FitReport

    settings = api.fit_settings(flags_, loaded)
    _refuse_unshared(settings, loaded.spec, hf_overrides=bool(flags_.hf_overrides))
    given_len = flags.get("max_model_len")
    par = settings.parallel_config
    sglang = plan_sglang_beside(flags, model=str(flags_.model), tp=par.tensor_parallel_size,
                                pp=par.pipeline_parallel_size,
                                context=settings.model_config.max_model_len if given_len is not None else None)
    vllm = api.fit_plan(flags_, loaded, gpu, gpu_total_bytes=gpu_total_bytes, gpus_file=gpus_file, gpu_link=gpu_link,
                        advise=False)
    assert isinstance(vllm, FitReport)  # plan_sglang_beside refused a missing --gpu
    comparison = compare_engines(vllm, sglang)
    if json_:
        from kvplan.render.json import dumps

        print_json(dumps("fit-compare", comparison))
    else:
        from kvplan.render.sglang_fit import render_comparison

        out().print(render_comparison(comparison))
    if not (comparison.vllm.starts and comparison.sglang.starts):
        from kvplan.cli.exit_codes import EXIT_CHECK_FAILED

        raise typer.Exit(EXIT_CHECK_FAILED)


def _refuse_unshared(settings: Any, spec: Any, *, hf_overrides: bool) -> None:
    """`--engine both` compares one deployment: a vLLM setting that changes vLLM's memory and that SGLang's plan
    does not take (kvplan/sglang/engine_args.py's UNMODELLED, or no SGLang counterpart) would compare two. A
    --quantization naming the checkpoint's own scheme changes nothing (vllm/quantization.py:apply_quantization).
    --hf-overrides edits the config vLLM's plan reads, not SGLang's; a multimodal model made text-only drops its
    tower from vLLM's weights only; LoRA slots are reserved in vLLM's budget only."""
    from kvplan.errors import InvalidParameter
    from kvplan.vllm.multimodal import text_only
    from kvplan.vllm.settings import mm_limits

    online = settings.model_config.quantization is not None and spec.quant_method is None and spec.quant is None
    unshared = (("--hf-overrides", hf_overrides),
                ("--limit-mm-per-prompt / --language-model-only (text-only)", text_only(spec, mm_limits(settings))),
                ("--enable-lora", settings.lora_config.enable_lora),
                ("--quantization", online),
                ("--cpu-offload-gb", settings.offload_config.cpu_offload_bytes > 0),
                ("--kv-cache-memory-bytes", settings.cache_config.kv_cache_memory_bytes is not None),
                ("--num-gpu-blocks-override", settings.cache_config.num_gpu_blocks_override is not None),
                ("--speculative-config", bool(settings.speculative_config)))
    for flag, given in unshared:
        if given:
            raise InvalidParameter(f"--engine both compares one deployment: {flag} changes vLLM's plan and is not "
                                   "modelled in SGLang's", hint="plan each engine alone (--engine vllm / sglang)")


def _print_ignored(words: tuple[str, ...]) -> None:
    """A pasted line's flags kvplan did not use: ignored, not modelled (a warning), unknown."""
    from kvplan.cli.common import notice
    from kvplan.vllm.command_line import classify_ignored

    ignored, unmodelled, unknown = classify_ignored(list(words))
    for label, found in (("ignored vLLM flags that do not change the KV plan", ignored),
                         ("vLLM flags kvplan does not know, ignored (they may change memory)", unknown)):
        if found:
            notice(f"{label}: {' '.join(found)}", "Note")
    for line in unmodelled:
        notice(f"not modelled: {line}")


def _emit(report: FitReport | SweepReport, json_: bool) -> None:
    """One GPU's plan or the sweep, as JSON or tables; exit 1 when vLLM would not start (no GPU serves it)."""
    from kvplan.cli.console import out, print_json
    from kvplan.vllm.report import FitReport

    single = isinstance(report, FitReport)
    if json_:
        from kvplan.render.json import dumps

        print_json(dumps("fit" if single else "fit-sweep", report))
    else:
        from kvplan.render.fit import render_fit, render_sweep

        out().print(render_fit(report) if isinstance(report, FitReport) else render_sweep(report))
    if not (report.verdict.fits if isinstance(report, FitReport) else report.rows):
        from kvplan.cli.exit_codes import EXIT_CHECK_FAILED

        # vLLM would refuse to start, or no catalog GPU serves the model: a capacity verdict, not an error
        raise typer.Exit(EXIT_CHECK_FAILED)
