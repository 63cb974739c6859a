"""`kvplan calibrate`: read a vLLM startup log, compare it with kvplan's prediction term by term, and print
the overrides that make kvplan reproduce the server."""
from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any

import typer

from kvplan.cli.options import (
    JsonFlag,
    Revision,
    SglangPipelineParallel,
    SglangTensorParallel,
    pipeline_parallel_option,
    tensor_parallel_option,
)

if TYPE_CHECKING:
    from collections.abc import Iterator

    from kvplan.hardware.gpus import GpuSpec
    from kvplan.model.hub import WeightsInfo
    from kvplan.model.spec import ModelSpec
    from kvplan.observe.calibration import CalibrationReport
    from kvplan.vllm.startup_log import StartupLog

NAME = "calibrate"
HELP = "Read a vLLM startup log, compare it with kvplan's prediction term by term, and print the overrides."
EPILOG = (
    "Examples:\n\n"
    "  kvplan calibrate vllm.log --gpu h100\n\n"
    "  kubectl logs my-vllm-pod | kvplan calibrate - --model meta-llama/Llama-3.1-8B-Instruct --gpu h100\n\n"
    "  kvplan calibrate vllm.log --gpu h100 --json | jq .overrides\n\n"
    "  kvplan calibrate examples/vllm-startup.log --model tests/fixtures/configs/meta-llama--Meta-Llama-3.1-8B "
    "--gpu h100"
)

_NO_MODEL = "--model MODEL: the log does not name the model"
# fit's option name → the ServeSettings field it sets (to tell which flags the user gave).
def _opt(help_: str, *names: str) -> Any:
    return typer.Option(*names, help=help_, show_default=False)


def command(
    logfile: Annotated[str, typer.Argument(metavar="LOGFILE", help="The server's startup log; - reads stdin.")],
    model: Annotated[
        str | None, _opt("The model (Hub id or local config); default: the one the log names.", "--model", "-m")
    ] = None,
    gpu: Annotated[
        str | None, _opt("The GPU the server ran on, from the catalog (`kvplan gpus`).", "--gpu", "-g")
    ] = None,
    gpu_memory: Annotated[str | None, _opt("Custom GPU: its cudaMemGetInfo total, e.g. 24GiB.", "--gpu-memory")] = None,
    gpu_total_bytes: Annotated[
        str | None, _opt("Override the catalog GPU's cudaMemGetInfo total (the log's wins).", "--gpu-total-bytes")
    ] = None,
    gpus_file: Annotated[str | None, _opt("Extra GPU catalog YAML (or $KVPLAN_GPUS_FILE).", "--gpus-file")] = None,
    gpu_link: Annotated[str | None, _opt("How the server's GPUs reach each other: nvlink or pcie (as fit's; default: "
                                         "pcie where the log's custom all-reduce warning says so).",
                                         "--gpu-link")] = None,
    tensor_parallel_size: Annotated[
        int | None, tensor_parallel_option("Tensor-parallel GPUs, when the log does not say.", panel=None)
    ] = None,
    pipeline_parallel_size: Annotated[
        int | None, pipeline_parallel_option("Pipeline stages, when the log does not say.", panel=None)
    ] = None,
    tp_size: SglangTensorParallel = None,  # SGLang's --tp / --tp-size: their value is tensor_parallel_size's
    pp_size: SglangPipelineParallel = None,
    gpu_memory_utilization: Annotated[
        float | None, _opt("When the log does not say.", "--gpu-memory-utilization")
    ] = None,
    max_model_len: Annotated[str | None, _opt("When the log does not say.", "--max-model-len")] = None,
    max_num_seqs: Annotated[int | None, _opt("When the log does not say.", "--max-num-seqs")] = None,
    max_num_batched_tokens: Annotated[
        str | None, _opt("When the log does not say.", "--max-num-batched-tokens")
    ] = None,
    kv_cache_dtype: Annotated[str | None, _opt("When the log does not say.", "--kv-cache-dtype")] = None,
    block_size: Annotated[int | None, _opt("When the log does not say.", "--block-size")] = None,
    enforce_eager: Annotated[
        bool | None, _opt("When the log does not say.", "--enforce-eager/--no-enforce-eager")
    ] = None,
    enable_prefix_caching: Annotated[
        bool | None, _opt("When the log does not say.", "--enable-prefix-caching/--no-enable-prefix-caching")
    ] = None,
    usage: Annotated[str | None, _opt("serve (vllm serve) or llm (the LLM class) (default: serve).", "--usage")] = None,
    vllm_version: Annotated[
        str | None, _opt("vLLM release whose rules to apply, when the log does not say.", "--vllm-version")
    ] = None,
    weights_memory: Annotated[str | None, _opt("Measured weights per GPU, if not logged.", "--weights-memory")] = None,
    activation_memory: Annotated[
        str | None, _opt("Measured activation peak, if not logged.", "--activation-memory")
    ] = None,
    non_torch_memory: Annotated[
        str | None, _opt("Measured non-torch memory growth, if not logged.", "--non-torch-memory")
    ] = None,
    cuda_graph_memory: Annotated[
        str | None, _opt("Measured CUDA-graph estimate, if not logged.", "--cuda-graph-memory")
    ] = None,
    revision: Revision = None,
    json_output: JsonFlag = False,
) -> None:
    """Compare a vLLM startup log with kvplan's prediction and print the overrides that reproduce it."""
    from kvplan.cli.console import out, print_json
    from kvplan.errors import ParseError
    from kvplan.observe.calibration import calibrate, figures_only
    from kvplan.render.calibrate import render_calibrate
    from kvplan.render.json import dumps
    from kvplan.vllm.flags import settings_from_flags
    from kvplan.vllm.startup_log import parse_startup_log

    log = parse_startup_log(_read(logfile))
    if not log.found:
        raise ParseError(f"no vLLM startup lines in {logfile}",
                         hint="give the server's log from its start, e.g. `kubectl logs POD > vllm.log`")
    given: dict[str, object] = {
        "tensor_parallel_size": tensor_parallel_size, "pipeline_parallel_size": pipeline_parallel_size,
        "gpu_memory_utilization": gpu_memory_utilization, "max_model_len": max_model_len,
        "max_num_seqs": max_num_seqs, "max_num_batched_tokens": max_num_batched_tokens,
        "kv_cache_dtype": kv_cache_dtype, "block_size": block_size, "enforce_eager": enforce_eager,
        "enable_prefix_caching": enable_prefix_caching,
    }
    flags = settings_from_flags(given, usage, vllm_version, measured={
        "weights": weights_memory, "activation": activation_memory, "non_torch": non_torch_memory,
        "cuda_graph": cuda_graph_memory})
    from kvplan.vllm.engine_args import BY_NAME

    names = frozenset(BY_NAME[k].field or k for k, v in given.items() if v is not None)  # the ServeSettings fields
    names |= {"vllm_version"} if vllm_version is not None else frozenset()

    missing: list[str] = []
    chip, gpu_flags = _gpu(gpu, gpu_memory, gpu_total_bytes, gpus_file, log, gpu_link)
    loaded = None
    if chip is None:
        missing.append("--gpu NAME (or --gpu-memory): a startup log does not name the GPU")
        if model is None and log.settings.model_config.model is None:
            missing.append(_NO_MODEL)
    else:
        loaded, problem = _model(model, revision, log, quiet=json_output)
        if problem:
            missing.append(problem)
    report: CalibrationReport
    if chip is None or loaded is None:
        report = figures_only(log, source=logfile, missing=missing)
    else:
        from kvplan.vllm.loading import with_stored_weights

        source, spec, stored = loaded
        flags = with_stored_weights(flags, stored)
        report = calibrate(log, spec, chip, flags, source=logfile, model_source=source, given=names,
                           gpu_flags=gpu_flags)
    if json_output:
        print_json(dumps("calibrate", report))
    else:
        out().print(render_calibrate(report))


