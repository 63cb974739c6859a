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
    SglTpOpt,
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
    TensorParallelOpt,
)

if TYPE_CHECKING:
    from kvplan.model.spec import ModelSpec
    from kvplan.vllm.environment import VllmEnvironment
    from kvplan.vllm.settings import ServeSettings

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
    sgl_tp: SglTpOpt = None,
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
    import os

    from kvplan.cli.console import err
    from kvplan.errors import InvalidParameter
    from kvplan.vllm.engine_args import fit_options
    from kvplan.vllm.environment import vllm_environment

    # The vLLM options, by their rows in kvplan/vllm/engine_args.py (each has a parameter of its name above).
    params = locals()
    given: dict[str, object] = {arg.name: params[arg.name] for arg in fit_options()}
    given["moe_backend"] = moe_backend
    given["rocm_aiter"] = aiter
    pasted_env: dict[str, str] = {}
    if vllm_cmd is not None:
        from kvplan.vllm.command_line import parse_vllm_command

        parsed = parse_vllm_command(vllm_cmd)
        pasted_env = parsed.env  # the server's `VLLM_…=` words win over this shell's
        if parsed.ignored and not json_:
            from kvplan.vllm.command_line import classify_ignored

            ignored, unmodelled, unknown = classify_ignored(parsed.ignored)
            for label, words in (("ignored vLLM flags that do not change the KV plan", ignored),
                                 ("vLLM flags kvplan does not know, ignored (they may change memory)", unknown)):
                if words:
                    err().print(f"Note: {label}: {' '.join(words)}", markup=False)
            for line in unmodelled:
                err().print(f"Warning: not modelled: {line}", markup=False)
        for key, value in parsed.options.items():
            if given.get(key) is None:
                given[key] = value
        model = model or parsed.model
    if not model:
        raise InvalidParameter('a model is needed: kvplan fit MODEL (or --vllm-cmd "vllm serve MODEL …")')

    settings = settings_from_flags(
        given,
        usage,
        vllm_version,
        weights_memory,
        activation_memory,
        non_torch_memory,
        cuda_graph_memory,
        context,
        concurrency,
        env=vllm_environment({**os.environ, **pasted_env, **_env_flags(env_vars)}),
    )
    tp, pp = settings.tp, settings.pp
    if num_gpus is not None:
        if num_gpus < 1:
            raise InvalidParameter(f"--num-gpus must be ≥ 1, got {num_gpus}")
        implied_tp = given["tensor_parallel_size"] is None
        if implied_tp:
            tp = max(1, num_gpus // pp)
        if tp * pp > num_gpus:
            raise InvalidParameter(f"-tp {tp} × -pp {pp} needs {tp * pp} GPUs, more than --num-gpus {num_gpus}")
        if num_gpus % (tp * pp):
            raise InvalidParameter(
                f"--num-gpus {num_gpus} is not a multiple of -tp {tp} × -pp {pp} = {tp * pp}: each replica "
                f"takes {tp * pp} GPUs", hint=f"give --num-gpus {num_gpus - num_gpus % (tp * pp)} or "
                f"{num_gpus + tp * pp - num_gpus % (tp * pp)}, or a -tp that divides it")
        replicas = num_gpus // (tp * pp)
        from dataclasses import replace

        settings = replace(settings, tp=tp, data_parallel_size=max(replicas, settings.data_parallel_size))

    spec, stored = _load(model, str(given["revision"]) if given["revision"] else None, quiet=json_,
                         hf_overrides=json_option(given.get("hf_overrides"), "--hf-overrides"))
    if num_gpus is not None and given["tensor_parallel_size"] is None:
        _check_implied_tp(spec, settings.tp, num_gpus)
    if stored is not None and settings.weights_bytes is None:
        from dataclasses import replace

        settings = replace(settings, weights_total_bytes=stored)
    if gpu is None and gpu_memory is None:
        _sweep(spec, settings, gpus_file, json_)
        return
    both = (engine or "").lower() == "both"
    if both:
        from kvplan.cli.fit_sglang import plan_sglang_beside

        given_len = given.get("max_model_len")
        sglang = plan_sglang_beside(flags, model=model, tp=settings.tp, pp=settings.pp,
                                    context=settings.max_model_len if given_len is not None else None)
        _compare(spec, settings, sglang, gpu, gpu_total_bytes, gpus_file, json_)
        return
    _single(spec, settings, gpu, gpu_memory, gpu_bandwidth, gpu_total_bytes, gpus_file, json_)


def _compare(spec: ModelSpec, settings: ServeSettings, sglang: Any, gpu: str | None, gpu_total_bytes: str | None,
             gpus_file: str | None, json_: bool) -> None:
    """`--engine both`: vLLM's plan beside SGLang's (exit 1 when either engine would not start)."""
    from kvplan.cli.console import out, print_json
    from kvplan.hardware import gpus
    from kvplan.sglang.compare import compare_engines
    from kvplan.units import parse_bytes
    from kvplan.vllm.fit import plan_fit

    assert gpu is not None
    chip = gpus.get_gpu(gpu, gpus_file)
    if gpu_total_bytes is not None:
        chip = chip.with_cuda_total(parse_bytes(gpu_total_bytes, what="--gpu-total-bytes"))
    comparison = compare_engines(plan_fit(spec, chip, settings), sglang)
    if json_:
        from kvplan.render.json import dumps

        print_json(dumps("fit-compare", comparison))
    else:
        from kvplan.render.sglang_fit import render_comparison

        out().print(render_comparison(comparison))
    if not (comparison.vllm.starts and comparison.sglang.starts):
        from kvplan.cli.exit_codes import EXIT_CHECK_FAILED

        raise typer.Exit(EXIT_CHECK_FAILED)


def _env_flags(values: list[str] | None) -> dict[str, str]:
    """--env NAME=VALUE words as a mapping; a word without '=' or with another name than VLLM_… is an error."""
    from kvplan.errors import InvalidParameter

    out: dict[str, str] = {}
    for word in values or ():
        name, sep, value = word.partition("=")
        if not sep or not name.startswith("VLLM_"):
            raise InvalidParameter(f"--env {word!r}: expected VLLM_NAME=VALUE")
        out[name] = value
    return out


def _check_implied_tp(spec: Any, tp: int, num_gpus: int) -> None:
    """A -tp that --num-gpus implied and vLLM would refuse is blamed on --num-gpus, the flag typed."""
    from kvplan.errors import InvalidParameter
    from kvplan.model.parallel import check_tensor_parallel

    try:
        check_tensor_parallel(spec, tp)
    except InvalidParameter as exc:
        text = str(exc).replace(f"--tensor-parallel-size {tp} ", f"--num-gpus {num_gpus} implies -tp {tp}, which ", 1)
        raise InvalidParameter(text, hint=exc.hint) from None


def json_option(value: object, flag: str) -> dict[str, Any] | None:
    """A vLLM option given as JSON text (or already a mapping, from a plan file)."""
    from kvplan.vllm.engine_args import json_object

    return json_object(value, flag)


def _load(model: str, revision: str | None, *, quiet: bool,
          hf_overrides: dict[str, Any] | None = None) -> tuple[ModelSpec, int | None]:
    from kvplan.cli.common import load_model_with_weights

    spec, weights = load_model_with_weights(model, revision, quiet=quiet, hf_overrides=hf_overrides)
    return spec, (weights.bytes if weights else None)


def load_speculative_draft(config: dict[str, Any] | None) -> ModelSpec | None:
    """The EAGLE / EAGLE-3 draft or the draft model that `--speculative-config` names (`model`: a Hub id or a
    folder), parsed as the target is (never its code); None when it names none. A speculators-format
    checkpoint is read as vLLM reads it (its layer config)."""
    from kvplan.vllm.speculative import needs_draft_config, speculators_layer_config

    if config is None or not needs_draft_config(config):
        return None
    from kvplan.cli.common import load_model
    from kvplan.model import hub
    from kvplan.model.config import parse_config

    source = str(config["model"])
    revision = config.get("revision") if hub.is_hub_id(source) and isinstance(config.get("revision"), str) else None
    raw = hub.read_config(source, revision)
    flat = speculators_layer_config(raw)
    if flat is raw:
        return load_model(source, revision, quiet=True)
    return parse_config(flat, name=source)


def settings_from_flags(
    given: dict[str, object],
    usage: str | None,
    vllm_version: str | None,
    weights_memory: str | None,
    activation_memory: str | None,
    non_torch_memory: str | None,
    cuda_graph_memory: str | None,
    context: str | None,
    concurrency: int | None,
    *,
    env: VllmEnvironment | None = None,
) -> ServeSettings:
    """Turn flag texts (from the command line or a pasted vLLM command) into ServeSettings.

    `given` maps vLLM option names (`max_model_len`, `tensor_parallel_size`, …) to their texts; each is read
    as its row of kvplan/vllm/engine_args.py says (an absent one keeps ServeSettings' default, vLLM's);
    `moe_backend` is kvplan's own. Shared by `kvplan fit`, `calibrate`, `diagnose --plan` and `simulate`;
    `env` is vLLM's environment as vllm/environment.py reads it (None: all unset). Raises InvalidParameter
    on a bad value.
    """
    from kvplan.errors import InvalidParameter
    from kvplan.units import parse_bytes, parse_count
    from kvplan.vllm.engine_args import SETTING_ARGS, read_flag_text
    from kvplan.vllm.environment import VllmEnvironment
    from kvplan.vllm.memory.weights import MOE_BACKENDS
    from kvplan.vllm.settings import ServeSettings

    env = env or VllmEnvironment()

    def size(value: str | None, flag: str) -> int | None:
        return None if value is None else parse_bytes(value, what=flag)

    fields: dict[str, Any] = {}
    for arg in SETTING_ARGS:
        value = given.get(arg.name)
        # An empty text keeps the default for the text options (as `x or default` did), not for the numbers.
        if value is None or (value == "" and arg.kind in ("choice", "lower", "text")):
            continue
        assert arg.field is not None
        fields[arg.field] = read_flag_text(arg, value)
    usage_ = (usage or "serve").lower()
    if usage_ not in ("serve", "llm"):
        raise InvalidParameter(f"--usage must be serve or llm, got {usage!r}")
    moe_backend = given.get("moe_backend")
    if moe_backend is not None and moe_backend not in MOE_BACKENDS:
        raise InvalidParameter(f"--moe-backend must be one of {', '.join(MOE_BACKENDS)}, got {moe_backend!r}")
    if given.get("rocm_aiter") is not None:
        fields["rocm_aiter_installed"] = bool(given["rocm_aiter"])
    return ServeSettings(
        **fields,
        usage=usage_,  # type: ignore[arg-type]
        vllm_version=vllm_version,
        **env.settings(),
        weights_bytes=size(weights_memory, "--weights-memory"),
        activation_bytes=size(activation_memory, "--activation-memory"),
        non_torch_bytes=size(non_torch_memory, "--non-torch-memory"),
        cuda_graph_bytes=size(cuda_graph_memory, "--cuda-graph-memory"),
        context=None if context is None else parse_count(context, what="--context", minimum=1),
        concurrency=concurrency,
        moe_backend=moe_backend,
        speculative_draft=load_speculative_draft(fields.get("speculative_config")),
    )


def _single(
    spec: ModelSpec,
    settings: ServeSettings,
    gpu: str | None,
    gpu_memory: str | None,
    gpu_bandwidth: str | None,
    gpu_total_bytes: str | None,
    gpus_file: str | None,
    json_: bool,
) -> None:
    from kvplan.cli.console import out, print_json
    from kvplan.hardware import gpus
    from kvplan.units import parse_bytes
    from kvplan.vllm.fit import plan_fit

    if gpu_bandwidth is not None and gpu_memory is None:
        from kvplan.errors import InvalidParameter

        raise InvalidParameter("--gpu-bandwidth describes a custom GPU: give --gpu-memory with it",
                               hint="a catalog GPU keeps its datasheet bandwidth (kvplan gpus ID)")
    if gpu_memory is not None:
        chip = gpus.custom_gpu(gpu_memory, gpu_bandwidth, name=gpu or "custom")
    else:
        assert gpu is not None
        chip = gpus.get_gpu(gpu, gpus_file)
    if gpu_total_bytes is not None:
        chip = chip.with_cuda_total(parse_bytes(gpu_total_bytes, what="--gpu-total-bytes"))
    report = plan_fit(spec, chip, settings)
    if json_:
        from kvplan.render.json import dumps

        print_json(dumps("fit", report))
    else:
        from kvplan.render.fit import render_fit

        out().print(render_fit(report))
    if not report.fits:
        from kvplan.cli.exit_codes import EXIT_CHECK_FAILED

        raise typer.Exit(EXIT_CHECK_FAILED)  # vLLM would refuse to start: a capacity verdict, not an error


def _sweep(spec: ModelSpec, settings: ServeSettings, gpus_file: str | None, json_: bool) -> None:
    from kvplan.cli.console import out, print_json
    from kvplan.hardware import gpus
    from kvplan.vllm.sweep import sweep_gpus

    catalog = list(gpus.load_catalog(gpus_file).values())  # NVIDIA by vLLM's CUDA rules, AMD by its ROCm rules
    report = sweep_gpus(spec, catalog, settings)
    if json_:
        from kvplan.render.json import dumps

        print_json(dumps("fit-sweep", report))
    else:
        from kvplan.render.fit import render_sweep

        out().print(render_sweep(report))
    if not report.rows:
        from kvplan.cli.exit_codes import EXIT_CHECK_FAILED

        raise typer.Exit(EXIT_CHECK_FAILED)  # no catalog GPU serves the model
