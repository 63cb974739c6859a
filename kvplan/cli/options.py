"""Options shared by several commands, declared once with vLLM's names and defaults (the parallel sizes with
SGLang's names too: see tensor_parallel_option)."""
from __future__ import annotations

from typing import Annotated, Any, NamedTuple

import typer

ModelArg = Annotated[str, typer.Argument(
    help="Hub id (org/name), a local folder with config.json, or a config.json path.", show_default=False)]
Revision = Annotated[str | None, typer.Option("--revision", help="Hub branch, tag or commit.")]
KvCacheDtype = Annotated[str, typer.Option(
    "--kv-cache-dtype",
    help="auto (model dtype or the checkpoint's KV scheme), bfloat16, float16, fp8, fp8_e4m3, fp8_e5m2.")]
JsonFlag = Annotated[bool, typer.Option("--json", help="Print the result as JSON (stable schema) on stdout.")]

# The deployment flags of `kvplan fit` (vLLM's names; None = vLLM's default, as in capacity.ServeSettings),
# for commands that plan a deployment with fit's helper (`kvplan simulate … --model M --gpu G`).
DEPLOYMENT_PANEL = "Deployment (vLLM's flags)"
ModelOpt = Annotated[str | None, typer.Option(
    "--model", help="Size the run from a deployment: hub id, local folder or config.json (with --gpu).",
    show_default=False, rich_help_panel=DEPLOYMENT_PANEL)]
GpuOpt = Annotated[str | None, typer.Option(
    "--gpu", "-g", help="GPU from the catalog (`kvplan gpus`).", show_default=False, rich_help_panel=DEPLOYMENT_PANEL)]
GpusFileOpt = Annotated[str | None, typer.Option(
    "--gpus-file", help="Extra GPU catalog YAML (or $KVPLAN_GPUS_FILE).", show_default=False,
    rich_help_panel=DEPLOYMENT_PANEL)]
RevisionOpt = Annotated[str | None, typer.Option(
    "--revision", help="Hub branch, tag or commit.", show_default=False, rich_help_panel=DEPLOYMENT_PANEL)]
GpuMemoryUtilizationOpt = Annotated[float | None, typer.Option(
    "--gpu-memory-utilization", "--device-memory-utilization",
    help="Fraction of GPU memory for vLLM (default: 0.92; 0.9 before vLLM 0.20).",
    show_default=False, rich_help_panel=DEPLOYMENT_PANEL)]
KvCacheDtypeOpt = Annotated[str | None, typer.Option(
    "--kv-cache-dtype", help="auto, bfloat16, float16, fp8, fp8_e4m3, fp8_e5m2 (default: auto).",
    show_default=False, rich_help_panel=DEPLOYMENT_PANEL)]
KvCacheMemoryBytesOpt = Annotated[str | None, typer.Option(
    "--kv-cache-memory-bytes", "--kv-cache-memory",
    help="KV cache size per GPU, e.g. 20GiB; replaces the memory profile, as in vLLM.",
    show_default=False, rich_help_panel=DEPLOYMENT_PANEL)]
EnforceEagerOpt = Annotated[bool | None, typer.Option(
    "--enforce-eager/--no-enforce-eager", help="No CUDA graphs (no graph memory).", show_default=False,
    rich_help_panel=DEPLOYMENT_PANEL)]


# -- tensor- and pipeline-parallel sizes: one setting, vLLM's and SGLang's spellings -------------------------------
#
# Every command that takes them takes both engines' spellings, under either engine: vLLM's -tp /
# --tensor-parallel-size and -pp / --pipeline-parallel-size (vllm/engine/arg_utils.py:EngineArgs.add_cli_args) and
# SGLang's --tp-size / --pp-size (sglang/srt/server_args.py:ServerArgs.add_cli_args, which also takes vLLM's long
# names: kvplan/sglang/launch_server_flags.json) with the short --tp (a unique prefix SGLang's argparse accepts) and
# --pp (kvplan's own: SGLang's argparse finds it ambiguous, kvplan/sglang/engine_args.py).
# Click keeps one value per option (the last given) and does not say which name gave it, so each size is two
# options: vLLM's spelling, the command's parameter, and SGLang's, hidden, never passed to the command (its
# parameter keeps its default): its value becomes the command's. Both given with different values is an error;
# one spelling given twice is its last value, as in vLLM's argparse.