def _gpu(gpu: str | None, gpu_memory: str | None, gpu_total_bytes: str | None, gpus_file: str | None,
         log: StartupLog, gpu_link: str | None = None) -> tuple[GpuSpec | None, tuple[str, ...]]:
    """The GPU the user named (None if none), built as `fit` builds it (api.deployment_gpu), and the `kvplan fit`
    flags that name it."""
    from kvplan.api import deployment_gpu

    if gpu is None and gpu_memory is None:
        return None, ()
    chip = deployment_gpu(gpu, gpu_memory, None, gpu_total_bytes, gpus_file, gpu_link)
    flags: tuple[str, ...] = ("--gpu-memory", gpu_memory) if gpu_memory is not None else ("--gpu", chip.id)
    if gpus_file is not None:
        flags += ("--gpus-file", gpus_file)
    if gpu_total_bytes is not None and log.memory.total_gpu_memory_bytes is None:
        flags += ("--gpu-total-bytes", gpu_total_bytes)  # else the log's total is printed as the override
    if chip.link is not None:
        flags += ("--gpu-link", chip.link)
    return chip, flags


def _model(model: str | None, revision: str | None, log: StartupLog, *,
           quiet: bool) -> tuple[tuple[str, ModelSpec, WeightsInfo | None] | None, str | None]:
    """((source, spec, stored weight bytes), None) or (None, why it is missing). A model given with
    --model must load; the one the log names is only tried: without it the figures are shown alone."""
    from kvplan.cli.common import load_model_with_weights
    from kvplan.errors import KvplanError

    source = model if model is not None else log.settings.model_config.model
    if source is None:
        return None, _NO_MODEL
    try:
        spec, weights = load_model_with_weights(source, revision, quiet=quiet)
    except KvplanError as exc:
        if model is not None:
            raise
        return None, f"--model MODEL: the log's model {source!r} is not available here ({exc})"
    return (source, spec, weights), None


def _read(logfile: str) -> Iterator[str]:
    """The log's lines, streamed through kvplan.files (- is stdin); undecodable bytes (progress bars,
    colours) are replaced, not fatal."""
    from kvplan import files

    return files.read_lines(logfile, files.STARTUP_LOG, stdin=True)