class _Size(NamedTuple):
    """One parallel size: the command's parameter, its two spellings (vLLM's, SGLang's) and what it is called."""

    param: str
    vllm: tuple[str, ...]
    sglang: tuple[str, ...]
    what: str


_TP = _Size("tensor_parallel_size", ("-tp", "--tensor-parallel-size"), ("--tp", "--tp-size"), "tensor-parallel size")
_PP = _Size("pipeline_parallel_size", ("-pp", "--pipeline-parallel-size"), ("--pp", "--pp-size"),
            "pipeline-parallel size")
_SGLANG_PARAM = {_TP: "tp_size", _PP: "pp_size"}  # the hidden option's parameter name in every command
_BY_PARAM = {name: size for size in (_TP, _PP) for name in (size.param, _SGLANG_PARAM[size])}
_SEEN = "kvplan.parallel_sizes"  # ctx.meta key: size.param -> the value its first spelling processed gave


class _TwoValues(typer.BadParameter):
    """Both spellings of a size with different values: a usage error (exit 2), printed by the app's error boundary
    (kvplan/cli/app.py:_KvplanGroup.main) as `Error: <message> (see 'kvplan CMD -h')`, without Click's prefix."""

    def format_message(self) -> str:
        return self.message


def _one_size(ctx: typer.Context, param: typer.CallbackParam, value: int | None) -> int | None:
    """Either spelling's callback: the value the command gets; two different values are a usage error (exit 2).

    Click processes the options given on the command line in their order, then the others, so whichever spelling
    comes second sees the first's value (in ctx.meta, which lives as long as the command's context)."""
    size = _BY_PARAM[str(param.name)]
    seen: dict[str, int] = ctx.meta.setdefault(_SEEN, {})
    first = seen.get(size.param)
    if value is None:
        return first if param.name == size.param else None
    if first is not None and first != value:
        vllm, sglang = (value, first) if param.name == size.param else (first, value)
        raise _TwoValues(f"{'/'.join(size.vllm)} {vllm} and {'/'.join(size.sglang)} {sglang} set the {size.what} "
                         "twice, to different values: they are one setting, give one of them", ctx=ctx, param=param)
    seen[size.param] = value
    if param.name != size.param and ctx.params.get(size.param) is None and size.param in ctx.params:
        ctx.params[size.param] = value  # vLLM's spelling was processed already, without a value
    return value


def _size_option(size: _Size, help_: str, panel: str | None) -> Any:
    also = " / ".join(size.sglang)
    return typer.Option(*reversed(size.vllm), help=f"{help_} Also {also}, SGLang's spelling.", callback=_one_size,
                        show_default=False, rich_help_panel=panel)


def tensor_parallel_option(help_: str = "Tensor-parallel GPUs (default 1).", panel: str | None = DEPLOYMENT_PANEL
                           ) -> Any:
    """-tp / --tensor-parallel-size (with `help_`, in `panel` of --help); SglangTensorParallel must be beside it."""
    return _size_option(_TP, help_, panel)


def pipeline_parallel_option(help_: str = "Pipeline stages (default 1).", panel: str | None = DEPLOYMENT_PANEL
                             ) -> Any:
    """-pp / --pipeline-parallel-size (with `help_`, in `panel` of --help); SglangPipelineParallel beside it."""
    return _size_option(_PP, help_, panel)


def _sglang_option(size: _Size) -> Any:
    return typer.Option(*reversed(size.sglang), callback=_one_size, expose_value=False, hidden=True,
                        show_default=False)


TensorParallelOpt = Annotated[int | None, tensor_parallel_option()]
PipelineParallelOpt = Annotated[int | None, pipeline_parallel_option()]
# SGLang's spellings, declared in each command beside vLLM's as `tp_size: SglangTensorParallel = None` and
# `pp_size: SglangPipelineParallel = None`: hidden (vLLM's option's help names them), and always None in the
# command, whose vLLM-spelled parameter receives the value.
SglangTensorParallel = Annotated[int | None, _sglang_option(_TP)]
SglangPipelineParallel = Annotated[int | None, _sglang_option(_PP)]
